"""A session behind a real `callboard serve` process that is SIGKILLed mid tool round
(the model is answering the tool's result), then started again on the same data
directory and port: the turn goes on where its last commit left it, and a
client's subscription, which reconnects by itself, sees the rest of it; over
both model wires (``serve --provider``)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio
from credentials import TEST_TOKEN
from scripted_model import ScriptedModel, hold, text, tool_call
from serve_helpers import read_line
from session_helpers import occurrences
from wires import WIRES

import callboard
from callboard.client import Backoff, connect

LINE = re.compile(
    r"^callboard serving (ws://127\.0\.0\.1:(\d+)/v1) with data in (\S+?)(?:, console at \S+)?$"
)
FAST = Backoff(first=0.01, cap=0.1)
PROMPT = "log one run in log.txt"
# A second run of this edit would leave "ran" twice in the file.
EDIT = tool_call("edit_file", {"path": "log.txt", "old": "end", "new": "ran\nend"})

pytestmark = pytest.mark.parametrize("wire", WIRES)


@attrs.frozen
class Serving:
    process: trio.Process
    url: str
    port: int


@asynccontextmanager
async def serving(data: Path, port: int, model: ScriptedModel) -> AsyncIterator[Serving]:
    """`callboard serve` in a child process until the block ends (then killed and reaped).

    Its log goes to the test's stderr, which pytest shows when the test fails.
    """
    command = [sys.executable, "-m", "callboard", "serve", "--data", str(data),
               "--port", str(port), "--model-url", model.base_url, "--model", "m",
               "--provider", model.wire, "--workspace-root", str(data.parent)]  # fmt: skip
    # The token the client finds in the environment (conftest) is the server's too.
    env = {**os.environ, "CALLBOARD_TOKEN": TEST_TOKEN}
    process = await trio.lowlevel.open_process(command, stdout=subprocess.PIPE, env=env)
    try:
        assert process.stdout is not None
        line = await read_line(process.stdout)
        match = LINE.match(line)
        assert match is not None, line
        assert match.group(3) == str(data)
        yield Serving(process, match.group(1), int(match.group(2)))
    finally:
        if process.returncode is None:
            process.kill()
        with trio.move_on_after(5, shield=True):
            await process.wait()
            assert process.stdout is not None
            await process.stdout.aclose()


async def test_sigkill_of_serve_mid_tool_round_continues_the_turn_for_a_reconnecting_subscriber(
    tmp_path, wire
):
    data = tmp_path / "data"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "log.txt").write_text("end\n")
    seen: list[callboard.Event] = []
    completed = trio.Event()

    async def read(events: callboard.client.EventStream) -> None:
        async for event in events:
            seen.append(event)
            if event.type == "turn.completed":
                completed.set()
                return

    script = [EDIT, hold(), text("logged")]
    with ScriptedModel(script, wire=wire) as model, trio.fail_after(40):
        async with serving(data, 0, model) as first:
            async with connect(first.url, reconnect=FAST) as client:
                spawned = await client.spawn(
                    "session", {"workspace": str(workspace), "approvals": "always"}, name="s1"
                )
                async with client.subscribe("session/s1", after=0) as events:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(read, events)
                        await client.send("session/s1", "prompt", {"text": PROMPT})
                        # The second request answers the tool's result; it is held.
                        await model.wait_for_requests(2)
                        first.process.kill()
                        assert await first.process.wait() == -signal.SIGKILL
                        await model.wait_for_disconnects(1)
                        async with serving(data, first.port, model):
                            await completed.wait()
                            resumes = events.statistics().resumes
    assert (spawned, spawned.existed) == ("session/s1", False)
    durable = [e for e in seen if e.seq is not None]
    assert [e.seq for e in durable] == list(range(1, len(durable) + 1))
    assert [e.type for e in durable] == [
        "actor.started",
        "queue.enqueued",
        "queue.dequeued",
        "turn.started",
        "assistant.message",
        "tool.started",
        "tool.finished",
        "actor.started",
        "turn.resumed",
        "assistant.message",
        "turn.completed",
    ]
    resumed = next(e for e in durable if e.type == "turn.resumed")
    assert resumed.data == {"turn_id": "turn-1", "prompt_id": "p1", "prompt": PROMPT}
    assert durable[-1].data["answer"] == "logged"
    assert resumes == 1
    assert (workspace / "log.txt").read_text() == "ran\nend\n"
    assert len(model.requests) == 3
    last = model.chat_requests[2]
    assert occurrences(last, PROMPT) == 1
    assert [m["role"] for m in last["messages"]] == ["system", "user", "assistant", "tool"]
    assert last["messages"][-1]["content"] == model.chat_requests[1]["messages"][-1]["content"]
