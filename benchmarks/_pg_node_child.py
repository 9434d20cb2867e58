"""One node of ``durable-64-senders-64-actors-postgresql-2-nodes``, in a process
of its own: ``python -m benchmarks._pg_node_child URL NODE DATA WARM SEND PER_SENDER``.

``WARM`` and ``SEND`` are comma-separated actor numbers: the actors this node
activates before the clock starts (so that it owns them), and the actors its
senders send to (one sender each, ``PER_SENDER`` messages, one in flight).

It speaks in lines on stdin and stdout, one JSON object a line on stdout (its
stderr is the benchmark's): it says ``ready`` once its actors are active,
waits for ``go``, sends, waits until every actor it sent to has committed the
handling of its last message (through the other node's commits, for an actor
the other node owns: the shared database's notifications), says what it
measured, waits for ``check``, says the totals of the actors it warmed (each
of them had every sender's messages by then), and closes on ``exit``.

Its CPU is its own process's (`CpuClock`), over the stretch from ``go`` to
handled; its times are on ``time.monotonic``, one clock for every process of
the machine, so the parent takes the span from the first start to the last end.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

import trio

import callboard

from . import CpuClock
from ._core import _BODY, Counter, _store_delta


def _write_line(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def _say(message: dict[str, Any]) -> None:
    # In a thread: the report holds every latency (a megabyte), and the pipe
    # blocks until the benchmark reads it, which it may do only after the
    # other node's. Written on the trio thread, that stalled this node's
    # event loop for seconds, long enough for its lease to lapse and the
    # other node to take its actors.
    await trio.to_thread.run_sync(_write_line, message)


async def _hear(word: str) -> None:
    line = await trio.to_thread.run_sync(sys.stdin.readline)
    if line.strip() != word:
        raise RuntimeError(f"expected {word!r} from the benchmark, got {line!r}")


def _numbers(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


async def _node(
    url: str, node: str, data: Path, warm: list[int], send: list[int], per: int
) -> None:
    config = callboard.RuntimeConfig(passivate_after=3600.0)
    async with callboard.open_runtime(
        data, kinds=[Counter], config=config, store=url, node=node
    ) as rt:

        async def activate(address: str) -> None:
            ack = await rt.send(address, "add", _BODY)
            await rt.wait_handled(address, ack.seq)

        async with trio.open_nursery() as nursery:
            for i in warm:
                nursery.start_soon(activate, f"counter/a{i}")
        gc.collect()
        await _say({"ready": sum(rt.is_active(f"counter/a{i}") for i in warm)})
        await _hear("go")

        latencies: list[list[float]] = []
        last_seq: dict[str, int] = {}

        async def sender(address: str) -> None:
            mine: list[float] = []
            latencies.append(mine)
            send_, now = rt.send, time.perf_counter
            seq = 0
            for _ in range(per):
                started = now()
                ack = await send_(address, "add", _BODY)
                mine.append(now() - started)
                seq = ack.seq
            last_seq[address] = seq

        stats = rt._store.statistics()
        clock = CpuClock()
        async with trio.open_nursery() as nursery:
            for i in send:
                nursery.start_soon(sender, f"counter/a{i}")
        acked = time.monotonic()
        for address, seq in last_seq.items():
            await rt.wait_handled(address, seq)
        timing = clock.stop()
        ended = time.monotonic()
        await _say(
            {
                "started": clock.started_monotonic,
                "acked": acked,
                "ended": ended,
                "sent": per * len(send),
                # Sent to an actor this node runs (the others go through the database).
                "sent_local": per * sum(rt.is_active(f"counter/a{i}") for i in send),
                "latencies": [x for mine in latencies for x in mine],
                **timing,
                **_store_delta(stats, rt._store.statistics()),
            }
        )
        await _hear("check")
        totals = 0
        for i in warm:
            totals += (await rt.inspect(f"counter/a{i}")).state["total"]
        await _say({"totals": totals})
        await _hear("exit")


def main(argv: list[str]) -> None:
    url, node, data, warm, send, per = argv
    trio.run(_node, url, node, Path(data), _numbers(warm), _numbers(send), int(per))


if __name__ == "__main__":
    main(sys.argv[1:])
