"""Clients that stop reading: the server's memory stays bounded (counted in
queued frames, the gateway's own statistic), other clients are answered, and
the slow one is told where to resume or, if it reads nothing at all, dropped.

The slow clients are `websockets` connections with a tiny ``max_queue``: past
it the library stops reading the socket, as a stuck client would. Kernel
socket buffers absorb a few MB first, so the tests push big events until the
gateway reports the effect, checking each step by events, never by sleeping.
"""

from __future__ import annotations

import json

import trio
from credentials import TEST_TOKEN
from gateway_wire import connect, open_gateway
from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State
from websockets.uri import parse_uri

from callboard.gateway import GatewayConfig

PAD = 64 * 1024


async def test_a_subscriber_that_stops_reading_is_told_where_to_resume_and_memory_stays_bounded(
    tmp_path,
):
    config = GatewayConfig(port=0, token=TEST_TOKEN, send_queue=32, max_subscriptions=4)
    with trio.fail_after(30):
        async with open_gateway(tmp_path / "data", config) as (rt, gateway):
            async with (
                connect(gateway.url, max_queue=2) as slow,
                connect(gateway.url, max_size=None) as fast,
            ):
                await fast.ok("send", to="counter/a", type="add")
                await rt.wait_handled("counter/a", 1)
                slow_sub = await slow.ok("subscribe", actor="counter/a")
                fast_sub = await fast.ok("subscribe", actor="counter/a")
                bursts = 0
                while gateway.statistics().lagged_total == 0:
                    assert bursts < 40, "the slow subscriber never lagged"
                    await fast.ok("send", to="counter/a", type="burst", body={"n": 20, "size": PAD})
                    await fast.events(fast_sub["sub"], 20)  # the fast one keeps up
                    bursts += 1
                    assert gateway.statistics().queued_frames_peak <= config.send_queue
                with trio.fail_after(1):
                    assert await fast.ok("ping") == {}
                head = await rt.head("counter/a")

                # The slow client reads at last: events, then where to resume.
                received = []
                while (frame := await slow.receive())["op"] == "event":
                    received.append(frame["seq"])
                lagged = frame
                resumed = await slow.ok("subscribe", actor="counter/a", after=lagged["after"])
                rest = await slow.events(resumed["sub"], head - lagged["after"])
            stats = gateway.statistics()
    assert slow_sub["head"] == 2
    assert received == list(range(3, lagged["after"] + 1))
    assert lagged == {"op": "lagged", "sub": slow_sub["sub"], "actor": "counter/a",
                      "after": received[-1] if received else 2}  # fmt: skip
    assert [e["seq"] for e in rest] == list(range(lagged["after"] + 1, head + 1))
    assert (stats.lagged_total, stats.dropped_total) == (1, 0)
    assert stats.queued_frames_peak <= config.send_queue


async def test_a_client_that_reads_nothing_is_dropped_after_send_timeout_and_others_go_on(
    tmp_path,
):
    config = GatewayConfig(
        port=0,
        token=TEST_TOKEN,
        send_timeout=0.5,
        max_inflight=4,
        send_queue=16,
        max_subscriptions=2,
    )
    with trio.fail_after(30):
        async with open_gateway(tmp_path / "data", config) as (rt, gateway):
            async with (
                connect(gateway.url, max_queue=1, max_size=None) as slow,
                connect(gateway.url) as fast,
            ):
                await fast.ok("send", to="counter/a", type="grow", body={"size": 8 * PAD})
                await rt.wait_handled("counter/a", 1)
                async with trio.open_nursery() as nursery:

                    async def ask_without_reading() -> None:
                        for i in range(60):
                            await slow.send_frame({"op": "inspect", "id": f"i{i}",
                                                   "actor": "counter/a"})  # fmt: skip

                    nursery.start_soon(ask_without_reading)
                    pings = 0
                    while gateway.statistics().dropped_total == 0:
                        with trio.fail_after(1):  # others stay answered meanwhile
                            assert await fast.ok("ping") == {}
                        pings += 1
                    nursery.cancel_scope.cancel()
                stats = gateway.statistics()
                replies = []  # whole frames only: none was corrupted by the drop
                try:
                    while True:
                        frame = await slow.receive()
                        assert (frame["op"], frame["state"]) == ("ok", {"blob": "x" * 8 * PAD})
                        replies.append(frame["id"])
                except ConnectionClosed as exc:
                    closed = exc
                assert await fast.ok("ping") == {}
    assert closed.rcvd is None  # TCP was closed: no close frame after a half-sent one
    assert 0 < len(replies) < 60
    assert len(set(replies)) == len(replies)
    assert (stats.dropped_total, stats.connections_total) == (1, 2)
    assert stats.queued_frames_peak <= config.send_queue
    assert pings > 0


async def _raw_hello(url: str) -> trio.SocketStream:
    """A client that completes the handshake and says hello, then reads nothing
    (so it answers no ping): the `websockets` sans-I/O protocol over a raw socket."""
    stream = await trio.open_tcp_stream("127.0.0.1", int(url.rsplit(":", 1)[1].split("/")[0]))
    protocol = ClientProtocol(parse_uri(url))
    protocol.send_request(protocol.connect())
    for chunk in protocol.data_to_send():
        await stream.send_all(chunk)
    while protocol.state is not State.OPEN:
        protocol.receive_data(await stream.receive_some())
    hello = {"op": "hello", "id": "h", "protocol": 1, "token": TEST_TOKEN}
    protocol.send_text(json.dumps(hello).encode())
    for chunk in protocol.data_to_send():
        await stream.send_all(chunk)
    return stream


async def test_a_client_that_answers_no_ping_is_dropped_with_1011(tmp_path):
    config = GatewayConfig(
        port=0, token=TEST_TOKEN, ping_interval=0.1, idle_timeout=0.2, close_timeout=0.2
    )
    with trio.fail_after(10):
        async with open_gateway(tmp_path / "data", config) as (_, gateway):
            stream = await _raw_hello(gateway.url)
            received = b""
            while chunk := await stream.receive_some():  # until the server closes TCP
                received += chunk
            await stream.aclose()
            stats = gateway.statistics()
    assert b"\x89" in received  # a ping frame (FIN + opcode 9) was sent
    assert received.endswith(b"\x88\x16\x03\xf3no pong within 0.2 s")  # then close 1011
    assert stats.dropped_total == 1


async def test_a_connection_that_never_finishes_the_http_handshake_is_closed(tmp_path):
    config = GatewayConfig(port=0, token=TEST_TOKEN, handshake_timeout=0.2)
    with trio.fail_after(10):
        async with open_gateway(tmp_path / "data", config) as (_, gateway):
            port = int(gateway.url.rsplit(":", 1)[1].split("/")[0])
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(b"GET /v1 HTTP/1.1\r\nHost: x\r\n")  # and nothing more
            assert await stream.receive_some() == b""
            await stream.aclose()
            async with connect(gateway.url) as client:
                assert await client.ok("ping") == {}
            assert gateway.statistics().connections_total == 1
