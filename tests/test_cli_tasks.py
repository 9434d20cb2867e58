"""``callboard task list | show | wait | cancel`` as real subprocesses against the real gateway.

The tasks run in the test's process behind the gateway, on the scripted
model; the commands are separate processes, as a user runs them, and their
exact output and exit codes are the contract.
"""

from __future__ import annotations

import os
import subprocess

import trio
from child import Lines
from client_helpers import CALLBOARD, REPO, subprocess_env
from reading_helpers import job_event, serving_with, start_job
from scripted_model import ScriptedModel, hold, status, text
from shell_helpers import marked_processes, no_leaked_job_processes  # noqa: F401

from callboard import RunSpec
from callboard.client import connect

PROMPT = "write the note"


async def cli(*args: str) -> tuple[int, list[str], list[str]]:
    done = await trio.run_process(
        [*CALLBOARD, *args], cwd=REPO, env=subprocess_env(),
        capture_stdout=True, capture_stderr=True, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout.decode().splitlines(), done.stderr.decode().splitlines()


def spec(model: ScriptedModel, workspace, prompt: str = PROMPT) -> RunSpec:
    return RunSpec(prompt, base_url=model.base_url, model="test-model", approve="always",
                   workspace=str(workspace))  # fmt: skip


async def test_task_wait_exits_0_printing_the_result_or_1_naming_the_failure(tmp_path):
    replies = [text("the note is written"), status(401)]
    with ScriptedModel(replies) as model, trio.fail_after(60):
        async with serving_with(tmp_path / "data") as server, connect(server.url) as client:
            good = await client.tasks.spawn(spec(model, tmp_path), name="good")
            await client.tasks.wait(good)
            bad = await client.tasks.spawn(spec(model, tmp_path), name="bad")
            waited_good = await cli("task", "wait", "good", "--url", server.url)
            waited_bad = await cli("task", "wait", str(bad), "--url", server.url)
            as_json = await cli("task", "wait", "good", "--json", "--url", server.url)
    assert waited_good == (0, ["the note is written"], [])
    code, out, err = waited_bad
    assert (code, out) == (1, [])
    assert err == [
        f"callboard: task/bad failed: the model server at {model.base_url} requires an API key "
        "(HTTP 401) and none was sent: the key is missing; set CALLBOARD_API_KEY or "
        "OPENAI_API_KEY. The server said: scripted HTTP 401"
    ]
    assert as_json == (0, ['{"task":"task/good","status":"succeeded",'
                           '"result":"the note is written","error":null}'], [])  # fmt: skip


async def test_task_list_and_show_tell_each_tasks_status_and_what_it_did(tmp_path):
    with ScriptedModel([text("the note is written")]) as model, trio.fail_after(60):
        async with serving_with(tmp_path / "data") as server, connect(server.url) as client:
            handle = await client.tasks.spawn(spec(model, tmp_path), name="t1")
            await client.tasks.wait(handle)
            listed = await cli("task", "list", "--url", server.url)
            running_only = await cli("task", "list", "--status", "running", "--url", server.url)
            shown = await cli("task", "show", "t1", "--url", server.url)
            missing = await cli("task", "show", "nope", "--url", server.url)
    assert listed == (0, [
        "TASK     STATUS     TURNS  PROMPT",
        "task/t1  succeeded  1      write the note",
    ], [])  # fmt: skip
    assert running_only == (0, ["no running tasks"], [])
    assert shown == (0, [
        "> write the note",
        "the note is written",
        "=== succeeded ===",
        "the note is written",
    ], [])  # fmt: skip
    assert missing == (1, [], ["callboard: there is no actor at 'task/nope'"])


async def test_task_cancel_settles_a_running_task_and_show_follow_ends_with_it(tmp_path):
    with ScriptedModel([hold(), text("done")]) as model, trio.fail_after(60):
        async with serving_with(tmp_path / "data") as server, connect(server.url) as client:
            handle = await client.tasks.spawn(spec(model, tmp_path), name="held")
            await model.wait_for_requests(1)
            follow = await trio.lowlevel.open_process(
                [*CALLBOARD, "task", "show", "held", "--follow", "--url", server.url],
                cwd=REPO, env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
            try:
                assert follow.stdout is not None and follow.stderr is not None
                lines = Lines(follow.stdout)
                first = await lines.next()  # following: the prompt is shown
                cancelled = await cli("task", "cancel", "held", "--url", server.url)
                followed = await follow.wait()
                last = await lines.next()
                follow_err = (await follow.stderr.receive_some()).decode().splitlines()
            finally:
                follow.kill()
            again = await cli("task", "cancel", "held", "--url", server.url)
            waited = await cli("task", "wait", "held", "--url", server.url)
            done = await client.tasks.spawn(spec(model, tmp_path), name="done")
            await client.tasks.wait(done)
            too_late = await cli("task", "cancel", "done", "--url", server.url)
    assert str(handle) == "task/held"
    assert (first, last) == ("> write the note", "=== task/held was cancelled ===")
    assert cancelled == (0, ["task/held cancelled"], [])
    assert (followed, follow_err) == (1, ["callboard: task/held was cancelled"])
    assert again == (0, ["task/held cancelled"], [])
    assert waited == (1, [], ["callboard: task/held was cancelled"])
    assert too_late == (
        1,
        [],
        ["callboard: task/done had already settled succeeded; it was not cancelled"],
    )


async def test_the_repl_offers_the_task_verbs_and_output(tmp_path):
    with ScriptedModel([text("the note is written")]) as model, trio.fail_after(60):
        async with serving_with(tmp_path / "data") as server, connect(server.url) as client:
            assert server.rt is not None
            handle = await client.tasks.spawn(spec(model, tmp_path), name="t1")
            await client.tasks.wait(handle)
            job = await start_job(server.rt, tmp_path, "counter/a", "printf 'hello\\n'")
            async with client.subscribe(f"job/{job.job_id}", after=0) as events:
                await job_event(events, "job.finished")
            script = (f"task list\ntask wait t1\noutput {job.job_id}\ntask cancel t1\n"
                      "task list --json\n").encode()  # fmt: skip
            done = await trio.run_process(
                [*CALLBOARD, "repl", "--url", server.url], cwd=REPO, stdin=script,
                env=subprocess_env(CALLBOARD_HISTORY=os.devnull),
                capture_stdout=True, capture_stderr=True, check=False,
            )  # fmt: skip
    assert done.returncode == 1, "a command whose outcome was no success makes it 1"
    assert done.stdout.decode().splitlines() == [
        "TASK     STATUS     TURNS  PROMPT",
        "task/t1  succeeded  1      write the note",
        "the note is written",
        "hello",
        '{"tasks":[{"task":"task/t1","status":"succeeded","turns":1,"prompt":"write the note"}]}',
    ]
    assert done.stderr.decode().splitlines() == [
        "callboard: task/t1 had already settled succeeded; it was not cancelled"
    ]
