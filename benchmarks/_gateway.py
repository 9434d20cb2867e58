"""Scenarios of the websocket gateway, each beside a bare trio-websocket baseline.

- **send to ack**: ``clients`` connections each send ``send`` requests one at a
  time and wait for the ``ok`` (the message is durable when it arrives);
  the baseline is the same loop against a bare trio-websocket echo server.
- **fan-out**: 100 connections subscribe to one actor, which emits events
  (100 per handled message, one commit each); an op is one event delivered
  to one subscriber. The baseline is a bare trio-websocket server that sends
  the same number of frames of the same size to 100 connections, one
  sending task per connection.

The clients are another process (``_ws_load``, on the ``websockets``
library), the same for the gateway and its baseline, so the server being
measured has its process to itself, as it would with real clients.
``server_cpu_us_per_op`` is what the server's process spent per op.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio
from trio_websocket import (
    ConnectionClosed,
    WebSocketConnection,
    WebSocketRequest,
    serve_websocket,
)

import callboard
from callboard.gateway import GatewayConfig, serve_gateway

from . import CpuClock, Result, Scenario, Settings, cpu_per_op, percentile
from ._core import _store_delta

_ROOT = Path(__file__).resolve().parent.parent

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


# The benchmark's own operator token: the clients present it in hello, as any client must.
_TOKEN = "benchmark-token"


class _Load:
    """The clients: ``python -m benchmarks._ws_load`` as a child process.

    ``ready`` returns once its connections are open; ``result`` waits for it
    to finish and returns the JSON it printed. Its stderr is ours, so a
    failing client says why.
    """

    def __init__(self, *argv: str) -> None:
        self._argv = [sys.executable, "-m", "benchmarks._ws_load", *argv]
        self._process: trio.Process | None = None
        self._buffer = b""

    async def __aenter__(self) -> _Load:
        env = {**os.environ, "CALLBOARD_TOKEN": _TOKEN}
        self._process = await trio.lowlevel.open_process(
            self._argv, stdout=subprocess.PIPE, cwd=_ROOT, env=env
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._process is not None
        with trio.CancelScope(shield=True):
            if self._process.returncode is None:
                self._process.kill()
            await self._process.wait()

    async def _line(self) -> bytes:
        assert self._process is not None and self._process.stdout is not None
        while b"\n" not in self._buffer:
            chunk = await self._process.stdout.receive_some()
            if not chunk:
                code = await self._process.wait()
                raise RuntimeError(f"the client process ended (exit {code}) before it finished")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    async def ready(self) -> None:
        line = await self._line()
        if line != b"ready":
            raise RuntimeError(f"the client process said {line!r}, not ready")

    async def result(self) -> dict[str, Any]:
        result = json.loads(await self._line())
        assert self._process is not None
        if await self._process.wait() != 0:
            raise RuntimeError(f"the client process failed (exit {self._process.returncode})")
        return result


def _client_cpu(result: dict[str, Any], ops: int) -> dict[str, float]:
    return {
        "client_cpu_s": round(result["client_cpu_s"], 4),
        "client_cpu_us_per_op": round(result["client_cpu_s"] / ops * 1e6, 1),
    }


def _server_cpu(timing: dict[str, float], ops: int) -> dict[str, float]:
    """The server process's CPU per op: the three figures every scenario has, and
    the total again under the name that sets it beside the client's."""
    figures = cpu_per_op(timing, ops)
    return {**figures, "server_cpu_us_per_op": round(figures["cpu_us_per_op"], 1)}


async def _round_trips(
    url: str, clients: int, per_client: int, *, rt: callboard.Runtime | None = None,
    window: int = 1, protocol: bool = False,
) -> Result:  # fmt: skip
    """Round trips against the echo server, or acked sends against ``rt``'s gateway
    (or, with ``protocol``, another server that speaks the gateway's protocol)."""
    protocol = protocol or rt is not None
    argv = ["round-trips", url, "--clients", str(clients), "--per-client", str(per_client)]
    argv += ["--window", str(window)]
    async with _Load(*argv, *(["--gateway"] if protocol else [])) as load:
        await load.ready()
        stats = rt._store.statistics() if rt is not None else None
        clock = CpuClock()
        result = await load.result()
        timing = clock.stop()
    total = clients * per_client
    # How the sends shared group commits: the coupling of gateway and writer.
    writer: dict[str, float] = {}
    if rt is not None and stats is not None:
        writer = _store_delta(stats, rt._store.statistics())
        writer["writer_ops_per_send"] = round(writer["writer_operations"] / total, 2)
    seconds = result["ended"] - result["started"]
    latencies = result["latencies"]
    return Result(
        ops_per_s=total / seconds,
        p50_ms=percentile(latencies, 50) * 1e3,
        p99_ms=percentile(latencies, 99) * 1e3,
        unit="acked sends" if protocol else "round trips",
        details={
            "clients": clients,
            "in_flight_per_client": window,
            "requests": total,
            **timing,
            "seconds": round(seconds, 4),
            **_server_cpu(timing, total),
            **_client_cpu(result, total),
            **writer,
        },
    )


# Fan-out measures delivery, not lag handling (the gateway tests cover that):
# the buffers hold a whole run's events so that no subscriber is cut off.
_ROOMY = GatewayConfig(
    port=0, token=_TOKEN, send_queue=8192, send_queue_bytes=64 << 20, subscriber_buffer=8192
)


async def _with_gateway(workdir: Path, body: Any, gateway: GatewayConfig | None = None) -> Any:
    config = callboard.RuntimeConfig(passivate_after=3600.0)
    async with callboard.open_runtime(
        workdir / "data", kinds=[Sink, Emitter], config=config
    ) as rt, trio.open_nursery() as nursery:  # fmt: skip
        url = await nursery.start(serve_gateway, rt, gateway or GatewayConfig(port=0, token=_TOKEN))
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
    return trio.run(_with_echo, lambda url: _round_trips(url, 1, n))


def echo_32(settings: Settings, workdir: Path) -> Result:
    n = _requests(settings, 32) * 4
    return trio.run(_with_echo, lambda url: _round_trips(url, 32, n))


def gateway_1(settings: Settings, workdir: Path) -> Result:
    n = _requests(settings, 1)
    return trio.run(_with_gateway, workdir, lambda rt, url: _round_trips(url, 1, n, rt=rt))


def gateway_32(settings: Settings, workdir: Path) -> Result:
    n = _requests(settings, 32) * 4
    return trio.run(_with_gateway, workdir, lambda rt, url: _round_trips(url, 32, n, rt=rt))


# A client may keep several requests in flight (docs/protocol.md: replies carry the
# request's id and may come in any order); this is the gateway's throughput
# when its clients pipeline, beside the echo server driven the same way.
_WINDOW = 8


def echo_32_pipelined(settings: Settings, workdir: Path) -> Result:
    n = _requests(settings, 32) * 8
    return trio.run(_with_echo, lambda url: _round_trips(url, 32, n, window=_WINDOW))


def gateway_32_pipelined(settings: Settings, workdir: Path) -> Result:
    n = _requests(settings, 32) * 8
    return trio.run(
        _with_gateway,
        workdir,
        lambda rt, url: _round_trips(url, 32, n, rt=rt, window=_WINDOW),
    )


# -- fan-out --------------------------------------------------------------------------


async def _fanout(rt: callboard.Runtime, url: str, bursts: int) -> Result:
    expected = bursts * _BURST
    argv = ["listen", url, "--clients", str(_SUBSCRIBERS), "--expected", str(expected)]
    async with _Load(*argv, "--gateway", "--actor", "emitter/e") as load:
        await load.ready()
        clock = CpuClock()
        for _ in range(bursts):
            ack = await rt.send("emitter/e", "burst", {"n": _BURST})
            await rt.wait_handled("emitter/e", ack.seq)
        result = await load.result()
        timing = clock.stop()
    return _deliveries(result, clock, timing, expected, unit="event deliveries")


def _deliveries(
    result: dict[str, Any], clock: CpuClock, timing: dict[str, float], frames: int, *, unit: str
) -> Result:
    # The clock started in this process; the client says when its last frame came.
    seconds = result["ended"] - clock.started_monotonic
    deliveries = frames * _SUBSCRIBERS
    return Result(
        ops_per_s=deliveries / seconds,
        unit=unit,
        details={
            "subscribers": _SUBSCRIBERS,
            "frames": frames,
            "deliveries": deliveries,
            **timing,
            "seconds": round(seconds, 4),
            **_server_cpu(timing, deliveries),
            **_client_cpu(result, deliveries),
        },
    )


async def _send_all(ws: WebSocketConnection, frame: str, count: int) -> None:
    for _ in range(count):
        await ws.send_message(frame)


async def _broadcast(bursts: int) -> Result:
    expected = bursts * _BURST
    frame = json.dumps(
        {"op": "event", "sub": "k1", "actor": "emitter/e", "seq": 1, "type": "tick",
         "data": {"i": 1}, "at": "2026-11-29T12:00:00.000Z"}
    )  # fmt: skip
    connections: list[WebSocketConnection] = []
    ready = trio.Event()

    async def handler(request: WebSocketRequest) -> None:
        ws = await request.accept()
        connections.append(ws)
        if len(connections) == _SUBSCRIBERS:
            ready.set()
        try:
            await ws.get_message()
        except ConnectionClosed:
            pass

    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve_websocket, handler, "127.0.0.1", 0, None)
        url = f"ws://127.0.0.1:{server.port}/"
        argv = ["listen", url, "--clients", str(_SUBSCRIBERS), "--expected", str(expected)]
        async with _Load(*argv) as load:
            await load.ready()
            await ready.wait()
            clock = CpuClock()
            # One sending task per connection, as a server would broadcast:
            # a single task awaiting each send in turn would be a weaker baseline.
            async with trio.open_nursery() as senders:
                for ws in connections:
                    senders.start_soon(_send_all, ws, frame, expected)
            result = await load.result()
            timing = clock.stop()
        nursery.cancel_scope.cancel()
    return _deliveries(result, clock, timing, expected, unit="frame deliveries")


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
        "ws-echo-32-clients-8-in-flight",
        echo_32_pipelined,
        note="bare trio-websocket echo, 32 clients, 8 frames in flight each",
    ),
    Scenario(
        "gateway-send-ack-32-clients-8-in-flight",
        gateway_32_pipelined,
        baseline="ws-echo-32-clients-8-in-flight",
        note="send over the gateway, 32 clients, 8 sends in flight each",
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
