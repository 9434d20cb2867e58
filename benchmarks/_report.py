"""The outputs of a benchmark run: the table on stdout and the JSON file.

JSON layout (``results/latest.json``)::

    {"quick": false, "date": "...", "machine": {...}, "software": {...},
     "scenarios": [{"name", "ops_per_s", "unit", "p50_ms", "p99_ms",
                    "baseline", "ratio", "ratio_runs", "runs",
                    "ops_per_s_min", "ops_per_s_max",
                    "cpu_us_per_op_median", "cpu_us_per_op_min", "cpu_us_per_op_max",
                    "cpu_us_per_op_runs", "cpu_us_per_op_trio_thread_runs",
                    "cpu_us_per_op_other_threads_runs",
                    ...details of the median run}]}

``runs`` lists the ops/s of every run; the other figures are those of the
median run (by ops/s), among them ``cpu_us_per_op`` and its two parts.
``ratio`` is ``ops_per_s`` over the baseline's; ``ratio_runs`` the ratio
of each round's run over the baseline's run of the same round.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import resource
import sqlite3
import subprocess
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import attrs

from . import Result, Scenario

__all__ = [
    "MachineLoad",
    "Outcome",
    "busy_warning",
    "core_digest",
    "environment",
    "format_table",
    "git_state",
    "to_json",
    "write_json",
]


@attrs.define
class Outcome:
    """Every run of one scenario, and the error that ended one, if any."""

    scenario: Scenario
    runs: list[Result] = attrs.Factory(list)
    error: str | None = None

    @property
    def median(self) -> Result | None:
        """The median run by ops/s (of two, the slower: quoted figures stay conservative)."""
        if not self.runs:
            return None
        ordered = sorted(self.runs, key=lambda r: r.ops_per_s)
        return ordered[(len(ordered) - 1) // 2]


def _ratio(outcome: Outcome, by_name: dict[str, Outcome]) -> float | None:
    name = outcome.scenario.baseline
    base = by_name.get(name) if name else None
    mine = outcome.median
    if base is None or mine is None or base.median is None or not base.median.ops_per_s:
        return None
    return mine.ops_per_s / base.median.ops_per_s


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _ratio_runs(outcome: Outcome, by_name: dict[str, Outcome]) -> list[float] | None:
    """Round by round: each run over the baseline's run of the same round (runs
    taken side by side), while both have as many runs as rounds were run."""
    name = outcome.scenario.baseline
    base = by_name.get(name) if name else None
    if base is None or base.error is not None or outcome.error is not None:
        return None
    pairs = zip(outcome.runs, base.runs, strict=False)
    return [round(r.ops_per_s / b.ops_per_s, 3) for r, b in pairs if b.ops_per_s]


_CPU_KEYS = ("cpu_us_per_op", "cpu_us_per_op_trio_thread", "cpu_us_per_op_other_threads")


def _spread(outcome: Outcome) -> dict[str, Any]:
    """The spread over the runs: ops/s (min, max; ``runs`` has them all) and CPU
    per op (median, min, max of the total; every run's total and parts)."""
    if not outcome.runs:
        return {}
    rates = [r.ops_per_s for r in outcome.runs]
    out: dict[str, Any] = {
        "ops_per_s_min": round(min(rates), 1),
        "ops_per_s_max": round(max(rates), 1),
    }
    cpu = [r.details.get("cpu_us_per_op") for r in outcome.runs]
    if all(x is not None for x in cpu):
        ordered = sorted(cpu)
        out["cpu_us_per_op_median"] = ordered[(len(ordered) - 1) // 2]
        out["cpu_us_per_op_min"] = ordered[0]
        out["cpu_us_per_op_max"] = ordered[-1]
    for key in _CPU_KEYS:
        out[f"{key}_runs"] = [r.details.get(key) for r in outcome.runs]
    return out


def to_json(outcomes: Sequence[Outcome], meta: dict[str, Any]) -> dict[str, Any]:
    by_name = {o.scenario.name: o for o in outcomes}
    entries = []
    for outcome in outcomes:
        median = outcome.median
        entry: dict[str, Any] = {
            "name": outcome.scenario.name,
            "ops_per_s": _round(median.ops_per_s, 1) if median else None,
            "unit": median.unit if median else None,
            "p50_ms": _round(median.p50_ms, 3) if median else None,
            "p99_ms": _round(median.p99_ms, 3) if median else None,
            "baseline": outcome.scenario.baseline,
            "ratio": _round(_ratio(outcome, by_name), 2),
            "ratio_runs": _ratio_runs(outcome, by_name),
            "runs": [round(r.ops_per_s, 1) for r in outcome.runs],
            **_spread(outcome),
        }
        if outcome.error is not None:
            entry["error"] = outcome.error
        if median is not None:
            entry.update(median.details)
        entries.append(entry)
    return {**meta, "scenarios": entries}


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_table(outcomes: Sequence[Outcome]) -> str:
    by_name = {o.scenario.name: o for o in outcomes}
    header = (
        "scenario", "ops/s", "unit", "p50 ms", "p99 ms", "cpu us/op", "vs", "ratio",
        "runs (ops/s)",
    )  # fmt: skip
    rows = []
    for outcome in outcomes:
        median = outcome.median
        ratio = _ratio(outcome, by_name)
        rows.append(
            (
                outcome.scenario.name,
                _fmt(median.ops_per_s if median else None, ",.0f"),
                median.unit if median else "FAILED",
                _fmt(median.p50_ms if median else None, ".2f"),
                _fmt(median.p99_ms if median else None, ".2f"),
                _fmt(median.details.get("cpu_us_per_op") if median else None, ".1f"),
                outcome.scenario.baseline or "",
                f"{ratio:.2f}x" if ratio is not None else "",
                " ".join(f"{r.ops_per_s:,.0f}" for r in outcome.runs),
            )
        )
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    right = {1, 3, 4, 5, 7}

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    out = [line(header), line(["-" * w for w in widths])]
    out += [line(row) for row in rows]
    out.append("")
    for outcome in outcomes:
        median = outcome.median
        text = outcome.scenario.note
        if outcome.error is not None:
            text = f"FAILED: {outcome.error}"
        elif median is not None and outcome.scenario.summary is not None:
            summary = outcome.scenario.summary(median)
            text = f"{text}; {summary}" if text else summary
        out.append(f"{outcome.scenario.name}: {text}")
    return "\n".join(out)


# -- where and with what the figures were taken ------------------------------------


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gb() -> float | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            for line in info:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _filesystem(path: Path) -> dict[str, str]:
    """The mount that holds ``path`` (device and type), from /proc/mounts."""
    target = str(path.resolve())
    best = ("", "unknown", "unknown")
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            for line in mounts:
                device, mount, fstype, *_ = line.split()
                inside = target == mount or target.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) > len(best[0]):
                    best = (mount, device, fstype)
    except OSError:
        pass
    # The mount and its type say what the disk is; the absolute path would only
    # name this machine's checkout.
    return {"mount": best[0], "device": best[1], "type": best[2]}


# The core whose figures these are; changes elsewhere (agents, gateway) do not count.
_CORE = ("callboard/store", "callboard/runtime", "callboard/supervisor", "callboard/actors",
         "callboard/mailbox")  # fmt: skip


def core_digest(root: Path) -> str:
    """A digest of the core's source as it is on disk (what a run imports)."""
    digest = hashlib.sha256()
    for part in _CORE:
        for path in sorted((root / part).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def git_state(root: Path) -> dict[str, Any]:
    """The commit, the core files that differ from it (measured as they were), and
    a digest of the core's source (to tell two runs of the same code)."""
    state: dict[str, Any] = {"core_digest": core_digest(root)}
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--", *_CORE],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return state
    state["commit"] = commit
    state["core_changes"] = sorted(line[3:] for line in status.splitlines())
    return state


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _busy_seconds() -> float | None:
    """CPU time the whole machine spent busy so far (all CPUs, all processes)."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(x) for x in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


class MachineLoad:
    """How much of the machine other processes used while the benchmarks ran:
    on a shared machine every rate is lower and noisier than on an idle one."""

    def __init__(self) -> None:
        self._wall = time.monotonic()
        self._busy = _busy_seconds()
        self._own = _own_seconds()

    def stop(self) -> dict[str, float | None]:
        wall = time.monotonic() - self._wall
        busy = _busy_seconds()
        own = _own_seconds() - self._own
        cpus = os.cpu_count() or 1
        others = None
        if busy is not None and self._busy is not None and wall > 0:
            others = round(max(0.0, (busy - self._busy) - own) / (wall * cpus), 3)
        return {
            "others_cpu_share": others,
            "own_cpu_s": round(own, 1),
            "wall_s": round(wall, 1),
            "load_average_1m_after": round(os.getloadavg()[0], 2),
        }


def busy_warning(load: dict[str, float | None]) -> str | None:
    share = load.get("others_cpu_share")
    if share is None or share < 0.1:
        return None
    return (
        f"note: other processes used {share:.0%} of this machine's CPU time during the run: "
        "rates are lower and noisier than on an idle machine (cpu_us_per_op, the CPU "
        "cost per op, is the steadier figure)"
    )


def environment(
    *, quick: bool, datadir: Path, load: dict[str, float | None], git: dict[str, Any]
) -> dict[str, Any]:
    return {
        "quick": quick,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "cpu": _cpu_model(),
            "cpus": os.cpu_count(),
            "memory_gb": _memory_gb(),
            "filesystem": _filesystem(datadir),
            "load_during_run": load,
        },
        "software": {
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "sqlite": sqlite3.sqlite_version,
            "callboard": _version("callboard"),
            "trio": _version("trio"),
            "orjson": _version("orjson"),
            **git,
        },
    }
