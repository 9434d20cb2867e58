"""``python -m benchmarks [--quick] [--only NAME ...]``: run, print a table, write JSON.

Each run of each scenario is a child process (``--run-one NAME``, which
can also be run by hand, e.g. under a profiler). Runs go in rounds (every
scenario once, then again), so that slow drift of the machine touches all
scenarios alike and each ratio compares runs taken side by side.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import callboard

from . import (
    Result,
    Scenario,
    Settings,
    _baseline,
    _core,
    _gateway,
    _gateway_floor,
    _pg_two_nodes,
    _postgres,
    _runtime_floor,
)
from ._against import against_json, format_against, snapshot_at
from ._report import (
    MachineLoad,
    Outcome,
    busy_warning,
    core_digest,
    environment,
    format_table,
    git_state,
    to_json,
    write_json,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
# On the repository's own disk: the data of every scenario and the baselines
# it is compared with share one filesystem (the lead keeps it out of git).
DEFAULT_TMP = HERE / ".tmp"

# Scenario modules, each exporting SCENARIOS; a new module is one more entry.
MODULES = [
    _baseline,
    _core,
    _gateway,
    _gateway_floor,
    _runtime_floor,
    _postgres,
    _pg_two_nodes,
]
SCENARIOS = [scenario for module in MODULES for scenario in module.SCENARIOS]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes: a minute or so")
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="run the scenario named NAME, or else those whose name contains NAME "
        "(and their baselines); repeatable",
    )
    parser.add_argument("--repeats", type=int, help="runs per scenario (default: its own)")
    parser.add_argument(
        "--default-gc",
        action="store_true",
        help="keep CPython's collector settings in every run, instead of those of "
        "callboard serve (callboard.tune_gc), to compare",
    )
    parser.add_argument(
        "--tmpdir", type=Path, default=DEFAULT_TMP, help=f"where data goes (default {DEFAULT_TMP})"
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="the JSON file (default: results/latest.json for a full run of everything, "
        "results/latest-quick.json for a quick one, results/partial.json for --only, --default-gc, "
        "--repeats or a run where a scenario failed)",
    )
    parser.add_argument(
        "--against",
        metavar="REV",
        help="run every scenario also on the code at git revision REV, side by side in "
        "each round, and print the change round by round (writes results/against.json)",
    )
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument(
        "--run-one", metavar="NAME", help="one run of one scenario in this process; prints JSON"
    )
    return parser


def _select(only: list[str] | None) -> list[Scenario]:
    if not only:
        return list(SCENARIOS)
    by_name = {s.name: s for s in SCENARIOS}
    # A whole name picks that scenario alone: "durable-64-senders-64-actors"
    # is also part of the names of its PostgreSQL forms.
    wanted = {
        s.name for s in SCENARIOS if any(part in s.name for part in only if part not in by_name)
    }
    wanted.update(part for part in only if part in by_name)
    # A baseline's own baseline too (the PostgreSQL group commit is held to
    # one row per commit), so every ratio printed has its baseline in the run.
    pending = list(wanted)
    while pending:
        baseline = by_name[pending.pop()].baseline
        if baseline is not None and baseline not in wanted:
            wanted.add(baseline)
            pending.append(baseline)
    return [s for s in SCENARIOS if s.name in wanted]


def _run_one(name: str, settings: Settings, tmpdir: Path) -> int:
    scenario = next((s for s in SCENARIOS if s.name == name), None)
    if scenario is None:
        print(f"no scenario {name!r}; --list shows them", file=sys.stderr)
        return 2
    tmpdir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=tmpdir))
    if not settings.default_gc:
        # As callboard serve runs, for every scenario and baseline alike.
        callboard.tune_gc()
    try:
        result = scenario.run(settings, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(result.to_json()))
    return 0


def _snapshot() -> Path:
    """A copy of the code as it is now, which every run imports: edits made to
    the work tree while the benchmarks run (others keep working) cannot mix
    versions between runs or break a run half-way. (In the system's temporary
    directory: a copy inside the repository would meet linters and test runs.)"""
    code = Path(tempfile.mkdtemp(prefix="callboard-benchmarks-code-"))
    ignore = shutil.ignore_patterns("__pycache__", ".tmp", "results")
    for package in ("callboard", "benchmarks"):
        shutil.copytree(ROOT / package, code / package, ignore=ignore)
    return code


def _child(name: str, settings: Settings, tmpdir: Path, code: Path) -> Result:
    command = [sys.executable, "-m", "benchmarks", "--run-one", name, "--tmpdir", str(tmpdir)]
    if settings.quick:
        command.append("--quick")
    if settings.default_gc:
        command.append("--default-gc")
    # -m puts the working directory first on sys.path: the snapshot is what imports.
    done = subprocess.run(command, cwd=code, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"exit status {done.returncode} (its stderr is above)")
    return Result.from_json(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    settings = Settings(quick=args.quick, default_gc=args.default_gc)
    tmpdir = args.tmpdir.resolve()
    if args.run_one:
        return _run_one(args.run_one, settings, tmpdir)
    scenarios = _select(args.only)
    if args.list:
        for scenario in scenarios:
            print(f"{scenario.name}: {scenario.note}")
        return 0
    if not scenarios:
        print("no scenario matches", file=sys.stderr)
        return 2

    tmpdir.mkdir(parents=True, exist_ok=True)
    try:
        before = snapshot_at(ROOT, args.against) if args.against else None
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    load = MachineLoad()
    git = git_state(ROOT)
    code = _snapshot()
    git["core_digest"] = core_digest(code)
    try:
        outcomes = _run_all(scenarios, settings, args.repeats, tmpdir, code, before)
    finally:
        shutil.rmtree(code, ignore_errors=True)
        if before is not None:
            shutil.rmtree(before, ignore_errors=True)
    machine_load = load.stop()
    if args.against:
        return _report_against(args, scenarios, outcomes, tmpdir, machine_load, git)

    ordered = [outcomes[("", s.name)] for s in scenarios]
    print(format_table(ordered), flush=True)
    failed = any(o.error is not None for o in ordered)
    partial = bool(args.only or args.repeats or args.default_gc or failed)
    out = args.out or RESULTS / (
        "partial.json" if partial else "latest-quick.json" if args.quick else "latest.json"
    )
    meta = _meta(args, tmpdir, machine_load, git)
    write_json(out, to_json(ordered, meta))
    print(f"\nwrote {out}")
    return 1 if failed else 0


def _meta(
    args: argparse.Namespace,
    tmpdir: Path,
    machine_load: dict[str, float | None],
    git: dict[str, Any],
) -> dict[str, Any]:
    """The run's environment for its JSON, after warning on stdout if the
    machine was busy."""
    warning = busy_warning(machine_load)
    if warning:
        print(f"\n{warning}")
    meta = environment(quick=args.quick, datadir=tmpdir, load=machine_load, git=git)
    meta["gc"] = "CPython's defaults" if args.default_gc else "callboard.tune_gc"
    return meta


def _run_all(
    scenarios: list[Scenario],
    settings: Settings,
    repeats: int | None,
    tmpdir: Path,
    code: Path,
    before: Path | None = None,
) -> dict[tuple[str, str], Outcome]:
    """Every run, by (side, scenario name): side "" is this tree, "before" the
    code at ``--against``'s revision, run beside this tree's each time.

    The two sides swap places from one round to the next: the second of two
    runs side by side was measured slower even where the code was the same
    (the echo scenarios, 0.94-0.97x in all of 3 rounds), so an even number
    of repeats puts each side first equally often."""
    sides = [("", code)] if before is None else [("before", before), ("", code)]
    outcomes = {(side, s.name): Outcome(s) for side, _ in sides for s in scenarios}
    planned = {s.name: repeats or s.runs(settings) for s in scenarios}
    for round_ in range(max(planned.values())):
        in_order = sides if round_ % 2 == 0 else sides[::-1]
        for scenario in scenarios:
            for side, side_code in in_order:
                outcome = outcomes[(side, scenario.name)]
                if round_ >= planned[scenario.name] or outcome.error is not None:
                    continue
                label = f"{scenario.name} ({side})" if side else scenario.name
                print(
                    f"[{round_ + 1}/{planned[scenario.name]}] {label} ...",
                    file=sys.stderr,
                    flush=True,
                )
                try:
                    result = _child(scenario.name, settings, tmpdir, side_code)
                except Exception as exc:
                    outcome.error = f"{type(exc).__name__}: {exc}"
                    continue
                outcome.runs.append(result)
                print(f"    {result.ops_per_s:,.0f} {result.unit}/s", file=sys.stderr, flush=True)
    return outcomes


def _report_against(
    args: argparse.Namespace,
    scenarios: list[Scenario],
    outcomes: dict[tuple[str, str], Outcome],
    tmpdir: Path,
    machine_load: dict[str, float | None],
    git: dict[str, Any],
) -> int:
    before = [outcomes[("before", s.name)] for s in scenarios]
    after = [outcomes[("", s.name)] for s in scenarios]
    print(format_against(args.against, before, after), flush=True)
    out = args.out or RESULTS / "against.json"
    meta = _meta(args, tmpdir, machine_load, git)
    write_json(out, against_json(args.against, before, after, meta))
    print(f"\nwrote {out}")
    return 1 if any(o.error is not None for o in (*before, *after)) else 0


if __name__ == "__main__":
    sys.exit(main())
