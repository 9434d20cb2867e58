"""How a big replay weighs on the gateway: memory, and the event loop's longest stall.

``python benchmarks/replay_probe.py [--events 100] [--size 1000000] [--subscribers 16]``

1. A child process stores ``events`` events of ``size`` characters each in
   one actor (one message, one event each), then exits, so the server's
   heap starts clean.
2. This process opens the runtime and the gateway on that directory and
   notes its RSS; a second child (asyncio ``websockets``, so the clients'
   work is not counted against the server) opens ``subscribers``
   connections that each subscribe with ``after: 0`` and read every event
   (resubscribing from ``lagged.after`` when told to), and one more
   connection that pings in a loop until they are done.
3. It prints one JSON line: the RSS growth (peak during the replay, from
   ``VmHWM`` reset after start-up, minus the RSS before it), the longest
   single task step (a trio instrument; in wall time and in the trio
   thread's CPU time, which preemption by other processes does not
   inflate), the longest gap of a 1 ms
   heartbeat task, the slowest ping, how many ``lagged`` frames came, and
   the CPU seconds (user, system) each process spent on the replay.

It is a standalone script rather than a scenario of ``python -m
benchmarks``: it measures the server's worst moment, not a rate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_TOKEN = "replay-probe-token"


def _rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _blob_kind() -> Any:
    import callboard

    class Blob(callboard.Actor):
        """Virtual: each ``fill`` message emits one event of ``size`` characters."""

        kind = "blob"
        virtual = True

        async def handle(self, ctx: callboard.Context, message: callboard.Message) -> None:
            ctx.emit("blob", {"pad": "x" * message.body["size"]})

    return Blob


async def _fill(data: Path, events: int, size: int) -> None:
    import callboard

    async with callboard.open_runtime(data, kinds=[_blob_kind()]) as rt:
        for _ in range(events):
            ack = await rt.send("blob/b", "fill", {"size": size})
        await rt.wait_handled("blob/b", ack.seq)


async def _client(url: str, subscribers: int, events: int) -> dict[str, Any]:
    from websockets.asyncio.client import ClientConnection, connect

    options: dict[str, Any] = {"compression": None, "max_size": None, "ping_interval": None}

    async def hello(ws: ClientConnection) -> None:
        await ws.send(json.dumps({"op": "hello", "id": "h", "protocol": 1, "token": _TOKEN}))
        assert json.loads(await ws.recv())["op"] == "welcome"

    lagged = 0

    async def subscriber() -> None:
        nonlocal lagged
        async with connect(url, **options) as ws:
            await hello(ws)
            last = 0
            while last < events:
                await ws.send(json.dumps({"op": "subscribe", "id": "s", "actor": "blob/b",
                                          "after": last}))  # fmt: skip
                while last < events:
                    frame = json.loads(await ws.recv())
                    if frame["op"] == "event":
                        assert frame["seq"] == last + 1, (frame["seq"], last)
                        last = frame["seq"]
                    elif frame["op"] == "lagged":
                        lagged += 1
                        break

    pings: list[float] = []
    done = asyncio.Event()

    async def pinger() -> None:
        async with connect(url, **options) as ws:
            await hello(ws)
            n = 0
            while not done.is_set():
                n += 1
                started = time.monotonic()
                await ws.send(json.dumps({"op": "ping", "id": str(n)}))
                assert json.loads(await ws.recv())["op"] == "ok"
                pings.append(time.monotonic() - started)
                await asyncio.sleep(0.005)

    started, cpu = time.monotonic(), os.times()
    ping_task = asyncio.create_task(pinger())
    await asyncio.gather(*(subscriber() for _ in range(subscribers)))
    seconds, spent = time.monotonic() - started, os.times()
    done.set()
    await ping_task
    return {"replay_s": round(seconds, 2), "lagged": lagged, "pings": len(pings),
            "slowest_ping_ms": round(max(pings) * 1000, 1),
            "client_cpu_s": [round(spent.user - cpu.user, 1),
                             round(spent.system - cpu.system, 1)]}  # fmt: skip


async def _serve(data: Path, subscribers: int, events: int) -> dict[str, Any]:
    import trio

    import callboard
    from callboard.gateway import Gateway, GatewayConfig

    class LongestStep(trio.abc.Instrument):
        """The longest task step, in wall time and in the trio thread's CPU
        time (which a busy machine's preemption does not inflate)."""

        def __init__(self) -> None:
            self.longest = self.longest_cpu = 0.0
            self._started: tuple[float, float] | None = None  # added mid-step: not timed

        def before_task_step(self, task: trio.lowlevel.Task) -> None:
            self._started = (time.perf_counter(), time.thread_time())

        def after_task_step(self, task: trio.lowlevel.Task) -> None:
            if self._started is not None:
                wall, cpu = self._started
                self.longest = max(self.longest, time.perf_counter() - wall)
                self.longest_cpu = max(self.longest_cpu, time.thread_time() - cpu)

    steps = LongestStep()
    widest_gap = 0.0

    async def heartbeat() -> None:
        nonlocal widest_gap
        last = time.perf_counter()
        while True:
            await trio.sleep(0.001)
            now = time.perf_counter()
            widest_gap = max(widest_gap, now - last)
            last = now

    async with callboard.open_runtime(data, kinds=[_blob_kind()]) as rt:
        gateway = Gateway(rt, GatewayConfig(port=0, token=_TOKEN))
        async with trio.open_nursery() as nursery:
            url = await nursery.start(gateway.serve)
            rss_before = _rss_kb("VmRSS")
            # Resets VmHWM to the RSS now; /proc answers at once.
            Path("/proc/self/clear_refs").write_text("5")  # noqa: ASYNC240
            trio.lowlevel.add_instrument(steps)
            nursery.start_soon(heartbeat)
            cpu = resource.getrusage(resource.RUSAGE_SELF)
            child = [sys.executable, __file__, "--client", url, "--subscribers",
                     str(subscribers), "--events", str(events)]  # fmt: skip
            result = await trio.run_process(child, capture_stdout=True)
            spent = resource.getrusage(resource.RUSAGE_SELF)
            trio.lowlevel.remove_instrument(steps)
            peak = _rss_kb("VmHWM")
            nursery.cancel_scope.cancel()
    return {
        **json.loads(result.stdout),
        "rss_growth_mb": round((peak - rss_before) / 1024, 1),
        "longest_step_ms": round(steps.longest * 1000, 1),
        "longest_step_cpu_ms": round(steps.longest_cpu * 1000, 1),
        "heartbeat_gap_ms": round(widest_gap * 1000, 1),
        "server_cpu_s": [round(spent.ru_utime - cpu.ru_utime, 1),
                         round(spent.ru_stime - cpu.ru_stime, 1)],
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--subscribers", type=int, default=16)
    parser.add_argument("--fill", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fill is not None:
        import trio

        trio.run(_fill, args.fill, args.events, args.size)
    elif args.client is not None:
        print(json.dumps(asyncio.run(_client(args.client, args.subscribers, args.events))))
    else:
        import trio

        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "data"
            fill = [sys.executable, __file__, "--fill", str(data), "--events", str(args.events),
                    "--size", str(args.size)]  # fmt: skip
            subprocess.run(fill, check=True, env=os.environ)
            figures = trio.run(_serve, data, args.subscribers, args.events)
        print(json.dumps({"events": args.events, "size": args.size,
                          "subscribers": args.subscribers, **figures}))  # fmt: skip


if __name__ == "__main__":
    main()
