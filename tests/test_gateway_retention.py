"""Retention seen from a client: a subscription asking for pruned events is
answered ``pruned`` with the first seq still held, on the wire (driven by the
`websockets` library)."""

from __future__ import annotations

import trio
from gateway_wire import connect, open_gateway

import callboard

# The retention service waits for the tests to run their own passes.
CONFIG = callboard.RuntimeConfig(event_retention=3, retention_interval=1e9)

PRUNED = (
    "the events of 'counter/a' before seq 5 were pruned by retention; subscribe with "
    "after=4 for the events still held (more are kept with a larger "
    "RuntimeConfig.event_retention or event_max_age)"
)


async def test_subscribing_after_a_pruned_seq_is_answered_pruned_naming_the_first_held(tmp_path):
    with trio.fail_after(10):
        async with (
            open_gateway(tmp_path / "data", runtime_config=CONFIG) as (rt, gateway),
            connect(gateway.url) as client,
        ):
            for _ in range(6):
                await client.ok("send", to="counter/a", type="add")
            await rt.wait_handled("counter/a", 6)
            await rt.retention.run_pass()
            refused = await client.request("subscribe", actor="counter/a", after=1)
            sub = await client.ok("subscribe", actor="counter/a", after=refused["first"] - 1)
            held = await client.events(sub["sub"], 3)
            pong = await client.request("ping")
    # actor.started and six counted: the newest 3 stay.
    assert refused == {
        "op": "error", "id": "r7", "code": "pruned", "message": PRUNED,
        "actor": "counter/a", "first": 5,
    }  # fmt: skip
    assert [frame["seq"] for frame in held] == [5, 6, 7]
    assert pong["op"] == "ok"  # the connection stays open
