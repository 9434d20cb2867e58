"""Scenarios of the durable core: sends that are persisted, acknowledged,
handled and committed; and what idle actors cost in memory.

"Durable send to handled": ``senders`` concurrent tasks each ``await
rt.send(...)`` in a loop. A message counts once it was sent, made durable,
acknowledged, handled by its actor, and that handling committed: the clock
stops when every actor's cursor has reached the last seq it was sent
(``rt.wait_handled``). ``p50_ms``/``p99_ms`` are the ack latencies (how long
``await rt.send`` took). Every actor is activated before the clock starts,
so the figure is the steady state, not activation.

"Memory: idle actors": N actors each receive one message (N activations),
then all passivate. RSS is read at the start, with all N active, and after
they all passivated. To have all N active at once and then let them all
passivate without waiting, the run uses trio's `MockClock` at real speed
(``rate=1``) and jumps it past ``passivate_after`` once everything was
handled: the idle deadline is the only thing the jump affects.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import time
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio

import callboard

from . import (
    CpuClock,
    Result,
    Scenario,
    Settings,
    cpu_per_op,
    peak_rss_mb,
    percentile,
    settled_rss_mb,
)

if TYPE_CHECKING:
    from trio.testing import MockClock

__all__ = ["SCENARIOS"]


@attrs.define
class Tally:
    total: int = 0


class Counter(callboard.Actor):
    kind = "counter"
    state_type = Tally
    virtual = True

    async def handle(self, ctx: callboard.Context, message: callboard.Message) -> None:
        self.state.total += message.body["n"]
        ctx.emit("counted", {"total": self.state.total})


_BODY = {"n": 1}


def _store_delta(
    before: callboard.store.StoreStatistics, after: callboard.store.StoreStatistics
) -> dict[str, float]:
    batches = after.batches - before.batches
    operations = after.operations - before.operations
    return {
        "writer_batches": batches,
        "writer_operations": operations,
        "writer_ops_per_batch": round(operations / batches, 2) if batches else 0.0,
        "writer_largest_batch": after.largest_batch,
        "writer_commit_s": round(after.commit_seconds_total - before.commit_seconds_total, 4),
    }


# -- durable send to handled ---------------------------------------------------


async def _durable(
    workdir: Path, *, actors: int, senders: int, messages: int, store: str | None = None
) -> Result:
    addresses = [f"counter/a{i}" for i in range(actors)]
    per_sender = messages // senders
    config = callboard.RuntimeConfig(passivate_after=3600.0)
    async with callboard.open_runtime(
        workdir / "data", kinds=[Counter], config=config, store=store
    ) as rt:

        async def warm(address: str) -> None:
            ack = await rt.send(address, "add", _BODY)
            await rt.wait_handled(address, ack.seq)

        async with trio.open_nursery() as nursery:
            for address in addresses:
                nursery.start_soon(warm, address)

        latencies: list[list[float]] = []
        last_seq: dict[str, int] = {}

        async def sender(address: str) -> None:
            mine: list[float] = []
            latencies.append(mine)
            send, now = rt.send, time.perf_counter
            seq = 0
            for _ in range(per_sender):
                started = now()
                ack = await send(address, "add", _BODY)
                mine.append(now() - started)
                seq = ack.seq
            last_seq[address] = max(last_seq.get(address, 0), seq)

        stats = rt._store.statistics()
        gc.collect()
        clock = CpuClock()
        async with trio.open_nursery() as nursery:
            for i in range(senders):
                nursery.start_soon(sender, addresses[i % actors])
        acked = time.perf_counter()
        for address, seq in last_seq.items():
            await rt.wait_handled(address, seq)
        timing = clock.stop()
        writer = _store_delta(stats, rt._store.statistics())

        # Not a speed check: a figure for lost or doubled messages would be a lie.
        handled = 0
        for address in addresses:
            handled += (await rt.inspect(address)).state["total"]
        sent = per_sender * senders
        if handled != sent + len(addresses):
            raise RuntimeError(f"{sent + len(addresses)} messages sent but {handled} handled")

    flat = [x for mine in latencies for x in mine]
    seconds = timing["seconds"]
    return Result(
        ops_per_s=sent / seconds,
        p50_ms=percentile(flat, 50) * 1e3,
        p99_ms=percentile(flat, 99) * 1e3,
        unit="messages",
        details={
            "messages": sent,
            "senders": senders,
            "actors": actors,
            "ack_max_ms": round(max(flat) * 1e3, 3),
            "acked_all_s": round(acked - clock.started, 4),
            **timing,
            **writer,
            "writer_busy": round(writer["writer_commit_s"] / seconds, 3),
            # CPU per message, both threads: what the rate would be bounded by on
            # an idle machine (the GIL lets one thread run Python at a time).
            **cpu_per_op(timing, sent),
            # The same total under its first name, for comparing with older results.
            "cpu_us_per_message": round(
                (timing["cpu_main_thread_s"] + timing["cpu_other_threads_s"]) / sent * 1e6, 1
            ),
        },
    )


def durable_many(settings: Settings, workdir: Path) -> Result:
    messages = 12_000 if settings.quick else 100_000
    return trio.run(lambda: _durable(workdir, actors=64, senders=64, messages=messages))


def durable_hot(settings: Settings, workdir: Path) -> Result:
    messages = 12_000 if settings.quick else 100_000
    return trio.run(lambda: _durable(workdir, actors=1, senders=64, messages=messages))


# -- memory: idle actors ---------------------------------------------------------

_PASSIVATE_AFTER = 3600.0
# The default: the first actors rest while later ones are still being
# activated, as on a server, and the memory their tasks held is reused. The
# quick run activates its 10,000 in about 3 s instead of 40: it rests them
# after the same share of that time, or none would rest before the end.
_REST_AFTER = callboard.RuntimeConfig().rest_after
_QUICK_REST_AFTER = 0.4


def _malloc_trim() -> bool:
    """Give freed heap back to the OS (glibc), to tell retained memory from cached."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    libc = ctypes.CDLL(name)
    if not hasattr(libc, "malloc_trim"):
        return False
    libc.malloc_trim(0)
    return True


async def _memory(workdir: Path, clock: MockClock, *, actors: int, rest_after: float) -> Result:
    senders = 64
    config = callboard.RuntimeConfig(passivate_after=_PASSIVATE_AFTER, rest_after=rest_after)
    async with callboard.open_runtime(workdir / "data", kinds=[Counter], config=config) as rt:
        # One message to a throwaway actor first: imports, caches and the
        # store's statements are then warm and not counted per actor.
        ack = await rt.send("counter/warm-up", "add", _BODY)
        await rt.wait_handled("counter/warm-up", ack.seq)
        rss_start = settled_rss_mb()
        objects_start = len(gc.get_objects())

        latencies: list[list[float]] = []

        async def sender(first: int) -> None:
            mine: list[float] = []
            latencies.append(mine)
            for i in range(first, actors, senders):
                started = time.perf_counter()
                await rt.send(f"counter/m{i}", "add", _BODY)
                mine.append(time.perf_counter() - started)

        timing = CpuClock()
        async with trio.open_nursery() as nursery:
            for first in range(senders):
                nursery.start_soon(sender, first)
        for i in range(actors):
            await rt.wait_handled(f"counter/m{i}", 1)
        activated = timing.stop()
        active = rt.active_count
        # Some still idle with their tasks: the figure for a burst of new actors.
        rss_working = settled_rss_mb()
        objects_working = len(gc.get_objects())

        # Then every one rests: in memory with its state, without its task.
        give_up = time.monotonic() + 600
        while rt.statistics().resting < actors:
            if time.monotonic() > give_up:
                raise RuntimeError(f"{rt.statistics().resting} of {actors} rest after 600 s")
            clock.jump(rest_after + 1)
            await trio.sleep(0.05)
        rss_active = settled_rss_mb()
        objects_active = len(gc.get_objects())

        passivating = CpuClock()
        # The runtime has no event for "no actor active": poll. Jump again on
        # every round: a cell that had just committed when handled went idle
        # only after the previous jump, with a deadline past it.
        give_up = time.monotonic() + 600
        passivations_before = rt.statistics().passivations
        while rt.statistics().active:
            if time.monotonic() > give_up:
                raise RuntimeError(f"{rt.statistics().active} actors still active after 600 s")
            clock.jump(_PASSIVATE_AFTER + 1)
            await trio.sleep(0.05)
        await trio.sleep(0.2)  # let the last cells' tasks finish after their commit
        passivated = passivating.stop()
        left = rt.active_count
        passivations = rt.statistics().passivations - passivations_before
        # The writer keeps its last batch (every passivation commit) until the
        # next one: one more write lets that go, so it is not counted as kept.
        ack = await rt.send("counter/flush", "add", _BODY)
        await rt.wait_handled("counter/flush", ack.seq)
        rss_after = settled_rss_mb()
        objects_after = len(gc.get_objects())
        trimmed = _malloc_trim()
        rss_trimmed = settled_rss_mb() if trimmed else None

    flat = [x for mine in latencies for x in mine]
    seconds = activated["seconds"]
    return Result(
        ops_per_s=actors / seconds,
        p50_ms=percentile(flat, 50) * 1e3,
        p99_ms=percentile(flat, 99) * 1e3,
        unit="activations",
        details={
            "actors": actors,
            "active_at_peak": active,
            "active_after": left,
            "passivations": passivations,
            "activate_s": activated["seconds"],
            "activate_cpu_main_thread_s": activated["cpu_main_thread_s"],
            "activate_cpu_other_threads_s": activated["cpu_other_threads_s"],
            # CPU per op: per activation (a first message sent, handled, committed).
            **cpu_per_op(activated, actors),
            "passivate_s": passivated["seconds"],
            "rss_mb_start": round(rss_start, 1),
            "rss_mb_just_activated": round(rss_working, 1),
            "rss_mb_active": round(rss_active, 1),
            "rss_mb_after_passivation": round(rss_after, 1),
            "rss_mb_after_malloc_trim": round(rss_trimmed, 1) if rss_trimmed else None,
            "rss_mb_peak": round(peak_rss_mb(), 1),
            # Bytes of RSS (VmRSS after gc.collect()) per actor: all active minus the
            # start, and what is still held once they all passivated.
            "memory_measure": "rss",
            "bytes_per_active_actor": round((rss_active - rss_start) * 1024 * 1024 / actors),
            "bytes_per_passivated_actor": round((rss_after - rss_start) * 1024 * 1024 / actors),
            # Active: in memory, idle long enough to rest (an idle actor's
            # steady state before passivation); "just activated": before the
            # last of them rested.
            "kb_per_active_actor": round((rss_active - rss_start) * 1024 / actors, 2),
            "kb_per_just_activated_actor": round((rss_working - rss_start) * 1024 / actors, 2),
            "kb_per_passivated_actor": round((rss_after - rss_start) * 1024 / actors, 3),
            "kb_per_passivated_actor_after_trim": (
                round((rss_trimmed - rss_start) * 1024 / actors, 3) if rss_trimmed else None
            ),
            "objects_per_active_actor": round((objects_active - objects_start) / actors, 1),
            "objects_per_just_activated_actor": round(
                (objects_working - objects_start) / actors, 1
            ),
            "objects_per_passivated_actor": round((objects_after - objects_start) / actors, 3),
        },
    )


def memory_idle_actors(settings: Settings, workdir: Path) -> Result:
    from trio.testing import MockClock  # here: slow to import (it loads pytest)

    actors = 10_000 if settings.quick else 100_000
    rest_after = _QUICK_REST_AFTER if settings.quick else _REST_AFTER
    clock = MockClock(rate=1.0)
    return trio.run(
        lambda: _memory(workdir, clock, actors=actors, rest_after=rest_after), clock=clock
    )


def _durable_summary(result: Result) -> str:
    d = result.details
    return (
        f"{d['messages']} msgs in {d['seconds']:.2f}s; writer {d['writer_batches']} commits, "
        f"{d['writer_ops_per_batch']} ops/commit, busy {d['writer_busy']:.0%}; "
        f"cpu trio thread {d['cpu_main_thread_s']:.2f}s, other threads "
        f"{d['cpu_other_threads_s']:.2f}s ({d['cpu_us_per_op']} us/msg)"
    )


def _memory_summary(result: Result) -> str:
    d = result.details
    trimmed = d["rss_mb_after_malloc_trim"]
    return (
        f"{d['actors']} actors; RSS start {d['rss_mb_start']} MB, all active "
        f"{d['rss_mb_active']} MB ({d['bytes_per_active_actor']} B/actor), after passivation "
        f"{d['rss_mb_after_passivation']} MB ({d['bytes_per_passivated_actor']} B/actor"
        + (f"; {trimmed} MB after malloc_trim" if trimmed is not None else "")
        + f"); objects/actor left {d['objects_per_passivated_actor']}"
    )


SCENARIOS = [
    Scenario(
        "durable-64-senders-64-actors",
        durable_many,
        baseline="bare-group-commit",
        quick_repeats=3,
        note="send, durable, ack, handled, committed",
        summary=_durable_summary,
    ),
    Scenario(
        "durable-64-senders-hot-actor",
        durable_hot,
        baseline="bare-group-commit",
        quick_repeats=3,
        note="the same, 64 senders to one actor",
        summary=_durable_summary,
    ),
    Scenario(
        "memory-idle-actors",
        memory_idle_actors,
        repeats=1,
        quick_repeats=1,
        note="activations/s; RSS in the summary",
        summary=_memory_summary,
    ),
]
