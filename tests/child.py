"""Running a Python child process from trio tests and reading its lines as they come."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import trio

CHILD = Path(__file__).parent / "crash_child.py"


class Lines:
    """Lines of a child's stdout, read as they come."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buffer = b""

    async def next(self) -> str:
        while b"\n" not in self._buffer:
            chunk = await self._stream.receive_some()
            assert chunk, f"the child closed stdout; partial line: {self._buffer!r}"
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()


class Child:
    """A child process whose stdout is read line by line."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self._buffer = b""
        self.lines: list[str] = []

    @classmethod
    async def start(
        cls, args: Sequence[str], *, script: Path = CHILD, store: str | None = None
    ) -> Child:
        """``store``: the PostgreSQL URL the child's runtime uses (None: SQLite)."""
        env = {k: v for k, v in os.environ.items() if k != "CALLBOARD_TEST_STORE"}
        if store is not None:
            env["CALLBOARD_TEST_STORE"] = store
        process = await trio.lowlevel.open_process(
            [sys.executable, str(script), *args],
            stdout=subprocess.PIPE,
            env={**env, "PYTHONUNBUFFERED": "1"},
        )
        return cls(process)

    async def readline(self) -> str | None:
        """The next line, or None at end of output."""
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            chunk = await self.process.stdout.receive_some(65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        text = line.decode()
        self.lines.append(text)
        return text

    async def wait_for_line(self, wanted: str) -> None:
        while (line := await self.readline()) is not None:
            if line == wanted:
                return
        raise AssertionError(f"the child ended without printing {wanted!r}: {self.lines[-5:]}")

    async def kill(self) -> None:
        """SIGKILL, then read what it had printed before it died."""
        if self.process.returncode is None:
            os.kill(self.process.pid, signal.SIGKILL)
        with trio.CancelScope(shield=True):
            await self.process.wait()
            while await self.readline() is not None:
                pass

    async def wait(self) -> int:
        while await self.readline() is not None:
            pass
        return await self.process.wait()
