"""Subscriptions against docs/protocol.md, driven by the `websockets` library:
``after`` replay then live with no gap and no duplicate, live-only from
``head``, ephemeral events, patterns, unsubscribe. Lagging subscribers are
in test_gateway_errors.py and test_gateway_slow_client.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from gateway_wire import connect, open_gateway

import callboard
from callboard.gateway import Gateway


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[callboard.Runtime, Gateway]]:
    async with open_gateway(tmp_path / "data") as served:
        yield served


def seqs(frames: list[dict]) -> list[int]:
    return [frame["seq"] for frame in frames]


async def test_subscribe_with_after_replays_stored_events_then_live_ones(served):
    rt, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            for _ in range(3):
                await client.ok("send", to="counter/a", type="add")
            await rt.wait_handled("counter/a", 3)
            sub = await client.ok("subscribe", actor="counter/a", after=2)
            stored = await client.events(sub["sub"], 2)
            for _ in range(2):
                await client.ok("send", to="counter/a", type="add")
            live = await client.events(sub["sub"], 2)
    assert sub == {"sub": "k1", "head": 4}
    assert [(e["seq"], e["type"], e["data"]) for e in stored + live] == [
        (3, "counted", {"count": 2}), (4, "counted", {"count": 3}),
        (5, "counted", {"count": 4}), (6, "counted", {"count": 5}),
    ]  # fmt: skip
    assert set(stored[0]) == {"op", "sub", "actor", "seq", "type", "data", "at"}
    assert stored[0]["at"].endswith("Z")


async def test_subscribing_with_after_while_events_are_committed_has_no_gap_or_duplicate(served):
    _, gateway = served
    with trio.fail_after(10):
        async with connect(gateway.url) as writer, connect(gateway.url) as reader:
            under_way = trio.Event()

            async def write_many() -> None:
                for i in range(61):
                    await writer.ok("send", to="counter/a", type="add")
                    if i == 10:
                        under_way.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(write_many)
                await under_way.wait()
                sub = await reader.ok("subscribe", actor="counter/a", after=0)
                events = await reader.events(sub["sub"], 62)  # started + 61 counted
    assert seqs(events) == list(range(1, 63))


async def test_subscribe_without_after_delivers_only_events_after_head(served):
    rt, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            await client.ok("send", to="counter/a", type="add")
            await rt.wait_handled("counter/a", 1)
            sub = await client.ok("subscribe", actor="counter/a")
            await client.ok("send", to="counter/a", type="add")
            (event,) = await client.events(sub["sub"], 1)
    assert sub == {"sub": "k1", "head": 2}
    assert (event["seq"], event["type"], event["data"]) == (3, "counted", {"count": 2})


async def test_ephemeral_events_carry_seq_null_and_are_never_replayed(served):
    _, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            await client.ok("send", to="counter/a", type="add")
            live = await client.ok("subscribe", actor="counter/a", after=0)
            # Caught up first: an ephemeral event published while the stream
            # still replays may come before or after stored ones it follows.
            got = await client.events(live["sub"], 2)
            await client.ok("send", to="counter/a", type="stream", body={"texts": ["a", "b"]})
            got += await client.events(live["sub"], 3)
            replay = await client.ok("subscribe", actor="counter/a", after=0)
            replayed = await client.events(replay["sub"], 3)
    assert [(e["seq"], e["type"]) for e in got] == [
        (1, "actor.started"), (2, "counted"), (None, "text.delta"), (None, "text.delta"),
        (3, "text.done"),
    ]  # fmt: skip
    assert [(e["seq"], e["type"]) for e in replayed] == [
        (1, "actor.started"), (2, "counted"), (3, "text.done"),
    ]  # fmt: skip


async def test_a_pattern_subscription_delivers_live_events_of_every_matching_actor(served):
    rt, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            counters = await client.ok("subscribe", actor="counter/*")
            everything = await client.ok("subscribe", actor="*")
            await client.ok("send", to="counter/a", type="add")
            await client.ok("send", to="counter/b", type="add")
            await client.ok("spawn", kind="keeper", name="k1")
            await rt.wait_handled("counter/a", 1)
            await rt.wait_handled("counter/b", 1)
            of_counters = await client.events(counters["sub"], 4)
            of_all = await client.events(everything["sub"], 5)
    assert counters == {"sub": "k1", "head": None}
    pairs = {(e["actor"], e["seq"], e["type"]) for e in of_counters}
    assert pairs == {
        ("counter/a", 1, "actor.started"), ("counter/a", 2, "counted"),
        ("counter/b", 1, "actor.started"), ("counter/b", 2, "counted"),
    }  # fmt: skip
    assert {(e["actor"], e["seq"], e["type"]) for e in of_all} == pairs | {
        ("keeper/k1", 1, "actor.started")
    }


async def test_after_with_a_pattern_is_refused_naming_the_field(served):
    _, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            reply = await client.request("subscribe", actor="counter/*", after=0)
    assert reply["code"] == "bad_request"
    assert "'after'" in reply["message"]


async def test_unsubscribe_ends_the_events_of_that_subscription(served):
    rt, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            gone = await client.ok("subscribe", actor="counter/a")
            witness = await client.ok("subscribe", actor="counter/a")
            assert await client.ok("unsubscribe", sub=gone["sub"]) == {}
            assert (gateway.statistics().subscriptions, rt.statistics().subscribers) == (1, 1)
            await client.ok("send", to="counter/a", type="add")
            await client.events(witness["sub"], 2)
            await client.ok("ping")
            assert [f for f in client.pending if f.get("sub") == gone["sub"]] == []
            assert await client.ok("unsubscribe", sub=gone["sub"]) == {}  # idempotent
