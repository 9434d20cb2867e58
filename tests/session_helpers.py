"""Shared by the session tests: the spec, fixtures, an event watcher and a killable child.

The fixtures stay in each test module (``data``, ``workspace``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from scripted_model import ScriptedModel, text, tool_call

import callboard
from callboard.agent import builtin_kinds

KINDS = list(builtin_kinds())

NAME = "s1"

ADDRESS = f"session/{NAME}"


def spec(model: ScriptedModel, workspace: Path, **overrides: Any) -> dict[str, Any]:
    """A session's spec for ``model``, with its provider when it is not openai's."""
    return {
        "workspace": str(workspace),
        "base_url": model.base_url,
        "model": "test-model",
        "approvals": "always",
        **model.provider_fields,
        **overrides,
    }


class Watch:
    """The events of one actor, read from a subscription as the test waits for them."""

    def __init__(self, sub: callboard.Subscription) -> None:
        self.sub = sub
        self.seen: list[callboard.Event] = []

    async def until(self, type: str, count: int = 1) -> callboard.Event:
        """Read on until the ``count``th event of ``type`` (counting those already read)."""
        while True:
            matching = [e for e in self.seen if e.type == type]
            if len(matching) >= count:
                return matching[count - 1]
            self.seen.append(await self.sub.__anext__())

    def types(self) -> list[str]:
        """Durable session events read so far (no lifecycle, no deltas)."""
        return [e.type for e in self.seen if e.seq is not None and not e.type.startswith("actor.")]

    def of(self, type: str) -> list[dict[str, Any]]:
        return [e.data for e in self.seen if e.type == type]


def occurrences(request: dict[str, Any], needle: str) -> int:
    return json.dumps(request["messages"], ensure_ascii=False).count(needle)


def gate() -> tuple[threading.Event, Callable[[dict[str, Any]], Any]]:
    """A reply the test releases: the server's thread waits for the event, then answers."""
    released = threading.Event()

    def reply(body: dict[str, Any]) -> Any:
        released.wait(20)
        return text("first done")

    return released, reply


WRITE_NOTE = tool_call("write_file", {"path": "note.txt", "content": "once"})


def slow_command(workspace: Path) -> tuple[Path, dict[str, str]]:
    """A shell call that counts its runs, says its pid through a FIFO, then sleeps."""
    fifo = workspace / "ready"
    os.mkfifo(fifo)
    command = "echo run >> runs.txt; echo $$ > ready; sleep 30; echo finished >> runs.txt"
    return fifo, {"command": command}


async def pid_from(fifo: Path) -> int:
    """The pid the command writes to ``fifo`` (blocks until it has run that far)."""
    return int(await trio.to_thread.run_sync(fifo.read_text, abandon_on_cancel=True))


CHILD = Path(__file__).with_name("session_child.py")


class Child:
    """A runtime in a child process (``session_child.py``) and the events it printed."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.events: list[str] = []
        self._partial = b""

    async def until_event(self, type: str) -> None:
        """Read the child's output until it printed a committed ``type`` event."""
        assert self.process.stdout is not None
        while type not in self.events:
            chunk = await self.process.stdout.receive_some()
            if not chunk:
                raise AssertionError(f"the child ended before {type}, after {self.events}")
            *lines, self._partial = (self._partial + chunk).split(b"\n")
            self.events += [line.decode()[6:] for line in lines if line.startswith(b"event ")]


@asynccontextmanager
async def killed_at_exit(data: Path, spec: dict[str, Any], prompt: str) -> AsyncIterator[Child]:
    """Run the child until the block ends, then SIGKILL it and reap it."""
    process = await trio.lowlevel.open_process(
        [sys.executable, str(CHILD), str(data), json.dumps(spec), prompt],
        stdout=subprocess.PIPE,
    )
    try:
        yield Child(process)
    finally:
        process.kill()
        with trio.move_on_after(10, shield=True):
            await process.wait()
            assert process.stdout is not None
            await process.stdout.aclose()
