"""The operator's controls of an actor (stop, pause, resume, step, a state
edit) on a node that does not own it, two runtimes on one PostgreSQL
database: each is refused naming the way (through the owner's node), and
nothing happens to the actor: no second activation, no change, no hang."""

from __future__ import annotations

import pytest
import trio
from core_kinds import Counter

import callboard
from callboard.errors import BadRequest


async def test_controls_of_an_actor_active_on_another_node_are_refused_and_change_nothing(
    pg_url, tmp_path
):
    with trio.fail_after(30):
        async with (
            callboard.open_runtime(tmp_path / "a", kinds=[Counter], store=pg_url, node="a") as a,
            callboard.open_runtime(tmp_path / "b", kinds=[Counter], store=pg_url, node="b") as b,
        ):
            ack = await a.send("counter/x", "add", {"n": 1, "id": "m1"})
            await a.wait_handled("counter/x", ack.seq)
            refusals = []
            for control in (
                lambda: b.stop("counter/x"),
                lambda: b.pause("counter/x"),
                lambda: b.resume("counter/x"),
                lambda: b.step("counter/x"),
                lambda: b.replace_state("counter/x", {"total": 99, "seen": []}),
            ):
                with pytest.raises(BadRequest) as refused:
                    await control()
                refusals.append(str(refused.value))
            # The owner goes on as before, and a message through b reaches it there.
            ack = await b.send("counter/x", "add", {"n": 2, "id": "m2"})
            await a.wait_handled("counter/x", ack.seq)
            view = await a.inspect("counter/x")
            async with a.subscribe("counter/x", after=0) as events:
                types = []
                async for event in events:
                    types.append(event.type)
                    if event.type == "counted" and event.data["id"] == "m2":
                        break
    assert all("is active on another node" in r and "through that node" in r for r in refusals)
    assert (view.status, view.state) == ("active", {"total": 3, "seen": ["m1", "m2"]})
    assert types == ["actor.started", "counted", "counted"]  # started once, on a
