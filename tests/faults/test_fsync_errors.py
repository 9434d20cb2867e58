"""EIO from fdatasync, injected with strace into a real runtime process.

After a failed fsync the outcome of that commit is unknown: its frames may
be in the WAL, and a later open may find it committed. So the senders of
that batch are told ``unknown_outcome`` (never "failed"), the store stops
taking writes on those files, reopens them and recovers from the WAL, and
the process goes on. The trial then SIGKILLs the process, restarts on the
same data directory, and checks every answer against what is there.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
from pathlib import Path

import pytest
import trio
from checker import Tally, applied
from runner import Run, run_child

CHILD = Path(__file__).parent / "store_child.py"
MESSAGES = 120

needs_strace = pytest.mark.skipif(
    shutil.which("strace") is None and not os.environ.get("CI"),
    reason="strace is not installed here (CI installs it)",
)


async def _trial(data: Path, fail_at: int, place: str, *, halt: bool) -> Run:
    """Run the child with the ``fail_at``-th fdatasync (of the thread that commits,
    ``place``) failing; kill it once done (with ``halt`` it kills itself at the fault)."""
    strace = ["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=fdatasync",
              "-e", f"inject=fdatasync:error=EIO:when={fail_at}"]  # fmt: skip
    command = [*strace, sys.executable, str(CHILD), "send", str(data), str(MESSAGES)]
    run = await run_child(command + [f"commit={place}"] + (["halt"] if halt else []))
    assert halt or "done" in run.lines, f"the child ended early: {run.lines[-3:]} {run.errors[-5:]}"
    return run


async def calls_to_open(data: Path, call: str, *only: str) -> int:
    """How many ``call`` system calls (within ``only``, strace filters such as
    ``-PFILE``) opening the new data directory ``data`` makes, with no send."""
    log = data.with_name(f"{data.name}.strace")
    strace = ["strace", "-f", "-qq", "-o", str(log), *only, "-e", f"trace={call}"]
    run = await run_child([*strace, sys.executable, str(CHILD), "send", str(data), "0"])
    assert "done" in run.lines, run.errors[-5:]
    return sum(f"{call}(" in line for line in log.read_text().splitlines())


@needs_strace
@pytest.mark.parametrize("place", ["inline", "thread"])
async def test_a_failed_fsync_answers_unknown_outcome_and_loses_or_doubles_nothing(
    tmp_path, request, place
):
    trials = 40 if request.config.getoption("--longrun") else 3
    rng = random.Random(request.node.name)
    tally = Tally()
    stops = []
    halted = Tally()
    with trio.fail_after(60 * trials):
        # strace counts each thread's calls: the trio thread opens the store and,
        # after the fault, reopens it (no more syncs than the first open). The
        # Nth is past both, so that only the commit meets it, wherever it is made.
        first = 2 * await calls_to_open(tmp_path / "opening", "fdatasync") + 1
        for trial in range(2 * trials):
            data = tmp_path / f"trial-{trial}"
            halt = trial % 2 == 1  # killed at once after the fault, or going on
            run = await _trial(data, rng.randint(first, first + 14), place, halt=halt)
            (halted if halt else tally).add(run.told, run.unknown, await applied(data))
            stops.append(run.logged("the store stopped after an I/O error"))
    print(tally.line(f"EIO on fdatasync, committing {place}, going on"))
    print(halted.line(f"EIO on fdatasync, committing {place}, killed at once"))
    tally.check()
    halted.check()
    assert tally.acked == trials * MESSAGES  # every unknown outcome was learnt by a retry
    assert tally.unknown > 0 and halted.unknown > 0  # the harness injected; the store said so
    assert stops == [1] * (2 * trials)  # logged once per fault, with its cause
