"""Every error code of docs/protocol.md, provoked honestly over a real connection
(driven by the `websockets` library), and lagged subscribers."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from credentials import TEST_TOKEN
from gateway_kinds import KINDS
from gateway_wire import connect, open_gateway
from websockets.exceptions import ConnectionClosed
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Request, TextMessage

import callboard
from callboard.gateway import Gateway, GatewayConfig


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[callboard.Runtime, Gateway]]:
    async with open_gateway(tmp_path / "data") as served:
        yield served


BAD_FRAMES = [
    ({"op": "send", "id": "1", "type": "add"}, "1", "'to'"),
    ({"op": "send", "id": "1", "to": 5, "type": "add"}, "1", "'to'"),
    ({"op": "send", "id": "1", "to": "nobody", "type": "add"}, "1", "'to'"),
    ({"op": "send", "id": "1", "to": "counter/a", "type": ""}, "1", "'type'"),
    ({"op": "send", "id": "1", "to": "counter/a", "type": "add", "key": 7}, "1", "'key'"),
    ({"op": "spawn", "id": "1", "kind": "Bad Kind"}, "1", "'kind'"),
    ({"op": "spawn", "id": "1", "kind": "keeper", "name": "no/slash"}, "1", "'name'"),
    ({"op": "subscribe", "id": "1", "actor": "counter/a", "after": -1}, "1", "'after'"),
    ({"op": "subscribe", "id": "1", "actor": "counter/a", "after": True}, "1", "'after'"),
    ({"op": "subscribe", "id": "1", "actor": "counter/a", "after": "3"}, "1", "'after'"),
    ({"op": "subscribe", "id": "1", "actor": "Counter/*"}, "1", "'actor'"),
    ({"op": "unsubscribe", "id": "1"}, "1", "'sub'"),
    ({"op": "list", "id": "1", "kind": 3}, "1", "'kind'"),
    ({"op": "list", "id": "1", "limit": 0}, "1", "'limit'"),
    ({"op": "list", "id": "1", "limit": "10"}, "1", "'limit'"),
    ({"op": "list", "id": "1", "after": 7}, "1", "'after'"),
    ({"op": "inspect", "id": "1", "actor": ["counter/a"]}, "1", "'actor'"),
    ({"op": "stop", "id": "1"}, "1", "'actor'"),
    ({"op": "hello", "id": "1"}, "1", "hello"),
    ({"op": "launch", "id": "1"}, "1", "'op'"),
    ({"id": "1"}, "1", "'op'"),
    ({"op": "ping"}, None, "'id'"),
    ({"op": "ping", "id": 5}, None, "'id'"),
    ({"op": "ping", "id": "x" * 300}, None, "'id'"),
    ("this is not json", None, "not JSON"),
    ("[1, 2]", None, "JSON object"),
    ("null", None, "JSON object"),
]


@pytest.mark.parametrize(("frame", "rid", "named"), BAD_FRAMES)
async def test_a_bad_request_is_answered_naming_the_field_and_the_connection_stays_open(
    served, frame, rid, named
):
    _, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            await client.send_frame(frame if isinstance(frame, str) else json.dumps(frame))
            reply = await client.receive()
            assert await client.ok("ping") == {}
    assert (reply["op"], reply["id"], reply["code"]) == ("error", rid, "bad_request")
    assert named in reply["message"]


async def test_a_binary_frame_is_a_bad_request(served):
    _, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            await client.ws.send(b'{"op": "ping", "id": "1"}')
            reply = await client.receive()
    assert (reply["id"], reply["code"]) == (None, "bad_request")
    assert "text frame" in reply["message"]


@pytest.mark.parametrize(
    ("op", "fields"),
    [
        ("inspect", {"actor": "keeper/nobody"}),
        ("stop", {"actor": "keeper/nobody"}),
        ("subscribe", {"actor": "keeper/nobody", "after": 0}),
        ("send", {"to": "keeper/nobody", "type": "note"}),
    ],
)
async def test_an_address_without_an_actor_is_unknown_actor(served, op, fields):
    _, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            reply = await client.request(op, **fields)
    assert (reply["op"], reply["code"]) == ("error", "unknown_actor")
    assert "keeper/nobody" in reply["message"]


@pytest.mark.parametrize(
    ("op", "fields"),
    [
        ("spawn", {"kind": "ghost"}),
        ("send", {"to": "ghost/a", "type": "boo"}),
        ("subscribe", {"actor": "ghost/*"}),
        ("subscribe", {"actor": "ghost/a"}),
        ("inspect", {"actor": "ghost/a"}),
        ("list", {"kind": "ghost"}),
    ],
)
async def test_a_kind_nobody_registered_is_unknown_kind(served, op, fields):
    _, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            reply = await client.request(op, **fields)
    assert (reply["op"], reply["code"]) == ("error", "unknown_kind")
    assert "'ghost'" in reply["message"]


async def test_a_frame_over_the_limit_is_too_large_and_nothing_is_sent(tmp_path):
    config = GatewayConfig(port=0, token=TEST_TOKEN, max_frame=1024)
    with trio.fail_after(5):
        async with open_gateway(tmp_path / "data", config) as (rt, gateway):
            async with connect(gateway.url) as client:
                big = {
                    "op": "send",
                    "id": "1",
                    "to": "counter/a",
                    "type": "add",
                    "body": "x" * 2000,
                }
                await client.send_frame(big)
                reply = await client.receive()
                assert await client.ok("ping") == {}
            assert await rt.list() == []
    assert (reply["op"], reply["id"], reply["code"]) == ("error", "1", "too_large")


async def test_a_frame_over_four_times_the_limit_closes_the_connection_with_1009(tmp_path):
    config = GatewayConfig(port=0, token=TEST_TOKEN, max_frame=1024)
    with trio.fail_after(5):
        async with open_gateway(tmp_path / "data", config) as (_, gateway):
            async with connect(gateway.url) as client:
                await client.send_frame("x" * 5000)
                with pytest.raises(ConnectionClosed) as closed:
                    await client.receive()
                async with connect(gateway.url) as other:
                    assert await other.ok("ping") == {}
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


async def test_requests_over_the_rate_limit_are_rate_limited(tmp_path):
    config = GatewayConfig(port=0, token=TEST_TOKEN, rate_limit=0.001, rate_burst=2)
    with trio.fail_after(5):
        async with open_gateway(tmp_path / "data", config) as (_, gateway):
            async with connect(gateway.url) as client:
                replies = [await client.request("ping") for _ in range(3)]
    assert [r["op"] for r in replies] == ["ok", "ok", "error"]
    assert replies[2]["code"] == "rate_limited"


async def test_subscriptions_over_the_limit_are_rate_limited(tmp_path):
    config = GatewayConfig(port=0, token=TEST_TOKEN, max_subscriptions=1, send_queue=8)
    with trio.fail_after(5):
        async with open_gateway(tmp_path / "data", config) as (_, gateway):
            async with connect(gateway.url) as client:
                first = await client.request("subscribe", actor="counter/a")
                second = await client.request("subscribe", actor="counter/b")
                await client.ok("unsubscribe", sub=first["sub"])
                third = await client.request("subscribe", actor="counter/b")
    assert [first["op"], second["op"], third["op"]] == ["ok", "error", "ok"]
    assert second["code"] == "rate_limited"


async def test_requests_after_the_runtime_closed_are_unavailable_and_nothing_is_accepted(
    tmp_path,
):
    close_runtime = trio.Event()
    runtime_closed = trio.Event()

    async def run_runtime(task_status: trio.TaskStatus[callboard.Runtime]) -> None:
        async with callboard.open_runtime(tmp_path / "data", kinds=KINDS) as rt:
            task_status.started(rt)
            await close_runtime.wait()
        runtime_closed.set()

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            rt = await nursery.start(run_runtime)
            url = await nursery.start(
                callboard.gateway.serve_gateway, rt, GatewayConfig(port=0, token=TEST_TOKEN)
            )
            async with connect(url) as client:
                close_runtime.set()
                await runtime_closed.wait()
                sent = await client.request("send", to="counter/a", type="add")
                spawned = await client.request("spawn", kind="keeper", name="k1")
                assert await client.ok("ping") == {}
            nursery.cancel_scope.cancel()
        async with callboard.open_runtime(tmp_path / "data", kinds=KINDS) as reopened:
            assert await reopened.list() == []
    assert (sent["code"], spawned["code"]) == ("unavailable", "unavailable")


async def test_a_bug_in_a_kind_is_answered_internal_and_the_server_goes_on(served):
    _, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            await client.ok("spawn", kind="broken", name="b1")
            reply = await client.request("inspect", actor="broken/b1")
            assert await client.ok("ping") == {}
    assert (reply["op"], reply["code"]) == ("error", "internal")
    assert "RuntimeError: Broken.initial_state has a bug" in reply["message"]
    assert "report" in reply["message"]


async def test_a_lagging_subscriber_is_told_where_to_resume_and_resuming_gives_the_rest(
    tmp_path,
):
    config = GatewayConfig(port=0, token=TEST_TOKEN, subscriber_buffer=4)
    with trio.fail_after(5):
        async with open_gateway(tmp_path / "data", config) as (rt, gateway):
            async with connect(gateway.url) as client:
                await client.ok("send", to="counter/a", type="add")
                await rt.wait_handled("counter/a", 1)
                sub = await client.ok("subscribe", actor="counter/a")
                await client.ok("send", to="counter/a", type="burst", body={"n": 10})
                got = await client.events(sub["sub"], 5)
                lagged = got.pop()
                resumed = await client.ok("subscribe", actor="counter/a", after=lagged["after"])
                rest = await client.events(resumed["sub"], 6)
                await client.ok("send", to="counter/a", type="add")
                (live,) = await client.events(resumed["sub"], 1)
            assert gateway.statistics().lagged_total == 1
    assert [e["seq"] for e in got] == [3, 4, 5, 6]
    assert lagged == {"op": "lagged", "sub": sub["sub"], "actor": "counter/a", "after": 6}
    assert [e["seq"] for e in rest] == [7, 8, 9, 10, 11, 12]
    assert [e["data"]["i"] for e in got + rest] == list(range(10))
    assert (live["seq"], live["type"]) == (13, "counted")


async def test_a_lagging_pattern_subscription_is_told_to_resubscribe_live(tmp_path):
    config = GatewayConfig(port=0, token=TEST_TOKEN, subscriber_buffer=4)
    with trio.fail_after(5):
        async with open_gateway(tmp_path / "data", config) as (_, gateway):
            async with connect(gateway.url) as client:
                sub = await client.ok("subscribe", actor="counter/*")
                await client.ok("send", to="counter/a", type="burst", body={"n": 10})
                got = await client.events(sub["sub"], 6)
    assert [e["seq"] for e in got[:-1]] == [1, 2, 3, 4, 5]  # actor.started, then the burst
    assert got[-1] == {"op": "lagged", "sub": sub["sub"], "actor": "counter/*", "after": None}


async def test_a_ping_after_the_servers_close_frame_ends_the_connection_quietly(tmp_path, caplog):
    # trio-websocket answers such a ping although its close frame went out, and
    # wsproto refuses: that must read as a connection ending, not as a failure.
    caplog.set_level(logging.INFO, logger="callboard.gateway")
    async with open_gateway(tmp_path / "data") as (_, gateway):
        port = int(gateway.url.rsplit(":", 1)[1].split("/")[0])
        with trio.fail_after(10):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with stream:
                ws = WSConnection(ConnectionType.CLIENT)

                async def until(kind: type) -> object:
                    while True:
                        for event in ws.events():
                            if isinstance(event, kind):
                                return event
                        ws.receive_data(await stream.receive_some(65536))

                await stream.send_all(ws.send(Request(host="localhost", target="/v1")))
                await until(AcceptConnection)
                # Any op before hello is refused and the server closes (1008).
                await stream.send_all(ws.send(TextMessage('{"op": "ping", "id": "1"}')))
                close = await until(CloseConnection)
                # A masked ping frame, by hand: wsproto sends nothing once closing.
                # And no close reply, so the server waits in its closing state.
                await stream.send_all(bytes([0x89, 0x84, 0, 0, 0, 0]) + b"late")
                while await stream.receive_some(65536):
                    pass  # until the server drops the TCP connection
    assert close.code == 1008
    records = [r for r in caplog.records if r.name == "callboard.gateway"]
    assert [r.levelname for r in records if r.levelno >= logging.ERROR] == []
    assert any("ended while closing" in r.getMessage() for r in records)
