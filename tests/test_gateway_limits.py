"""Limits at the door, over a real connection: a frame is refused when a later
stage could not carry what it holds (nesting past what frames can encode) or
would carry it changed (a key given twice, an integer past 64 bits); and an
event that cannot be encoded, stored before these limits, ends no stream."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from credentials import TEST_TOKEN
from gateway_wire import connect, open_gateway

import callboard
from callboard.codec import dumps
from callboard.gateway import Gateway, GatewayConfig
from callboard.mailbox import MAX_DEPTH
from callboard.store import Commit, NewEvent, open_sqlite_store

AT = 1_700_000_000.0  # 2023-11-14T22:13:20.000Z
RANGE = "(-9223372036854775808 to 18446744073709551615); send it as a string"
REPEATED = "give each key once (a repeated key would silently replace the first)"


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[callboard.Runtime, Gateway]]:
    async with open_gateway(tmp_path / "data") as served:
        yield served


def nest(depth: int, leaf: Any = "bottom") -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 254])
@pytest.mark.parametrize(
    ("op", "field", "fields"),
    [
        ("send", "body", {"to": "counter/a", "type": "add"}),
        ("spawn", "spec", {"kind": "keeper", "name": "k1"}),
    ],
)
async def test_a_value_nested_deeper_than_the_limit_is_refused_at_the_door_naming_it(
    served, depth, op, field, fields
):
    rt, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            reply = await client.request(op, **fields, **{field: nest(depth)})
            assert await client.ok("ping") == {}
        assert await rt.list() == []
    assert (reply["op"], reply["code"]) == ("error", "bad_request")
    assert reply["message"] == (
        f"the value at /{field} nests arrays and objects deeper than 128 levels, the limit"
    )


async def test_the_deepest_body_allowed_goes_through_send_handling_emit_live_and_replay(served):
    rt, gateway = served
    deepest = nest(MAX_DEPTH)
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            await client.ok("spawn", kind="keeper", name="k1")
            first = await client.ok("send", to="keeper/k1", type="note", body={"first": True})
            await rt.wait_handled("keeper/k1", first["seq"])
            live = await client.ok("subscribe", actor="keeper/k1")
            sent = await client.ok("send", to="keeper/k1", type="note", body=deepest)
            (heard,) = await client.events(live["sub"], 1)
            replay = await client.ok("subscribe", actor="keeper/k1", after=live["head"])
            (replayed,) = await client.events(replay["sub"], 1)
    assert (live["head"], sent["seq"]) == (2, 2)
    assert (heard["seq"], heard["type"], heard["data"]) == (3, "noted", deepest)
    assert {k: v for k, v in replayed.items() if k != "sub"} == {
        k: v for k, v in heard.items() if k != "sub"
    }


async def test_a_stored_event_that_cannot_be_encoded_comes_as_a_stand_in_and_streams_go_on(
    tmp_path,
):
    data = tmp_path / "data"
    with trio.fail_after(10):
        # Written as an older version could have: its door let a 254-deep body in,
        # and the event frame would add one level more than orjson encodes.
        async with open_sqlite_store(data) as store:
            await store.spawn("keeper/old", "keeper", b"null")
            deep, after = NewEvent("noted", dumps(nest(254)), AT), NewEvent("noted", b"2", AT)
            await store.commit(Commit("keeper/old", events=(deep, after)))
        async with open_gateway(data) as (_, gateway), connect(gateway.url) as client:
            replay = await client.ok("subscribe", actor="keeper/old", after=0)
            stand_in, second = await client.events(replay["sub"], 2)
            live = await client.ok("subscribe", actor="keeper/old")
            await client.ok("send", to="keeper/old", type="note", body="live")
            replayed_on = await client.events(replay["sub"], 2)
            heard = await client.events(live["sub"], 2)
            again = await client.ok("subscribe", actor="keeper/old", after=0)
            (stand_in_again,) = await client.events(again["sub"], 1)
            assert await client.ok("ping") == {}
    assert stand_in == {
        "op": "event", "sub": replay["sub"], "actor": "keeper/old", "seq": 1, "type": "noted",
        "data": None, "at": "2023-11-14T22:13:20.000Z",
        "error": {
            "code": "unencodable",
            "message": "event 1 of 'keeper/old' cannot be encoded as JSON (Recursion limit "
            "reached); it is sent without its data",
        },
    }  # fmt: skip
    assert (second["seq"], second["data"]) == (2, 2)
    assert live["head"] == 2
    assert [(e["seq"], e["type"]) for e in replayed_on] == [(3, "actor.started"), (4, "noted")]
    assert [(e["seq"], e["type"]) for e in heard] == [(3, "actor.started"), (4, "noted")]
    assert heard[1]["data"] == "live"
    assert stand_in_again == {**stand_in, "sub": again["sub"]}


async def test_an_ephemeral_event_that_cannot_be_encoded_does_not_end_the_live_stream(served):
    _, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            sub = await client.ok("subscribe", actor="digger/d")
            await client.ok("send", to="digger/d", type="dig", body={"depth": 254})
            frames = await client.events(sub["sub"], 3)
            await client.ok("send", to="digger/d", type="dig", body={"depth": 3})
            after = await client.events(sub["sub"], 2)
    assert [(f["seq"], f["type"]) for f in frames] == [
        (1, "actor.started"), (None, "dig.deep"), (2, "dug"),
    ]  # fmt: skip
    assert (frames[1]["data"], frames[1]["error"]["code"]) == (None, "unencodable")
    assert frames[1]["error"]["message"] == (
        "an ephemeral event of 'digger/d' cannot be encoded as JSON (Recursion limit reached); "
        "it is sent without its data"
    )
    assert [(f["seq"], f["type"], f["data"]) for f in after] == [
        (None, "dig.deep", nest(3)), (3, "dug", {"depth": 3}),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("frame", "rid", "message"),
    [
        (
            '{"op": "send", "id": "1", "to": "counter/a", "type": "add", "to": "keeper/k"}',
            "1", f"the top-level object has the key 'to' more than once; {REPEATED}",
        ),
        (
            '{"op": "send", "id": "1", "to": "counter/a", "type": "add", "body": {"n": 1, "n": 2}}',
            "1", f"the object at /body has the key 'n' more than once; {REPEATED}",
        ),
        (  # the escaped colon would hide the repeated key from a count of colons
            '{"op": "send", "id": "1", "to": "counter/a", "type": "add",'
            ' "body": {"a\\u003a": 0, "n": 1, "n": 2}}',
            "1", f"the object at /body has the key 'n' more than once; {REPEATED}",
        ),
        (
            '{"op": "ping", "id": "1", "id": "2"}',
            None, f"the top-level object has the key 'id' more than once; {REPEATED}",
        ),
        (
            json.dumps({"op": "send", "id": "1", "to": "counter/a", "type": "add",
                        "body": {"n": 18446744073709551617}}),
            "1", f"the value at /body/n is the integer 18446744073709551617, outside the 64-bit "
            f"range integers are kept in exactly {RANGE}",
        ),
        (
            json.dumps({"op": "send", "id": "1", "to": "counter/a", "type": "add",
                        "body": [-9223372036854775809]}),
            "1", f"the value at /body/0 is the integer -9223372036854775809, outside the 64-bit "
            f"range integers are kept in exactly {RANGE}",
        ),
        (
            json.dumps({"op": "subscribe", "id": "1", "actor": "counter/a", "after": 2**64}),
            "1", f"the value at /after is the integer 18446744073709551616, outside the 64-bit "
            f"range integers are kept in exactly {RANGE}",
        ),
        (
            json.dumps({"op": "send", "id": "1", "to": "counter/a", "type": "add\x00"}),
            "1", "field 'type' must not hold control characters or lone surrogates, got "
            "'\\x00' at index 3",
        ),
        (
            json.dumps({"op": "send", "id": "1", "to": "counter/a", "type": "t" * 129}),
            "1", "field 'type' must be at most 128 characters, got 129",
        ),
        (
            json.dumps({"op": "send", "id": "1", "to": "counter/a", "type": "add",
                        "key": "k" * 1_000_000}),
            "1", "field 'key' must be at most 256 characters, got 1000000",
        ),
        (
            json.dumps({"op": "send", "id": "1", "to": "counter/a", "type": "add",
                        "key": "k\x1b[2J"}),
            "1", "field 'key' must not hold control characters or lone surrogates, got "
            "'\\x1b' at index 1",
        ),
        (
            json.dumps({"op": "send", "id": "1", "to": "counter/a\x00", "type": "add"}),
            "1", "field 'to' must be an address KIND/NAME (e.g. 'session/s1'), got "
            '"counter/a\\u0000" (a string)',
        ),
        (
            "[" * 300 + "]" * 300,
            None, "the frame must be a JSON object with an 'op', got [...] (an array)",
        ),
    ],
)  # fmt: skip
async def test_a_frame_that_would_arrive_changed_is_refused_naming_why_and_nothing_is_done(
    served, frame, rid, message
):
    rt, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            await client.send_frame(frame)
            reply = await client.receive()
            assert await client.ok("ping") == {}
        assert await rt.list() == []
    assert reply == {"op": "error", "id": rid, "code": "bad_request", "message": message}


async def test_integers_at_the_ends_of_64_bits_and_a_type_and_key_at_their_limits_arrive_exactly(
    served,
):
    rt, gateway = served
    body = {"min": -(2**63), "max": 2**64 - 1, "big float": 1e19}
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            await client.ok("spawn", kind="keeper", name="k1")
            sent = await client.ok("send", to="keeper/k1", type="t" * 128, key="k" * 256, body=body)
            await rt.wait_handled("keeper/k1", sent["seq"])
            sub = await client.ok("subscribe", actor="keeper/k1", after=0)
            started, noted = await client.events(sub["sub"], 2)
            view = await client.ok("inspect", actor="keeper/k1")
    assert (started["type"], noted["type"], noted["data"]) == ("actor.started", "noted", body)
    assert view["cursor"] == 1


class Gate(callboard.Actor):
    """Virtual. Its handler says it has started, then waits for the test to open it."""

    kind = "gate"
    virtual = True
    started: list[str]
    both_started: trio.Event
    opened: trio.Event

    async def handle(self, ctx: callboard.Context, message: callboard.Message) -> None:
        Gate.started.append(ctx.address)
        if len(Gate.started) == 2:
            Gate.both_started.set()
        await Gate.opened.wait()


async def test_past_max_inflight_the_connection_reads_no_more_until_a_request_is_answered(
    tmp_path,
):
    Gate.started, Gate.both_started, Gate.opened = [], trio.Event(), trio.Event()
    config = GatewayConfig(port=0, token=TEST_TOKEN, max_inflight=2)
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path / "data", kinds=[Gate]) as rt:
            gateway = Gateway(rt, config)
            async with trio.open_nursery() as nursery:
                await nursery.start(gateway.serve)
                async with connect(gateway.url) as client:
                    for name in ("a", "b"):  # answered once handled: both held by the gate
                        await client.send_frame(
                            {"op": "send", "id": name, "to": f"gate/{name}", "type": "go",
                             "wait": True}
                        )  # fmt: skip
                    await client.send_frame({"op": "ping", "id": "ping"})
                    # Read at once, the ping would have been answered long before
                    # both handlers started: each start follows a group commit.
                    await Gate.both_started.wait()
                    Gate.opened.set()
                    replies = [await client.receive() for _ in range(3)]
                nursery.cancel_scope.cancel()
    assert replies[0]["id"] in ("a", "b"), replies
    assert sorted(r["id"] for r in replies) == ["a", "b", "ping"]
    assert {r["op"] for r in replies} == {"ok"}
