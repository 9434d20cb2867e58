"""Shared by the shell tests: the guard that no test leaves a job process behind.

Jobs are detached on purpose (their own session, no parent of ours), so a
test that forgets one leaves it running after pytest exits. Every process a
shell test starts carries ``SHELL_TEST_MARK=<token>`` in its
environment (``marked_processes`` sets it for the test; ssh passes it on
with ``SetEnv``; the name must not start with ``CALLBOARD_``, which commands
never get), and every job file lives under a ``JOBS_DIR`` directory in
pytest's base temp directory. At the end of the session the guard kills the
process group of anything carrying either mark, and fails the run if it
found any. Import both fixtures into a test module to use them.
"""

from __future__ import annotations

import os
import secrets
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from callboard.tools._procs import read_stat

MARKER_NAME = "SHELL_TEST_MARK"
MARKER = secrets.token_hex(8)
#: The name of the jobs root each shell test uses under its ``tmp_path``.
JOBS_DIR = "shell-jobs"


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError:
        return b""


def leaked_processes(base: Path) -> list[tuple[int, int, str]]:
    """Live processes (not zombies) started by shell tests: (pid, group, command line)."""
    env_mark = f"{MARKER_NAME}={MARKER}".encode()
    path_mark = str(base).encode()
    jobs_mark = f"/{JOBS_DIR}/".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        stat = read_stat(int(entry))
        if stat is None or not stat.alive:
            continue
        cmdline = _read(f"/proc/{entry}/cmdline")
        environ = _read(f"/proc/{entry}/environ")
        if env_mark in environ.split(b"\0") or (path_mark in cmdline and jobs_mark in cmdline):
            shown = cmdline.replace(b"\0", b" ").decode("utf-8", "replace")
            found.append((stat.pid, stat.pgrp, shown))
    return found


def kill_leaked(base: Path) -> list[str]:
    """SIGKILL the process group of every leaked process; describe what was found."""
    found = leaked_processes(base)
    for _pid, pgid, _cmdline in found:
        if pgid > 1 and pgid != os.getpgrp():
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return [f"pid {pid} (group {pgid}): {cmdline}" for pid, pgid, cmdline in found]


@pytest.fixture(autouse=True)
def marked_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mark every process this test starts, so the session guard can find it."""
    monkeypatch.setenv(MARKER_NAME, MARKER)


@pytest.fixture(scope="session", autouse=True)
def no_leaked_job_processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Fail the run if any test left a job (or anything it started) running."""
    base = tmp_path_factory.getbasetemp()
    yield
    leaked = kill_leaked(base)
    if leaked:
        pytest.fail("tests left processes running (now killed):\n" + "\n".join(leaked))
