"""A steer survives a SIGKILL and reaches the model exactly once.

The first life runs in a real child process (``steer_child.py``) that sends
the prompt and, once its turn has started, a steer; the test SIGKILLs it at
a named point and opens a second runtime on the same data directory. The
scripted model, in the test process, records what each life asked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from scripted_model import ScriptedModel, hold, text
from session_helpers import ADDRESS, KINDS, Child, Watch, occurrences, spec
from test_session_jobs import held

import callboard

PROMPT = "write the note"

STEER = "and keep it short"

CHILD = Path(__file__).with_name("steer_child.py")


@asynccontextmanager
async def steered_child(data: Path, session_spec: dict[str, Any]) -> AsyncIterator[Child]:
    """Run the first life until the block ends, then SIGKILL it and reap it."""
    command = [sys.executable, str(CHILD), str(data), json.dumps(session_spec), PROMPT, STEER]
    process = await trio.lowlevel.open_process(command, stdout=subprocess.PIPE)
    try:
        yield Child(process)
    finally:
        process.kill()
        with trio.move_on_after(10, shield=True):
            await process.wait()
            assert process.stdout is not None
            await process.stdout.aclose()


async def second_life(data: Path) -> Watch:
    """Open a runtime on ``data`` and read the session's events from the first,
    until its turn completes."""
    async with callboard.open_runtime(data, kinds=KINDS) as rt:
        async with rt.subscribe(ADDRESS, after=0) as sub:
            watch = Watch(sub)
            await watch.until("turn.completed")
    return watch


async def test_a_steer_recorded_before_a_sigkill_is_read_once_by_the_resumed_turn(data, workspace):
    with (
        ScriptedModel([hold(), text("short note written")]) as model,
        trio.fail_after(30),
    ):
        async with steered_child(data, spec(model, workspace)) as child:
            await child.until_event("steer.accepted")
            await model.wait_for_requests(1)
        assert child.process.returncode == -9
        watch = await second_life(data)
    types = watch.types()
    assert types.count("steer.accepted") == 1 and types.count("turn.steered") == 1
    assert types.index("turn.resumed") < types.index("turn.steered")
    assert watch.of("turn.completed")[0]["answer"] == "short note written"
    assert len(model.requests) == 2
    assert occurrences(model.requests[0], STEER) == 0
    again = model.requests[1]
    assert [m["role"] for m in again["messages"]] == ["system", "user", "user"]
    assert occurrences(again, PROMPT) == 1
    assert again["messages"][-1]["content"] == STEER


async def test_a_steer_taken_into_a_model_call_is_not_sent_again_after_a_sigkill(data, workspace):
    released, first = held(text("a first answer"))
    with (
        ScriptedModel([first, hold(), text("final answer")]) as model,
        trio.fail_after(30),
    ):
        async with steered_child(data, spec(model, workspace)) as child:
            await child.until_event("steer.accepted")
            released.set()
            await child.until_event("turn.steered")
            await model.wait_for_requests(2)
        assert child.process.returncode == -9
        watch = await second_life(data)
    types = watch.types()
    assert types.count("turn.steered") == 1 and types.count("turn.started") == 1
    assert watch.of("turn.completed")[0]["answer"] == "final answer"
    assert len(model.requests) == 3
    assert occurrences(model.requests[1], STEER) == 1
    after = model.requests[2]
    assert [m["role"] for m in after["messages"]] == ["system", "user", "assistant", "user"]
    assert occurrences(after, PROMPT) == 1
    assert occurrences(after, STEER) == 1
    assert after["messages"][2]["content"] == "a first answer"
