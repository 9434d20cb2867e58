"""EIO from fdatasync, injected with strace into a real runtime process.

After a failed fsync the outcome of that commit is unknown: its frames may
be in the WAL, and a later open may find it committed. So the senders of
that batch are told ``unknown_outcome`` (never "failed"), the store stops
taking writes on those files, reopens them and recovers from the WAL, and
the process goes on. The trial then SIGKILLs the process, restarts on the
same data directory, and checks every answer against what is there.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from checker import Tally, applied, outcomes

CHILD = Path(__file__).parent / "store_child.py"
MESSAGES = 120

needs_strace = pytest.mark.skipif(
    shutil.which("strace") is None and not os.environ.get("CI"),
    reason="strace is not installed here (CI installs it)",
)


async def _trial(data: Path, fail_at: int, *, halt: bool) -> tuple[dict[str, str], int, list[str]]:
    """Run the child with the ``fail_at``-th fdatasync failing; kill it once done
    (with ``halt`` it kills itself at the fault)."""
    strace = ["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=fdatasync",
              "-e", f"inject=fdatasync:error=EIO:when={fail_at}"]  # fmt: skip
    command = [*strace, sys.executable, str(CHILD), "send", str(data), str(MESSAGES)]
    command += ["halt"] if halt else []
    process = await trio.lowlevel.open_process(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    lines: list[str] = []
    errors: list[str] = []
    try:
        async with trio.open_nursery() as nursery:

            async def read_stderr() -> None:
                assert process.stderr is not None
                async for chunk in process.stderr:
                    errors.extend(chunk.decode().splitlines())

            nursery.start_soon(read_stderr)
            assert process.stdout is not None
            pending = b""
            while "done" not in lines:
                chunk = await process.stdout.receive_some()
                if not chunk and halt:
                    break  # it killed itself at the fault
                assert chunk, f"the child ended early: {lines[-3:]} {errors[-5:]}"
                pending += chunk
                *done, pending = pending.split(b"\n")
                lines.extend(line.decode() for line in done)
            if "done" in lines:
                pid = json.loads(lines[0])["pid"]
                os.kill(pid, signal.SIGKILL)  # the runtime itself, not strace
            await process.wait()
            nursery.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            process.kill()
            with trio.move_on_after(5, shield=True):
                await process.wait()
    unknown = sum(1 for line in lines if '"unknown"' in line)
    return outcomes(lines), unknown, errors


@needs_strace
async def test_a_failed_fsync_answers_unknown_outcome_and_loses_or_doubles_nothing(
    tmp_path, request
):
    trials = 40 if request.config.getoption("--longrun") else 3
    rng = random.Random(request.node.name)
    tally = Tally()
    stops = []
    halted = Tally()
    with trio.fail_after(60 * trials):
        for trial in range(2 * trials):
            data = tmp_path / f"trial-{trial}"
            halt = trial % 2 == 1  # killed at once after the fault, or going on
            told, unknown, errors = await _trial(data, rng.randint(10, 24), halt=halt)
            (halted if halt else tally).add(told, unknown, await applied(data))
            stops.append(sum("the store stopped after an I/O error" in e for e in errors))
    print(tally.line("EIO on fdatasync, going on"))
    print(halted.line("EIO on fdatasync, killed at once"))
    tally.check()
    halted.check()
    assert tally.acked == trials * MESSAGES  # every unknown outcome was learnt by a retry
    assert tally.unknown > 0 and halted.unknown > 0  # the harness injected; the store said so
    assert stops == [1] * (2 * trials)  # logged once per fault, with its cause
