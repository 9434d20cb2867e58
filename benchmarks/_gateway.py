"""Scenarios of the websocket gateway, each beside a bare trio-websocket baseline.

- **send to ack**: ``clients`` connections each send ``send`` requests one at a
  time and wait for the ``ok`` (the message is durable when it arrives);
  the baseline is the same loop against a bare trio-websocket echo server.
- **fan-out**: 100 connections subscribe to one actor, which emits events
  (100 per handled message, one commit each); an op is one event delivered
  to one subscriber. The baseline is a bare trio-websocket server that sends
  the same number of frames of the same size to 100 connections.

Server and clients share one process and one trio loop in every scenario,
the baselines included, so the comparison is like for like.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import trio
from trio_websocket import (
    ConnectionClosed,
    WebSocketConnection,
    WebSocketRequest,
    open_websocket_url,
    serve_websocket,
)

import callboard
from callboard.gateway import GatewayConfig, serve_gateway

from . import CpuClock, Result, Scenario, Settings, percentile

__all__ = ["SCENARIOS"]

_SUBSCRIBERS = 100
_BURST = 100


class Emitter(callboard.Actor):
    """Emits ``n`` events per message, all in the message's one commit."""

    kind = "emitter"
    virtual = True

    async def handle(self, ctx: callboard.Context, message: callboard.Message) -> None:
        for i in range(message.body["n"]):
            ctx.emit("tick", {"i": i})


class Sink(callboard.Actor):
    kind = "sink"
    virtual = True

    async def handle(self, ctx: callboard.Context, message: callboard.Message) -> None:
        pass


async def _echo(request: WebSocketRequest) -> None:
    ws = await request.accept()
    try:
        while True:
            await ws.send_message(await ws.get_message())
    except ConnectionClosed:
        pass


async def _hello(ws: WebSocketConnection) -> None:
    await ws.send_message(json.dumps({"op": "hello", "id": "h", "protocol": 1}))
    reply = json.loads(await ws.get_message())
    if reply.get("op") != "welcome":
        raise RuntimeError(f"no welcome: {reply}")


async def _round_trips(url: str, clients: int, per_client: int, *, gateway: bool) -> Result:
    latencies: list[float] = []

    async def client(n: int) -> None:
        async with open_websocket_url(url) as ws:
            if gateway:
                await _hello(ws)
            now = time.perf_counter
            for i in range(per_client):
                frame = json.dumps(
                    {"op": "send", "id": str(i), "to": f"sink/c{n}", "type": "t", "body": {"i": i}}
                )
                started = now()
                await ws.send_message(frame)
                reply = await ws.get_message()
                latencies.append(now() - started)
                if gateway and '"ok"' not in reply:
                    raise RuntimeError(f"not acknowledged: {reply}")

    clock = CpuClock()
    async with trio.open_nursery() as nursery:
        for n in range(clients):
            nursery.start_soon(client, n)
    timing = clock.stop()
    total = clients * per_client
    return Result(
        ops_per_s=total / timing["seconds"],
        p50_ms=percentile(latencies, 50) * 1e3,
        p99_ms=percentile(latencies, 99) * 1e3,
        unit="round trips" if not gateway else "acked sends",
        details={"clients": clients, "requests": total, **timing},
    )


# Fan-out measures delivery, not lag handling (the gateway tests cover that):
# the buffers hold a whole run's events so that no subscriber is cut off.
_ROOMY = GatewayConfig(port=0, send_queue=8192, send_queue_bytes=64 << 20, subscriber_buffer=8192)


async def _with_gateway(workdir: Path, body: Any, gateway: GatewayConfig | None = None) -> Any:
    config = callboard.RuntimeConfig(passivate_after=3600.0)
    async with callboard.open_runtime(
        workdir / "data", kinds=[Sink, Emitter], config=config, builtin_kinds=False
    ) as rt, trio.open_nursery() as nursery:  # fmt: skip
        url = await nursery.start(serve_gateway, rt, gateway or GatewayConfig(port=0))
        try:
            return await body(rt, url)
        finally:
            nursery.cancel_scope.cancel()


async def _with_echo(body: Any) -> Any:
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve_websocket, _echo, "127.0.0.1", 0, None)
        url = f"ws://127.0.0.1:{server.port}/"
        try:
            return await body(url)
        finally:
            nursery.cancel_scope.cancel()


def _requests(settings: Settings, clients: int) -> int:
    return (2000 if settings.quick else 10_000) // clients


def echo_1(settings: Settings, workdir: Path) -> Result:
    n = _requests(settings, 1)
    return trio.run(_with_echo, lambda url: _round_trips(url, 1, n, gateway=False))


def echo_32(settings: Settings, workdir: Path) -> Result:
    n = _requests(settings, 32) * 4
    return trio.run(_with_echo, lambda url: _round_trips(url, 32, n, gateway=False))


def gateway_1(settings: Settings, workdir: Path) -> Result:
    n = _requests(settings, 1)
    return trio.run(_with_gateway, workdir, lambda rt, url: _round_trips(url, 1, n, gateway=True))


def gateway_32(settings: Settings, workdir: Path) -> Result:
    n = _requests(settings, 32) * 4
    return trio.run(_with_gateway, workdir, lambda rt, url: _round_trips(url, 32, n, gateway=True))


# -- fan-out --------------------------------------------------------------------------


async def _fanout(rt: callboard.Runtime, url: str, bursts: int) -> Result:
    expected = bursts * _BURST
    subscribed = trio.Semaphore(0)
    done_at: list[float] = []

    async def subscriber() -> None:
        async with open_websocket_url(url, message_queue_size=4096) as ws:
            await _hello(ws)
            await ws.send_message(json.dumps({"op": "subscribe", "id": "s", "actor": "emitter/e"}))
            seen = 0
            while True:
                frame = json.loads(await ws.get_message())
                if frame["op"] == "ok":
                    subscribed.release()
                elif frame["op"] == "event" and frame["type"] == "tick":
                    seen += 1
                    if seen == expected:
                        done_at.append(time.perf_counter())
                        return
                elif frame["op"] == "lagged":
                    raise RuntimeError(
                        "a subscriber lagged; the figure would not be a delivery rate"
                    )

    async with trio.open_nursery() as nursery:
        for _ in range(_SUBSCRIBERS):
            nursery.start_soon(subscriber)
        for _ in range(_SUBSCRIBERS):
            await subscribed.acquire()
        clock = CpuClock()
        for _ in range(bursts):
            ack = await rt.send("emitter/e", "burst", {"n": _BURST})
            await rt.wait_handled("emitter/e", ack.seq)
    timing = clock.stop()
    seconds = max(done_at) - clock.started
    deliveries = expected * _SUBSCRIBERS
    return Result(
        ops_per_s=deliveries / seconds,
        unit="event deliveries",
        details={"subscribers": _SUBSCRIBERS, "events": expected, "deliveries": deliveries,
                 "seconds": round(seconds, 4), **timing},
    )  # fmt: skip


async def _broadcast(bursts: int) -> Result:
    expected = bursts * _BURST
    frame = json.dumps(
        {"op": "event", "sub": "k1", "actor": "emitter/e", "seq": 1, "type": "tick",
         "data": {"i": 1}, "at": "2026-11-29T12:00:00.000Z"}
    )  # fmt: skip
    connections: list[WebSocketConnection] = []
    ready = trio.Event()
    done_at: list[float] = []

    async def handler(request: WebSocketRequest) -> None:
        ws = await request.accept()
        connections.append(ws)
        if len(connections) == _SUBSCRIBERS:
            ready.set()
        try:
            await ws.get_message()
        except ConnectionClosed:
            pass

    async def client(url: str) -> None:
        async with open_websocket_url(url, message_queue_size=4096) as ws:
            for _ in range(expected):
                await ws.get_message()
            done_at.append(time.perf_counter())

    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve_websocket, handler, "127.0.0.1", 0, None)
        url = f"ws://127.0.0.1:{server.port}/"
        async with trio.open_nursery() as clients:
            for _ in range(_SUBSCRIBERS):
                clients.start_soon(client, url)
            await ready.wait()
            clock = CpuClock()
            for _ in range(expected):
                for ws in connections:
                    await ws.send_message(frame)
        nursery.cancel_scope.cancel()
    seconds = max(done_at) - clock.started
    deliveries = expected * _SUBSCRIBERS
    return Result(
        ops_per_s=deliveries / seconds,
        unit="frame deliveries",
        details={"subscribers": _SUBSCRIBERS, "frames": expected, "seconds": round(seconds, 4)},
    )


def _bursts(settings: Settings) -> int:
    return 5 if settings.quick else 20


def broadcast_100(settings: Settings, workdir: Path) -> Result:
    return trio.run(_broadcast, _bursts(settings))


def fanout_100(settings: Settings, workdir: Path) -> Result:
    n = _bursts(settings)
    return trio.run(_with_gateway, workdir, lambda rt, url: _fanout(rt, url, n), _ROOMY)


SCENARIOS = [
    Scenario("ws-echo-1-client", echo_1, note="bare trio-websocket echo, 1 client"),
    Scenario("ws-echo-32-clients", echo_32, note="bare trio-websocket echo, 32 clients"),
    Scenario(
        "gateway-send-ack-1-client",
        gateway_1,
        baseline="ws-echo-1-client",
        note="send over the gateway, durable, ok",
    ),
    Scenario(
        "gateway-send-ack-32-clients",
        gateway_32,
        baseline="ws-echo-32-clients",
        note="the same, 32 clients at once",
    ),
    Scenario(
        "ws-broadcast-100-clients", broadcast_100, note="bare trio-websocket, 1 server to 100"
    ),
    Scenario(
        "gateway-fanout-100-subscribers",
        fanout_100,
        baseline="ws-broadcast-100-clients",
        note="one actor's events to 100 subscribers",
    ),
]
