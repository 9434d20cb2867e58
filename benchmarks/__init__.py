"""Benchmarks of callboard, run by one command: ``python -m benchmarks [--quick]``.

A *scenario* is a function ``run(settings, workdir) -> Result`` that does one
measured run in a fresh, empty directory; the runner (``__main__``) runs each
one several times, each run in its own child process (so that one run's heap,
threads and garbage do not leak into the next, and RSS figures are clean),
and reports the median run. Scenario modules each export
``SCENARIOS: list[Scenario]``; ``__main__.MODULES`` lists the modules.

This module holds only the shared vocabulary (no scenario imports here, so
scenario modules can import it without a cycle).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

__all__ = [
    "CpuClock",
    "Result",
    "Scenario",
    "Settings",
    "cpu_per_op",
    "peak_rss_mb",
    "percentile",
    "rss_mb",
    "settled_rss_mb",
]


@attrs.frozen
class Settings:
    """What a run may depend on: ``quick`` picks the small sizes; every run has
    the collector settings of ``callboard serve`` (`callboard.tune_gc`) unless
    ``default_gc``, which keeps CPython's, to compare."""

    quick: bool = False
    default_gc: bool = False


@attrs.frozen
class Result:
    """What one run measured.

    ``ops_per_s`` is the headline rate (what an "op" is belongs to the
    scenario and is said in ``unit``); ``p50_ms``/``p99_ms`` are latencies
    of one op where the scenario has them. ``details`` holds anything else
    worth keeping (counts, writer statistics, RSS); it is copied into the
    JSON entry of the scenario as it is.
    """

    ops_per_s: float
    p50_ms: float | None = None
    p99_ms: float | None = None
    unit: str = "ops"
    details: dict[str, Any] = attrs.Factory(dict)

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Result:
        return cls(**data)


@attrs.frozen
class Scenario:
    """One named measurement.

    Attributes:
        name: stable across versions (results are compared by name).
        run: does one run in ``workdir`` (an empty directory on the data disk).
        baseline: the name of the scenario this one's ``ratio`` is taken against.
        repeats: runs in a full run (the median is reported); ``quick_repeats``
            in a ``--quick`` run.
        note: one line for the table, e.g. what an op is.
        summary: a line of the figures worth reading beside the rate (from
            ``Result.details``), printed under the table.
    """

    name: str
    run: Callable[[Settings, Path], Result]
    baseline: str | None = None
    repeats: int = 3
    quick_repeats: int = 2
    note: str = ""
    summary: Callable[[Result], str] | None = None

    def runs(self, settings: Settings) -> int:
        return self.quick_repeats if settings.quick else self.repeats


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0-100) of ``values`` (need not be sorted)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def rss_mb() -> float:
    """This process's resident set size now (VmRSS), in MiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def peak_rss_mb() -> float:
    """The peak resident set size of this process so far (VmHWM), in MiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def settled_rss_mb() -> float:
    """RSS after a full garbage collection (what is really held)."""
    gc.collect()
    return rss_mb()


class CpuClock:
    """Wall time and CPU time of a stretch of a run, split between this
    thread (trio's, in the core scenarios) and all the others (the store's
    writer thread and any worker threads)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        # For comparing with times another process took (one clock for all).
        self.started_monotonic = time.monotonic()
        self._process = time.process_time()
        self._thread = time.thread_time()

    def stop(self) -> dict[str, float]:
        wall = time.perf_counter() - self.started
        process = time.process_time() - self._process
        thread = time.thread_time() - self._thread
        return {
            "seconds": round(wall, 4),
            "cpu_main_thread_s": round(thread, 4),
            "cpu_other_threads_s": round(process - thread, 4),
        }


def cpu_per_op(timing: dict[str, float], ops: int) -> dict[str, float]:
    """CPU microseconds per op from a `CpuClock` reading: the total (what the rate
    is bound by on an idle machine, whatever the threads), the trio thread's
    (the main thread's, where there is no trio) and the other threads'. Every
    scenario reports these three, under these names."""
    main, other = timing["cpu_main_thread_s"], timing["cpu_other_threads_s"]
    return {
        "cpu_us_per_op": round((main + other) / ops * 1e6, 2),
        "cpu_us_per_op_trio_thread": round(main / ops * 1e6, 2),
        "cpu_us_per_op_other_threads": round(other / ops * 1e6, 2),
    }
