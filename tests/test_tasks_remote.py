"""Tasks through a server: `RemoteTasks` (``client.tasks``) and ``callboard task run``.

`RemoteTasks` runs against the real gateway and runtime in this process
(`client_helpers.Server`, loopback port 0, a ``tmp_path`` data directory);
``callboard task run`` runs as a real subprocess against a real
``callboard serve`` subprocess. The model is the scripted loopback endpoint
in every test, and its requests are counted exactly.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from client_helpers import serving, subprocess_env
from scripted_model import ScriptedModel, hold, status, text, tool_call
from task_helpers import MESSAGE, PROMPT, occurrences, spec

from callboard import ActorStopped
from callboard.agent import Cancelled, Settled, Succeeded, WaitOutcome, WaitTimedOut
from callboard.cli import _MODULES
from callboard.client import RemoteTasks, connect

LINE = re.compile(r"^callboard serving (ws://127\.0\.0\.1:\d+/v1) with data in ")

# Until ``_task`` is in ``callboard.cli._MODULES``, the command runs through its own module.
_SHIM = (
    "import argparse, sys\n"
    "from callboard.cli import _task\n"
    "parser = argparse.ArgumentParser(prog='callboard')\n"
    "_task.add_parsers(parser.add_subparsers(dest='command'))\n"
    "args = parser.parse_args()\n"
    "sys.exit(args.func(args))\n"
)
CALLBOARD = (
    [sys.executable, "-m", "callboard"] if "_task" in _MODULES else [sys.executable, "-c", _SHIM]
)


def settled(outcome: WaitOutcome) -> Any:
    assert isinstance(outcome, Settled), outcome
    return outcome.record


def env() -> dict[str, str]:
    environment = subprocess_env()
    environment.pop("CALLBOARD_MODEL_URL", None)
    environment.pop("CALLBOARD_MODEL", None)
    return environment


# -- RemoteTasks against the in-process server ----------------------------------------


async def test_a_remote_task_settles_succeeded_with_the_models_text(tmp_path, workspace):
    with ScriptedModel([text("the note is written")]) as model, trio.fail_after(20):
        async with serving(tmp_path / "data") as server, connect(server.url) as client:
            tasks = client.tasks
            handle = await tasks.spawn(spec(model, workspace=str(workspace)))
            record = settled(await tasks.wait(handle, timeout=10))
            terminal = await tasks.terminal(handle)
            attached = await tasks.is_attached(handle)
    assert isinstance(tasks, RemoteTasks) and client.tasks is tasks
    assert str(handle).startswith("task/")
    assert (record.handle, record.status) == (str(handle), "succeeded")
    assert record.terminal == terminal == Succeeded("the note is written")
    assert (record.result, attached) == ("the note is written", False)
    assert len(model.requests) == 1
    assert occurrences(model.requests[0], PROMPT) == 1


async def test_a_remote_message_gets_its_reply_through_wait_message(tmp_path, workspace):
    released = threading.Event()

    def first(body: dict[str, Any]) -> Any:
        released.wait(20)
        return text("ready")

    with ScriptedModel([first, text("the reply")]) as model, trio.fail_after(20):
        async with serving(tmp_path / "data") as server, connect(server.url) as client:
            tasks = client.tasks
            handle = await tasks.spawn(spec(model, workspace=str(workspace)))
            async with client.subscribe(handle, after=0) as events:
                message_id = await tasks.send(handle, MESSAGE)
                async for event in events:
                    if event.type == "message.queued":
                        break
            released.set()
            reply = settled(await tasks.wait_message(handle, message_id, timeout=10))
            record = settled(await tasks.wait(handle, timeout=10))
            again = settled(await tasks.wait_message(handle, message_id, timeout=10))
    assert re.fullmatch(r"msg-\d+", message_id)
    assert (reply.message_id, reply.result) == (message_id, "the reply")
    assert again == reply
    assert record.terminal == Succeeded("the reply")
    assert len(model.requests) == 2
    assert [occurrences(r, MESSAGE) for r in model.requests] == [0, 1]
    assert [occurrences(r, PROMPT) for r in model.requests] == [1, 1]


async def test_a_remote_cancel_settles_cancelled_and_closes_the_model_stream(tmp_path, workspace):
    with ScriptedModel([hold(first_delta="Hel")]) as model, trio.fail_after(20):
        async with serving(tmp_path / "data") as server, connect(server.url) as client:
            tasks = client.tasks
            handle = await tasks.spawn(spec(model, workspace=str(workspace)))
            await model.wait_for_requests(1)
            message_id = await tasks.send(handle, MESSAGE)
            cancelled = await tasks.cancel(handle)
            record = settled(await tasks.wait(handle, timeout=10))
            unanswered = settled(await tasks.wait_message(handle, message_id, timeout=10))
            await model.wait_for_disconnects(1)
            again = await tasks.cancel(handle)
            with pytest.raises(ActorStopped, match=r"has settled \(cancelled\)"):
                await tasks.send(handle, MESSAGE)
    assert (cancelled, again) == (Cancelled(), Cancelled())
    assert (record.status, record.terminal) == ("cancelled", Cancelled())
    assert (unanswered.result, unanswered.terminal) == (None, Cancelled())
    assert len(model.requests) == 1


async def test_a_remote_wait_that_times_out_says_the_server_still_drives_the_task(
    tmp_path, workspace
):
    with ScriptedModel([hold()]) as model, trio.fail_after(20):
        async with serving(tmp_path / "data") as server, connect(server.url) as client:
            tasks = client.tasks
            handle = await tasks.spawn(spec(model, workspace=str(workspace)))
            await model.wait_for_requests(1)
            outcome = await tasks.wait(handle, timeout=0.05)
            terminal = await tasks.terminal(handle)
            await tasks.cancel(handle)
    assert outcome == WaitTimedOut(attached=True)
    assert terminal is None


# -- callboard task run against callboard serve -------------------------------------------


@asynccontextmanager
async def callboard_serve(tmp_path: Path, model: ScriptedModel, workspace: Path
                          ) -> AsyncIterator[str]:  # fmt: skip
    """A real ``callboard serve`` on port 0 with the scripted model; yields its URL."""
    command = [sys.executable, "-m", "callboard", "serve", "--port", "0",
               "--data", str(tmp_path / "data"), "--workspace", str(workspace),
               "--model-url", model.base_url, "--model", "test-model"]  # fmt: skip
    with (tmp_path / "serve.log").open("wb") as log:
        process = await trio.lowlevel.open_process(
            command, stdout=subprocess.PIPE, stderr=log, env=env(), cwd=tmp_path
        )
        try:
            assert process.stdout is not None
            line = b""
            while not line.endswith(b"\n"):
                chunk = await process.stdout.receive_some(1)
                assert chunk, f"callboard serve ended after {line!r}"
                line += chunk
            match = LINE.match(line.decode())
            assert match is not None, line
            yield match.group(1)
        finally:
            process.kill()
            with trio.move_on_after(5, shield=True):
                await process.wait()
                await process.stdout.aclose()  # type: ignore[union-attr]


async def task_run(url: str, *extra: str) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        [*CALLBOARD, "task", "run", PROMPT, "--url", url, *extra],
        capture_stdout=True, capture_stderr=True, check=False, env=env(),
    )  # fmt: skip


async def test_task_run_streams_the_result_and_exits_0_when_the_task_succeeds(tmp_path, workspace):
    with ScriptedModel([text("the note is written")]) as model, trio.fail_after(60):
        async with callboard_serve(tmp_path, model, workspace) as url:
            done = await task_run(url, "--approve", "always", "--deadline", "60")
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, stderr
    assert stdout.endswith("=== succeeded ===\nthe note is written\n")
    assert stdout.count("the note is written") == 2  # as streamed, then as the result
    assert stdout.startswith(f"> {PROMPT}\n")
    assert re.fullmatch(r"callboard: task/\S+ spawned\n", stderr)
    assert len(model.requests) == 1
    assert model.requests[0]["model"] == "test-model"


async def test_task_run_exits_1_saying_the_task_failed_when_the_model_refuses_with_401(
    tmp_path, workspace
):
    with ScriptedModel([status(401)]) as model, trio.fail_after(60):
        async with callboard_serve(tmp_path, model, workspace) as url:
            done = await task_run(url, "--approve", "never")
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 1, stderr
    assert "=== succeeded ===" not in stdout
    assert re.search(r"^callboard: task/\S+ failed: .*401", stderr, re.MULTILINE), stderr
    assert len(model.requests) == 1


async def test_task_run_exits_3_when_the_server_cannot_be_reached(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed when the block ends: nothing listens there
    with trio.fail_after(30):
        done = await task_run(f"ws://127.0.0.1:{port}/v1", "--model", "m")
    assert done.returncode == 3
    assert done.stdout == b""
    assert done.stderr.decode().startswith("callboard: ")


async def test_task_run_streams_an_approval_request_and_goes_on_once_it_is_answered(
    tmp_path, workspace
):
    write = tool_call("write_file", {"path": "note.txt", "content": "hi"})
    with ScriptedModel([write, text("the note is written")]) as model, trio.fail_after(60):
        async with callboard_serve(tmp_path, model, workspace) as url:
            command = [*CALLBOARD, "task", "run", PROMPT, "--url", url, "--approve", "ask"]
            process = await trio.lowlevel.open_process(
                command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env()
            )
            try:
                assert process.stdout is not None
                shown = b""
                while b"[approval]" not in shown or not shown.endswith(b"\n"):
                    chunk = await process.stdout.receive_some()
                    assert chunk, f"task run ended before asking: {shown!r}"
                    shown += chunk
                handle = re.search(rb"callboard approve (task/\S+) ", shown)
                assert handle is not None, shown
                async with connect(url) as client:
                    await client.tasks.approve(handle.group(1).decode())
                async for chunk in process.stdout:
                    shown += chunk
                code = await process.wait()
            finally:
                process.kill()
                with trio.move_on_after(5, shield=True):
                    await process.wait()
                    await process.stdout.aclose()  # type: ignore[union-attr]
    assert code == 0
    lines = shown.decode().splitlines()
    assert lines[0] == f"> {PROMPT}"
    assert lines[1].startswith('[approval] write_file({"path": "note.txt", "content": "hi"}) waits')
    assert lines[-4:] == [
        "[tool] write_file ok: created 'note.txt': 2 bytes",
        "the note is written",
        "=== succeeded ===",
        "the note is written",
    ]
    assert (workspace / "note.txt").read_text() == "hi"
    assert len(model.requests) == 2


async def test_task_run_exits_2_naming_the_field_for_a_spec_the_task_kind_refuses(tmp_path):
    with trio.fail_after(30):
        done = await task_run("ws://127.0.0.1:1/v1", "--deadline", "0")
    assert done.returncode == 2
    assert done.stdout == b""
    assert done.stderr == b"callboard: 'deadline' must be positive, got 0.0 seconds\n"
