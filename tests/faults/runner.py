"""Running a fault child: its output lines, its stderr, and the kill at its end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import attrs
import trio
from checker import outcomes

__all__ = ["Child", "Run", "open_child", "run_child"]


@attrs.frozen
class Run:
    """What a child printed: its lines (outcomes, ``done``) and its stderr lines,
    and how it ended (``-9``: SIGKILL)."""

    lines: list[str]
    errors: list[str]
    returncode: int

    @property
    def told(self) -> dict[str, str]:
        return outcomes(self.lines)

    @property
    def unknown(self) -> int:
        return sum(1 for line in self.lines if '"unknown"' in line)

    def logged(self, text: str) -> int:
        return sum(text in line for line in self.errors)


@attrs.define
class Child:
    """A running child: what it printed so far, and ways to wait for more."""

    process: trio.Process
    lines: list[str] = attrs.Factory(list)
    errors: list[str] = attrs.Factory(list)
    ended: bool = False  # its stdout closed
    _grew: trio.Event = attrs.Factory(trio.Event)
    _closed: int = 0  # of its two pipes

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        """Wait until ``condition()`` holds, checked whenever the child prints."""
        while not condition():
            assert not self.ended, f"the child ended: {self.lines[-3:]} {self.errors[-5:]}"
            self._grew = trio.Event()
            await self._grew.wait()

    def count(self, text: str) -> int:
        """How many lines it printed that contain ``text``."""
        return sum(text in line for line in self.lines)

    def logged(self, text: str) -> int:
        """How many lines of its stderr contain ``text``."""
        return sum(text in line for line in self.errors)

    async def wait_printed(self, text: str, more: int) -> None:
        """Wait until it has printed ``more`` lines containing ``text`` than so far."""
        target = self.count(text) + more
        await self.wait_until(lambda: self.count(text) >= target)

    async def wait_logged(self, text: str, times: int) -> None:
        """Wait until ``times`` lines of its stderr contain ``text``."""
        await self.wait_until(lambda: self.logged(text) >= times)

    async def tell(self, command: object) -> None:
        """Write ``command`` to its stdin as one JSON line (see `open_child`'s ``stdin``)."""
        assert self.process.stdin is not None
        await self.process.stdin.send_all(json.dumps(command).encode() + b"\n")

    def kill(self) -> None:
        """SIGKILL the runtime: the pid it printed first (not a strace around it)."""
        os.kill(json.loads(self.lines[0])["pid"], signal.SIGKILL)

    def run(self) -> Run:
        assert self.process.returncode is not None
        return Run(self.lines, self.errors, self.process.returncode)

    async def _read(self, stream: trio.abc.ReceiveStream, into: list[str]) -> None:
        pending = b""
        async for chunk in stream:
            *done, pending = (pending + chunk).split(b"\n")
            into.extend(line.decode(errors="replace") for line in done)
            self._grew.set()
        self.ended = self.ended or into is self.lines
        self._closed += 1
        self._grew.set()

    async def wait_read(self) -> None:
        """Wait until both pipes are read to their end."""
        while self._closed < 2:
            self._grew = trio.Event()
            await self._grew.wait()


@asynccontextmanager
async def open_child(
    command: list[str], *, env: dict[str, str] | None = None, stdin: bool = False
) -> AsyncIterator[Child]:
    """Start ``command``, a child that prints its pid first (with ``stdin``, one
    that reads commands from a pipe); on exit it is killed if still running,
    and waited for."""
    process = await trio.lowlevel.open_process(
        command,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        async with trio.open_nursery() as nursery:
            child = Child(process)
            assert process.stdout is not None and process.stderr is not None
            nursery.start_soon(child._read, process.stdout, child.lines)
            nursery.start_soon(child._read, process.stderr, child.errors)
            yield child
            await process.wait()
            with trio.move_on_after(5):  # a grandchild may hold a pipe open
                await child.wait_read()
            nursery.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            process.kill()
        with trio.move_on_after(5, shield=True):
            await process.wait()


async def run_child(
    command: list[str], *, kill_when_done: bool = True, env: dict[str, str] | None = None
) -> Run:
    """Run ``command`` until it prints ``done``, then SIGKILL the runtime; a child
    that ends by itself (one that kills itself at a fault) is read to its end.
    With ``kill_when_done`` false the child is always read to its end."""
    async with open_child(command, env=env) as child:
        await child.wait_until(lambda: child.ended or (kill_when_done and "done" in child.lines))
        if kill_when_done and "done" in child.lines:
            child.kill()
    return child.run()
