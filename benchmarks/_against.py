"""``--against REV``: every run beside a run of the code at another revision.

Our machines drift by more than most changes move a figure (the same code
ran one scenario at 24,589 and, half an hour later, 14,513 messages/s), so
a change is judged by runs taken side by side: in each round, each scenario
runs on the code at ``REV``, then on this tree. What is quoted is the
change round by round (this tree's run over ``REV``'s run of the same
round), with its median and how many rounds it was ahead, beside the
medians and ranges of each side.
"""

from __future__ import annotations

import io
import shutil
import statistics
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import Result
from ._report import Outcome, to_json

__all__ = ["against_json", "format_against", "snapshot_at"]


def snapshot_at(root: Path, rev: str) -> Path:
    """A copy of ``callboard`` and ``benchmarks`` as they are at git revision ``rev``."""
    done = subprocess.run(
        ["git", "-C", str(root), "archive", "--format=tar", rev, "callboard", "benchmarks"],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip()
        raise ValueError(f"--against {rev}: git archive could not export it: {reason}")
    code = Path(tempfile.mkdtemp(prefix="callboard-benchmarks-against-"))
    try:
        with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
            tar.extractall(code, filter="data")
    except BaseException:
        shutil.rmtree(code, ignore_errors=True)
        raise
    return code


def _per_round(
    before: Outcome, after: Outcome, figure: Callable[[Result], float | None]
) -> list[float]:
    """This tree's ``figure`` over ``REV``'s, for each round both ran and both have it."""
    out = []
    for b, a in zip(before.runs, after.runs, strict=False):
        was, now = figure(b), figure(a)
        if was and now is not None:
            out.append(round(now / was, 3))
    return out


def _ops(result: Result) -> float:
    return result.ops_per_s


def _cpu(result: Result) -> float | None:
    cpu: float | None = result.details.get("cpu_us_per_op")
    return cpu


def _change(before: Outcome, after: Outcome) -> dict[str, Any]:
    ops, cpu = _per_round(before, after, _ops), _per_round(before, after, _cpu)
    return {
        "name": after.scenario.name,
        "ops_change_runs": ops,
        "ops_change_median": statistics.median(ops) if ops else None,
        "rounds_ahead": sum(1 for r in ops if r > 1),
        "cpu_change_runs": cpu,
        "cpu_change_median": statistics.median(cpu) if cpu else None,
    }


def against_json(
    rev: str, before: Sequence[Outcome], after: Sequence[Outcome], meta: dict[str, Any]
) -> dict[str, Any]:
    """The JSON of a run ``--against rev``: both sides as a normal run has them,
    and the change round by round."""
    return {
        **meta,
        "against": rev,
        "before": to_json(list(before), {})["scenarios"],
        "after": to_json(list(after), {})["scenarios"],
        "change": [_change(b, a) for b, a in zip(before, after, strict=True)],
    }


def _range(values: list[float], fmt: str) -> str:
    if not values:
        return "-"
    figures = (statistics.median(values), min(values), max(values))
    median, low, high = (format(v, fmt) for v in figures)
    return f"{median} ({low}-{high})"


def format_against(rev: str, before: Sequence[Outcome], after: Sequence[Outcome]) -> str:
    """One row per scenario: each side's ops/s and CPU per op, median (range),
    and the change round by round."""
    header = (
        "scenario",
        f"ops/s at {rev}",
        "ops/s here",
        "change (runs ahead)",
        f"cpu us/op at {rev}",
        "cpu us/op here",
    )
    rows = [header]
    for b, a in zip(before, after, strict=True):
        change = _change(b, a)
        cpus = [[c for r in o.runs if (c := _cpu(r)) is not None] for o in (b, a)]
        ratio, ahead = change["ops_change_median"], change["rounds_ahead"]
        rows.append((
            a.scenario.name,
            b.error or _range([r.ops_per_s for r in b.runs], ",.0f"),
            a.error or _range([r.ops_per_s for r in a.runs], ",.0f"),
            "-" if ratio is None else f"{ratio:.2f}x ({ahead}/{len(change['ops_change_runs'])})",
            _range(cpus[0], ".1f"),
            _range(cpus[1], ".1f"),
        ))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows)
    return "\n".join(line.rstrip() for line in lines)
