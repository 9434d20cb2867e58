"""Replays of big events over the gateway (``subscribe`` with ``after``): every
event arrives in order with no gap and no ``lagged``, at the pace of the
client, while the server answers others and holds no more for a connection
than its outbox budget and one page.

A client that stops reading is felt by the server only once the kernel's
socket buffers are full. The slow clients here use a socket with a 64 KB
receive buffer (`small_window`), and the replays are far larger than the
server's send buffer (4 MB at most), so a replay is still under way
whenever a test says so; each step is ordered by events, never by sleeping.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing
from credentials import TEST_TOKEN
from gateway_wire import Client, connect, open_gateway

import callboard
from callboard.gateway import GatewayConfig

EVENTS = 200


@asynccontextmanager
async def small_window(url: str, **options: Any) -> AsyncIterator[Client]:
    """A client whose socket takes in at most about 64 KB it has not read."""
    sock = trio.socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    await sock.connect(("127.0.0.1", int(url.rsplit(":", 1)[1].split("/")[0])))
    async with connect(url, stream=trio.SocketStream(sock), max_queue=1, **options) as client:
        yield client


async def store_events(client: Client, rt: callboard.Runtime, count: int, size: int) -> int:
    """``count`` events of ``counter/a``, each with ``size`` characters of
    padding, after its ``actor.started``; returns its head."""
    for _ in range(count // 20):
        ack = await client.ok("send", to="counter/a", type="burst", body={"n": 20, "size": size})
    await rt.wait_handled("counter/a", ack["seq"])
    return await rt.head("counter/a")


async def test_a_replay_of_big_events_to_several_subscribers_is_whole_while_others_are_answered(
    tmp_path,
):
    size = 256 * 1024
    subscribers = 3
    received: list[list[int]] = [[] for _ in range(subscribers)]
    padding: list[list[int]] = [[] for _ in range(subscribers)]
    started = [trio.Event() for _ in range(subscribers)]
    pinged = trio.Event()
    with trio.fail_after(60):
        async with open_gateway(tmp_path / "data") as (rt, gateway):
            async with connect(gateway.url) as other:
                head = await store_events(other, rt, EVENTS, size)

                async def replay(n: int) -> None:
                    async with connect(gateway.url) as client:
                        sub = await client.ok("subscribe", actor="counter/a", after=0)
                        while len(received[n]) < head:
                            if len(received[n]) == 10:
                                started[n].set()
                                await pinged.wait()
                            frame = await client.receive()
                            assert (frame["op"], frame["sub"]) == ("event", sub["sub"]), frame
                            received[n].append(frame["seq"])
                            if frame["type"] == "burst":
                                padding[n].append(len(frame["data"]["pad"]))

                async with trio.open_nursery() as nursery:
                    for n in range(subscribers):
                        nursery.start_soon(replay, n)
                    for event in started:
                        await event.wait()
                    pong = await other.ok("ping")
                    unfinished_when_answered = [len(seqs) < head for seqs in received]
                    pinged.set()
            stats = gateway.statistics()
    assert pong == {}
    assert unfinished_when_answered == [True] * subscribers
    assert received == [list(range(1, EVENTS + 2))] * subscribers  # actor.started, then bursts
    assert padding == [[size] * EVENTS] * subscribers
    assert (stats.lagged_total, stats.dropped_total) == (0, 0)


async def test_a_slow_replaying_subscriber_makes_the_server_hold_no_more_than_its_budget(tmp_path):
    size = 64 * 1024
    config = GatewayConfig(port=0, token=TEST_TOKEN, send_queue_bytes=256 * 1024)
    page_bytes = 4 * size + 4096  # four events to a page
    runtime_config = callboard.RuntimeConfig(replay_page_bytes=page_bytes)
    received: list[int] = []
    with trio.fail_after(60):
        async with open_gateway(tmp_path / "data", config, runtime_config=runtime_config) as (
            rt,
            gateway,
        ):
            async with connect(gateway.url) as writer, small_window(gateway.url) as slow:
                head = await store_events(writer, rt, EVENTS, size)
                sub = await slow.ok("subscribe", actor="counter/a", after=0)
                while len(received) < head:
                    await trio.testing.wait_all_tasks_blocked()  # the server has filled what it may
                    frame = await slow.receive()
                    assert (frame["op"], frame["sub"]) == ("event", sub["sub"]), frame
                    received.append(frame["seq"])
                stats = gateway.statistics()
    assert received == list(range(1, EVENTS + 2))
    assert config.send_queue_bytes <= stats.queued_bytes_peak
    assert stats.queued_bytes_peak <= config.send_queue_bytes + page_bytes
    assert stats.queued_frames_peak <= config.send_queue - config.send_reserve
    assert (stats.lagged_total, stats.dropped_total) == (0, 0)


async def test_live_events_that_overflow_a_replaying_subscription_are_replayed_not_lagged(
    tmp_path,
):
    size = 128 * 1024
    config = GatewayConfig(
        port=0, token=TEST_TOKEN, send_queue_bytes=256 * 1024, subscriber_buffer=4
    )
    received: list[int] = []
    with trio.fail_after(60):
        async with open_gateway(tmp_path / "data", config) as (rt, gateway):
            async with connect(gateway.url) as writer, small_window(gateway.url) as slow:
                head = await store_events(writer, rt, EVENTS, size)
                sub = await slow.ok("subscribe", actor="counter/a", after=0)
                received.append((await slow.receive())["seq"])
                await trio.testing.wait_all_tasks_blocked()  # the replay waits for the client
                await writer.ok("send", to="counter/a", type="burst", body={"n": 10})
                await rt.wait_handled("counter/a", EVENTS // 20 + 1)
                while len(received) < head + 10:
                    frame = await slow.receive()
                    assert (frame["op"], frame["sub"]) == ("event", sub["sub"]), frame
                    received.append(frame["seq"])
                # Read once the events arrived: wait_handled returns when the
                # commit is durable, which may be before the actor, resumed
                # after it, has published the events to the hub.
                overflowed = rt.statistics().lagged
                stats = gateway.statistics()
    assert overflowed == 1  # the hub's buffer of 4 live events did overflow
    assert received == list(range(1, EVENTS + 12))
    assert (stats.lagged_total, stats.dropped_total) == (0, 0)
