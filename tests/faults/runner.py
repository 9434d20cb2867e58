"""Running a fault child: its output lines, its stderr, and the kill at its end."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import attrs
import trio
from checker import outcomes

__all__ = ["Run", "run_child"]


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


async def run_child(
    command: list[str], *, kill_when_done: bool = True, env: dict[str, str] | None = None
) -> Run:
    """Run ``command`` (a child that prints its pid first) until it prints ``done``,
    then SIGKILL the runtime (not a strace around it); a child that ends by itself
    (one that kills itself at a fault) is read to its end. With ``kill_when_done``
    false the child is always read to its end."""
    process = await trio.lowlevel.open_process(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    lines: list[str] = []
    errors: list[str] = []
    try:
        async with trio.open_nursery() as nursery:

            async def read_stderr() -> None:
                assert process.stderr is not None
                pending = b""
                async for chunk in process.stderr:
                    *done, pending = (pending + chunk).split(b"\n")
                    errors.extend(line.decode(errors="replace") for line in done)

            nursery.start_soon(read_stderr)
            assert process.stdout is not None
            pending = b""
            while not (kill_when_done and "done" in lines):
                chunk = await process.stdout.receive_some()
                if not chunk:
                    break  # it ended by itself
                pending += chunk
                *done, pending = pending.split(b"\n")
                lines.extend(line.decode() for line in done)
            if kill_when_done and "done" in lines:
                os.kill(json.loads(lines[0])["pid"], signal.SIGKILL)
            await process.wait()
            nursery.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            process.kill()
            with trio.move_on_after(5, shield=True):
                await process.wait()
    return Run(lines, errors, process.returncode)
