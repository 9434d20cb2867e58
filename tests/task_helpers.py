"""Shared by the task tests: the spec, exact counting in requests, and the killable first life.

A crash test runs the first life of a task in ``task_child.py``, a real
child process, and SIGKILLs it while its model request is held by the
scripted endpoint: exactly where a process dying mid-turn leaves it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import trio
from scripted_model import ScriptedModel

import callboard
from callboard.agent import RunSpec, Task, builtin_kinds

KINDS = [Task]


def kinds_in(workspace: Any) -> tuple[type[callboard.Actor], ...]:
    """The agent's kinds, with tasks working in ``workspace`` by default."""
    return builtin_kinds({"workspace": workspace})


PROMPT = "write the note"

MESSAGE = "now write the note"


def spec(model: ScriptedModel, **overrides: Any) -> RunSpec:
    """A task on the scripted model; the workspace is the runtime's."""
    options: dict[str, Any] = {
        "base_url": model.base_url,
        "model": "test-model",
        "deadline": timedelta(minutes=2),
        "approve": "always",
        **model.provider_fields,
        **overrides,
    }
    return RunSpec(PROMPT, **options)


def occurrences(request: dict[str, Any], text: str) -> int:
    """How many messages of a model request say exactly ``text`` (the prompt is a
    substring of the message, so substrings are not counted)."""
    return sum(1 for m in request["messages"] if m.get("content") == text)


async def events_of(rt: callboard.Runtime, handle: str, until: str) -> list[str]:
    """Every durable event type of ``handle`` from the first, up to ``until`` inclusive."""
    types: list[str] = []
    async with rt.subscribe(handle, after=0) as sub:
        async for event in sub:
            if event.seq is not None:
                types.append(event.type)
                if event.type == until:
                    return types
    raise AssertionError(f"the events of {handle} ended before {until}: {types}")


@attrs.define
class FirstLife:
    """What the killed first life left: the task's handle and the message id it sent."""

    process: trio.Process
    handle: str = ""
    message_id: str = ""


CHILD = Path(__file__).with_name("task_child.py")


@asynccontextmanager
async def first_life(
    data: Path,
    workspace: Path,
    model: ScriptedModel,
    message: str | None = None,
    **spec_fields: Any,
) -> AsyncIterator[FirstLife]:
    """Run the first life until it has spawned its task; SIGKILL it when the block ends.

    ``spec_fields`` go into the task's `RunSpec` as they are (JSON values)."""
    setup = {
        "data": str(data), "workspace": str(workspace), "model_url": model.base_url,
        "prompt": PROMPT, "message": message, "provider": model.provider_fields.get("provider"),
        "spec": spec_fields,
    }  # fmt: skip
    process = await trio.lowlevel.open_process(
        [sys.executable, str(CHILD), json.dumps(setup)], stdout=subprocess.PIPE
    )
    life = FirstLife(process)
    try:
        assert process.stdout is not None
        output = b""
        while b"\n" not in output:
            chunk = await process.stdout.receive_some()
            if not chunk:
                raise AssertionError(f"the first life ended before spawning: {output!r}")
            output += chunk
        line = output.split(b"\n", 1)[0].decode()
        assert line.startswith("SPAWNED "), line
        _, life.handle, life.message_id = (line + " ").split(" ", 2)
        life.message_id = life.message_id.strip()
        yield life
    finally:
        process.kill()
        with trio.move_on_after(10, shield=True):
            await process.wait()
            assert process.stdout is not None
            await process.stdout.aclose()
