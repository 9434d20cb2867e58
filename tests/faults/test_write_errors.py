"""ENOSPC and EIO from the writes of the database and its WAL, injected with strace.

SQLite writes both files with pwrite64. A write that finds the disk full
(ENOSPC) fails its transaction before its commit record is written: SQLite
answers SQLITE_FULL, and the store tells the batch's senders that nothing
was accepted. A write that fails with EIO is an I/O error like a failed
fsync: the outcome is unknown, and the store stops and recovers from the
WAL. Each trial injects one failure or a burst of them at a random write,
SIGKILLs the process (once it is done, or at once after the fault), restarts
on the same data directory and checks every answer against what is there.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
import trio
from checker import Tally, applied
from runner import Run, run_child
from test_fsync_errors import calls_to_open, needs_strace

CHILD = Path(__file__).parent / "store_child.py"
MESSAGES = 120
# The first failing write, counted after the ones opening the store takes
# (measured: the schema's, about 50), within the 400 or so MESSAGES sends make.
AFTER_OPEN = (1, 250)


def _files(data: Path) -> list[str]:
    return [f"-P{data / 'callboard.sqlite3'}", f"-P{data / 'callboard.sqlite3-wal'}"]


# What the store logs when a write fails with each error (`FullDisk`, the fail-stop).
_ANSWERED = {"ENOSPC": "the disk is full", "EIO": "the store stopped after an I/O error"}


async def _trial(data: Path, error: str, first: int, last: int, place: str, *, halt: bool) -> Run:
    """Run the child with writes ``first`` to ``last`` of its database files failing
    (as the thread that commits, ``place``, counts them)."""
    strace = ["strace", "-f", "-qq", "-o", "/dev/null", *_files(data), "-e", "trace=pwrite64",
              "-e", f"inject=pwrite64:error={error}:when={first}..{last}"]  # fmt: skip
    command = [*strace, sys.executable, str(CHILD), "send", str(data), str(MESSAGES)]
    run = await run_child(command + [f"commit={place}"] + (["halt"] if halt else []))
    assert halt or "done" in run.lines, f"the child ended early: {run.lines[-3:]} {run.errors[-5:]}"
    return run


async def _trials(
    tmp_path: Path, error: str, place: str, trials: int, seed: str
) -> tuple[Tally, Tally, int]:
    """Tallies of the children that went on after the fault and of those killed
    at once, and how many runs met their fault (the store logged its answer)."""
    rng = random.Random(seed)
    going_on, halted, faulted = Tally(), Tally(), 0
    fresh = tmp_path / "opening"
    opening = await calls_to_open(fresh, "pwrite64", *_files(fresh))
    assert opening > 0
    for trial in range(2 * trials):
        data = tmp_path / f"{error}-{trial}"
        halt = trial % 2 == 1
        first = opening + rng.randint(*AFTER_OPEN)
        last = first + rng.choice((0, 0, rng.randint(1, 30)))  # one failure, or a burst
        run = await _trial(data, error, first, last, place, halt=halt)
        (halted if halt else going_on).add(run.told, run.unknown, await applied(data))
        # Met and answered by the store: the batch it hit may hold only actors'
        # commits (their cells retry them), so no sender need hear of it.
        faulted += run.logged(_ANSWERED[error]) > 0
    return going_on, halted, faulted


@needs_strace
@pytest.mark.parametrize("place", ["inline", "thread"])
async def test_a_full_disk_at_a_write_refuses_cleanly_and_loses_or_doubles_nothing(
    tmp_path, request, place
):
    trials = 60 if request.config.getoption("--longrun") else 3
    with trio.fail_after(60 * trials):
        going_on, halted, faulted = await _trials(
            tmp_path, "ENOSPC", place, trials, request.node.name
        )
    print(going_on.line(f"ENOSPC on write, committing {place}, going on"))
    print(halted.line(f"ENOSPC on write, committing {place}, killed at once"))
    going_on.check()
    halted.check()
    assert faulted == 2 * trials  # every run met its fault and answered for it
    assert going_on.refused > 0 and halted.refused > 0  # senders were told: nothing accepted


@needs_strace
@pytest.mark.parametrize("place", ["inline", "thread"])
async def test_an_io_error_at_a_write_answers_unknown_outcome_and_loses_or_doubles_nothing(
    tmp_path, request, place
):
    trials = 60 if request.config.getoption("--longrun") else 3
    with trio.fail_after(60 * trials):
        going_on, halted, faulted = await _trials(tmp_path, "EIO", place, trials, request.node.name)
    print(going_on.line(f"EIO on write, committing {place}, going on"))
    print(halted.line(f"EIO on write, committing {place}, killed at once"))
    going_on.check()
    halted.check()
    assert going_on.unknown > 0 and halted.unknown > 0
    assert faulted == 2 * trials
