"""The fence: a node paused (SIGSTOP) past its lease, whose actor another node
took meanwhile, commits nothing for that actor once it runs again, though it
was in the middle of handling a message. Checked in the database."""

from __future__ import annotations

import json
import signal
from typing import Any

import trio
from serve_helpers import connect_to
from test_pg_nodes import handled_log, node, owners, query


async def wait_event(client: Any, sub: str, wanted: dict[str, Any]) -> dict[str, Any]:
    while True:
        (frame,) = await client.events(sub, 1)
        if all(frame.get(k) == v for k, v in wanted.items()):
            return frame


async def test_a_node_paused_past_its_lease_commits_nothing_for_the_actor_it_lost(pg_url, tmp_path):
    actor = "ledger/x"
    done = tmp_path / "done"  # a's handler of "hold" ends once this exists
    with trio.fail_after(90):
        async with (
            node(tmp_path / "a", pg_url, "a", LEDGER_HOLD_UNTIL=str(done)) as a,
            node(tmp_path / "b", pg_url, "b") as b,
            connect_to(a) as via_a,
            connect_to(b) as via_b,
        ):
            on_a = (await via_a.ok("subscribe", actor=actor, after=0))["sub"]
            on_b = (await via_b.ok("subscribe", actor=actor, after=0))["sub"]
            body = {"sender": "t", "n": 1}
            await via_a.ok("send", to=actor, type="add", body=body, key="t-1")
            await wait_event(via_a, on_a, {"type": "handled", "data": ["a", "t", 1]})
            # a starts handling a message, and is paused in the middle of it.
            body = {"sender": "t", "n": 2}
            await via_a.ok("send", to=actor, type="hold", body=body, key="t-2")
            await wait_event(via_a, on_a, {"type": "holding"})
            a.process.send_signal(signal.SIGSTOP)
            try:
                (epoch_of_a,) = query(
                    pg_url, "SELECT epoch FROM callboard_ownership WHERE address = %s", actor
                )[0]
                # b stores a message for it; once a's lease has expired, b takes
                # the actor and handles both, from a's last commit.
                body = {"sender": "t", "n": 3}
                await via_b.ok("send", to=actor, type="add", body=body, key="t-3")
                await wait_event(via_b, on_b, {"type": "handled", "data": ["b", "t", 3]})
                assert owners(pg_url)[actor] == "b"
            finally:
                done.touch()  # a's handler ends as soon as a runs again
                a.process.send_signal(signal.SIGCONT)
            # a wakes with its handler done: its commit meets the fence (or its
            # watchdog stops the actor first); either way a says it stopped.
            await a.wait_logged("stop")
            # And a is still a node: a message sent through it reaches b.
            body = {"sender": "t", "n": 4}
            await via_a.ok("send", to=actor, type="add", body=body, key="t-4")
            await wait_event(via_b, on_b, {"type": "handled", "data": ["b", "t", 4]})
            log = handled_log(pg_url)
            events = [
                json.loads(bytes(data))
                for (data,) in query(
                    pg_url,
                    "SELECT data FROM events WHERE address = %s AND type = 'handled' ORDER BY seq",
                    actor,
                )
            ]
            (row,) = query(
                pg_url,
                "SELECT o.node, o.epoch, a.state FROM callboard_ownership o "
                "JOIN actors a ON a.address = o.address WHERE o.address = %s",
                actor,
            )
            for served in (a, b):
                served.process.send_signal(signal.SIGTERM)
                assert await served.process.wait() == 0
    expected = [["a", "t", 1], ["b", "t", 2], ["b", "t", 3], ["b", "t", 4]]
    assert log[actor] == expected
    assert events == expected
    owner, epoch, state = row
    assert owner == "b" and epoch > epoch_of_a
    assert json.loads(bytes(state)) == {"handled": 4}
