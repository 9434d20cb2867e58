"""The websocket clients of the gateway scenarios, run as their own process.

``python -m benchmarks._ws_load MODE URL ...`` drives a websocket server with
the ``websockets`` library (asyncio, C speedups) from a process of its own, so
that the server being measured has its process to itself, as it would with
real clients: in one process the clients' share of the CPU would be counted
against the server. The baselines and the gateway are driven by the same code.

It prints ``ready`` once every connection is open (and subscribed, for
``listen``), then one JSON line with what it measured. Times are
``time.monotonic()``, which is one clock for every process of the machine,
so the parent can tell when the last frame arrived.

Modes:
- ``round-trips``: each connection sends a frame and waits for the answer,
  ``per_client`` times; with ``--window N`` it keeps N frames in flight.
  With ``--gateway`` the frame is a ``send`` and the answer must be ``ok``;
  otherwise any answer (an echo) will do.
- ``listen``: each connection reads ``expected`` event frames (with
  ``--gateway``, after subscribing to ``--actor``); a ``lagged`` frame is an
  error, as the figure would then not be a delivery rate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

from websockets.asyncio.client import ClientConnection, connect

_OPTIONS = {"compression": None, "max_size": None, "ping_interval": None, "max_queue": None}


async def _hello(ws: ClientConnection) -> None:
    token = os.environ["CALLBOARD_TOKEN"]  # given by the benchmark that started us
    await ws.send(json.dumps({"op": "hello", "id": "h", "protocol": 1, "token": token}))
    reply = json.loads(await ws.recv())
    if reply.get("op") != "welcome":
        raise RuntimeError(f"no welcome: {reply}")


def _ready() -> None:
    sys.stdout.write("ready\n")
    sys.stdout.flush()


async def _round_trips(args: argparse.Namespace) -> dict[str, object]:
    connections = [await connect(args.url, **_OPTIONS) for _ in range(args.clients)]
    if args.gateway:
        await asyncio.gather(*(_hello(ws) for ws in connections))
    latencies: list[float] = []

    def frame(n: int, i: int) -> str:
        return json.dumps(
            {"op": "send", "id": str(i), "to": f"sink/c{n}", "type": "t", "body": {"i": i}}
        )

    async def client(n: int, ws: ClientConnection) -> None:
        now = time.perf_counter
        for i in range(args.per_client):
            started = now()
            await ws.send(frame(n, i))
            reply = await ws.recv()
            latencies.append(now() - started)
            if args.gateway and '"ok"' not in reply:
                raise RuntimeError(f"not acknowledged: {reply}")

    async def pipelined_client(n: int, ws: ClientConnection) -> None:
        # ``window`` requests in flight; replies are matched by id (an echo
        # carries the id back too), as docs/protocol.md lets replies come in any order.
        now = time.perf_counter
        window = asyncio.Semaphore(args.window)
        sent: dict[str, float] = {}

        async def send_all() -> None:
            for i in range(args.per_client):
                await window.acquire()
                sent[str(i)] = now()
                await ws.send(frame(n, i))

        async def receive_all() -> None:
            for _ in range(args.per_client):
                reply = json.loads(await ws.recv())
                if args.gateway and reply.get("op") != "ok":
                    raise RuntimeError(f"not acknowledged: {reply}")
                latencies.append(now() - sent.pop(reply["id"]))
                window.release()

        await asyncio.gather(send_all(), receive_all())

    body = client if args.window == 1 else pipelined_client
    _ready()
    cpu, started = time.process_time(), time.monotonic()
    await asyncio.gather(*(body(n, ws) for n, ws in enumerate(connections)))
    ended = time.monotonic()
    cpu = time.process_time() - cpu
    for ws in connections:
        await ws.close()
    return {"started": started, "ended": ended, "latencies": latencies, "client_cpu_s": cpu}


async def _listen(args: argparse.Namespace) -> dict[str, object]:
    connections = [await connect(args.url, **_OPTIONS) for _ in range(args.clients)]
    for ws in connections:
        if args.gateway:
            await _hello(ws)
            await ws.send(json.dumps({"op": "subscribe", "id": "s", "actor": args.actor}))
            reply = json.loads(await ws.recv())
            if reply.get("op") != "ok":
                raise RuntimeError(f"not subscribed: {reply}")
    done: list[float] = []

    async def client(ws: ClientConnection) -> None:
        seen = 0
        while seen < args.expected:
            # Every frame is parsed, for the baseline too: the clients share
            # the machine with the server, so they must do the same work.
            op = json.loads(await ws.recv())["op"]
            if op == "lagged":
                raise RuntimeError("a subscriber lagged; the figure would not be a rate")
            if op != "event":
                continue
            seen += 1
        done.append(time.monotonic())

    _ready()
    cpu = time.process_time()
    await asyncio.gather(*(client(ws) for ws in connections))
    cpu = time.process_time() - cpu
    for ws in connections:
        await ws.close()
    return {"ended": max(done), "client_cpu_s": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._ws_load")
    parser.add_argument("mode", choices=["round-trips", "listen"])
    parser.add_argument("url")
    parser.add_argument("--clients", type=int, required=True)
    parser.add_argument("--per-client", type=int, default=0)
    parser.add_argument("--window", type=int, default=1, help="requests in flight per client")
    parser.add_argument("--expected", type=int, default=0)
    parser.add_argument("--actor", default="emitter/e")
    parser.add_argument("--gateway", action="store_true")
    args = parser.parse_args()
    body = _round_trips if args.mode == "round-trips" else _listen
    result = asyncio.run(body(args))
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
