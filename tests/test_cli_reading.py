"""``callboard output``, ``tail`` and ``inspect`` as a person reads them, as real subprocesses.

The runtime and its gateway run in the test's process (so the test can
restart them and start jobs and sessions); the commands are separate
processes, and their exact output and exit codes are the contract.
"""

from __future__ import annotations

import json
import re
import subprocess

import trio
from child import Lines
from client_helpers import CALLBOARD, REPO, subprocess_env
from reading_helpers import job_event, serving_with, start_job
from scripted_model import ScriptedModel, hold, text
from shell_helpers import marked_processes, no_leaked_job_processes  # noqa: F401

from callboard.client import connect

WAIT_GO = "while [ ! -e go ]; do sleep 0.02; done; "
AT = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


async def cli(*args: str) -> tuple[int, str, str]:
    done = await trio.run_process(
        [*CALLBOARD, *args], cwd=REPO, env=subprocess_env(),
        capture_stdout=True, capture_stderr=True, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def open_cli(*args: str) -> trio.Process:
    return await trio.lowlevel.open_process(
        [*CALLBOARD, *args], cwd=REPO, env=subprocess_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


async def test_output_prints_what_a_job_wrote_and_follow_goes_on_until_it_ends(tmp_path):
    with trio.fail_after(60):
        async with serving_with(tmp_path / "data", job_output_interval=0.05) as server:
            assert server.rt is not None
            job = await start_job(
                server.rt, tmp_path, "counter/a", "printf 'one\\n'; " + WAIT_GO + "printf 'two\\n'"
            )
            address = f"job/{job.job_id}"
            async with connect(server.url) as client, client.subscribe(address) as events:
                while (await client.output(address)).text != "one\n":
                    await job_event(events, "job.output")
            so_far = await cli("output", address, "--url", server.url)
            as_json = await cli("output", job.job_id, "--json", "--url", server.url)
            follow = await open_cli("output", address, "--follow", "--url", server.url)
            try:
                assert follow.stdout is not None
                lines = Lines(follow.stdout)
                first = await lines.next()
                (tmp_path / "go").touch()
                second = await lines.next()
                followed = await follow.wait()
            finally:
                follow.kill()
            from_byte = await cli("output", address, "--after", "4", "--url", server.url)
            missing = await cli("output", "job/nope", "--url", server.url)
            bad_after = await cli("output", address, "--after", "x", "--url", server.url)
    assert so_far == (0, "one\n", "")
    assert (as_json[0], json.loads(as_json[1]), as_json[2]) == (
        0, {"text": "one\n", "next": 4, "running": True, "truncated": False, "capped": False}, ""
    )  # fmt: skip
    assert (first, second, followed) == ("one", "two", 0)
    assert from_byte == (0, "two\n", "")
    assert missing == (1, "", "callboard: there is no actor at 'job/nope'\n")
    assert bad_after[0] == 2
    assert bad_after[2].endswith(
        "callboard output: error: argument --after: must be a whole number >= 0, got 'x'\n"
    )


async def test_output_of_a_job_past_its_cap_says_on_stderr_that_the_rest_was_not_kept(tmp_path):
    (tmp_path / "big.txt").write_text("x" * 5000)
    with trio.fail_after(60):
        async with serving_with(tmp_path / "data", job_output_cap=4096) as server:
            assert server.rt is not None
            job = await start_job(server.rt, tmp_path, "counter/a", WAIT_GO + "cat big.txt")
            address = f"job/{job.job_id}"
            async with connect(server.url) as client, client.subscribe(address) as events:
                (tmp_path / "go").touch()
                await job_event(events, "job.finished")
            done = await cli("output", address, "--url", server.url)
    assert done == (
        0, "x" * 4096,
        f"callboard: {address} wrote more than its output cap; what came after byte 4096 "
        "was not kept\n",
    )  # fmt: skip


def session_spec(model: ScriptedModel, workspace, **extra) -> dict:
    return {"workspace": str(workspace), "base_url": model.base_url, "model": "test-model",
            **extra}  # fmt: skip


async def test_tail_renders_a_turn_for_people_marks_a_resumed_turn_and_ends_with_the_actor(
    tmp_path,
):
    with ScriptedModel([hold(), text("Hello there, friend")]) as model, trio.fail_after(60):
        async with serving_with(tmp_path / "data") as server:
            async with connect(server.url) as client:
                await client.spawn("session", session_spec(model, tmp_path), name="s1")
            tail = await open_cli("tail", "session/s1", "--after", "0", "--url", server.url)
            try:
                assert tail.stdout is not None
                lines = Lines(tail.stdout)
                async with connect(server.url) as client:
                    await client.send("session/s1", "prompt", {"text": "hi"})
                    await model.wait_for_requests(1)
                    before = [await lines.next() for _ in range(4)]
                # The host is stopped on purpose mid-turn: the next one resumes the turn,
                # and tail reconnects and goes on where it was.
                await server.restart()
                async with connect(server.url) as client:
                    after = [await lines.next() for _ in range(4)]
                    await client.stop("session/s1")
                    last = await lines.next()
                    code = await tail.wait()
                    rest = await tail.stdout.receive_some()
            finally:
                tail.kill()
    shown = [re.sub(AT, "AT", line) for line in [*before, *after, last]]
    assert shown == [
        "     1  AT  actor.started  {}",
        '     2  AT  queue.enqueued  {"id":"p1","text":"hi","position":0}',
        '     3  AT  queue.dequeued  {"id":"p1","turn_id":"turn-1"}',
        "> hi",
        "     5  AT  actor.started  {}",
        "[resumed after a restart: hi; the model's answer streams again]",
        "Hello there, friend",
        '     8  AT  turn.completed  {"turn_id":"turn-1","prompt_id":"p1",'
        '"answer":"Hello there, friend"}',
        '     9  AT  actor.stopped  {"status":"stopped"}',
    ], shown  # the whole of what tail printed, should a line ever come out of place
    assert (code, rest) == (0, b""), "tail ends by itself once the actor has stopped"


async def test_tail_of_an_actor_that_has_ended_exits_0_at_once_saying_so(tmp_path):
    with trio.fail_after(60):
        async with serving_with(tmp_path / "data") as server:
            async with connect(server.url) as client:
                await client.spawn("box", name="b1")
                await client.stop("box/b1")
            live = await cli("tail", "box/b1", "--url", server.url)
            replayed = await cli("tail", "box/b1", "--after", "0", "--json", "--url", server.url)
    assert live == (0, "", "callboard: box/b1 has ended; nothing more will come\n")
    code, out, err = replayed
    events = [json.loads(line) for line in out.splitlines()]
    assert (code, err) == (0, "")
    assert [(e["seq"], e["type"]) for e in events] == [(1, "actor.started"), (2, "actor.stopped")]


async def test_inspect_of_a_session_prints_its_conversation_last_turn_and_masked_spec(tmp_path):
    with ScriptedModel([text("Hello there")]) as model, trio.fail_after(60):
        url = model.base_url.replace("http://", "http://me:hunter2@")
        spec = {"workspace": str(tmp_path), "base_url": url, "model": "test-model"}
        async with serving_with(tmp_path / "data") as server:
            async with connect(server.url) as client:
                await client.spawn("session", spec, name="s1")
                async with client.subscribe("session/s1", after=0) as events:
                    await client.send("session/s1", "prompt", {"text": "hi"})
                    await job_event(events, "turn.completed")
            code, out, err = await cli("inspect", "session/s1", "--url", server.url)
    lines = out.splitlines()
    spec_lines = lines[lines.index("spec") + 1 : lines.index("state")]
    assert (code, err) == (0, "")
    assert lines[: lines.index("spec")] == [
        "actor         session/s1",
        "status        active",
        "mailbox       0",
        "cursor        1",
        "head          6",
        "restarts      0",
        "last_error    -",
        "conversation  2 items",
        "last_turn     > hi",
        "              Hello there (0 tool calls)",
        "usage         7 in, 5 out, 1 model calls, 0 tool calls, cost 0",
    ]
    assert f'    "base_url": "{model.base_url.replace("http://", "http://me:***@")}",' in spec_lines
    assert "hunter2" not in out
