"""Retention seen from a client: a subscription asking for pruned events is
answered ``pruned`` with the first seq still held, on the wire (driven by the
`websockets` library) and by `callboard.client` as `callboard.Pruned`."""

from __future__ import annotations

import pytest
import trio
from client_helpers import serving
from gateway_wire import connect, open_gateway

import callboard
from callboard import client as cb_client

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


async def test_the_client_raises_pruned_for_a_subscription_after_a_pruned_seq(tmp_path):
    with trio.fail_after(10):
        async with (
            serving(tmp_path, runtime=CONFIG) as server,
            cb_client.connect(server.url) as client,
        ):
            for _ in range(6):
                ack = await client.send("counter/a", "add")
            assert server.rt is not None
            await server.rt.wait_handled("counter/a", ack.seq)
            await server.rt.retention.run_pass()
            with pytest.raises(callboard.Pruned) as pruned:
                async with client.subscribe("counter/a", after=0):
                    pass
    assert (pruned.value.actor, pruned.value.first, str(pruned.value)) == ("counter/a", 5, PRUNED)
