"""Background jobs of a session, against the real ``/bin/sh`` and a scripted model.

A job's command waits for a ``go`` file in the workspace that the test
creates, so the test decides when it ends and nothing waits on a clock.
Each test checks exact results: what the tool answered, how many requests
the model got, which turn took a machine event.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any

import trio
from scripted_model import ScriptedModel, text, tool_call, tool_calls
from session_helpers import ADDRESS, KINDS, NAME, Watch, killed_at_exit, pid_from, spec
from shell_helpers import JOBS_DIR, marked_processes, no_leaked_job_processes  # noqa: F401

import callboard
from callboard.agent import INTERRUPTED_RESULT
from callboard.tools import is_same_process

WAIT_GO = "while [ ! -e go ]; do sleep 0.02; done; "
JOB_ID = re.compile(r"\bjob ([0-9a-f]{12})\b")


def background(command: str, **extra: Any) -> Any:
    return tool_call("shell_run", {"command": command, "background": True, **extra})


def job_ids(body: dict[str, Any]) -> list[str]:
    """The job ids in the last message of a request, in order."""
    return JOB_ID.findall(str(body["messages"][-1]["content"]))


def results(watch: Watch, name: str) -> list[tuple[str, str]]:
    """(status, result) of every finished call of the tool ``name``."""
    return [(e["status"], e["result"]) for e in watch.of("tool.finished") if e["name"] == name]


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def held(reply: Any) -> tuple[threading.Event, Any]:
    """A reply the model server sends only once the test sets the event."""
    released = threading.Event()

    def answer(body: dict[str, Any]) -> Any:
        released.wait(20)
        return reply

    return released, answer


async def test_a_slow_command_keeps_running_when_it_times_out_and_its_result_is_readable_afterwards(
    data, workspace, settings
):
    script = [
        tool_call("shell_run", {"command": WAIT_GO + "echo done-late", "timeout": 0.2}),
        text("it runs on"),
        lambda body: tool_call("job_output", {"job_id": job_ids(body)[0]}),
        text("it printed done-late"),
    ]
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS, settings=settings) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "install it")
                await watch.until("turn.completed")
                [(status, said)] = results(watch, "shell_run")
                [job_id] = JOB_ID.findall(said)
                assert status == "ok"
                assert said.startswith("The command was still running after 0.2s, so it keeps ")
                (workspace / "go").touch()
                await watch.until("turn.completed", 2)
    assert results(watch, "job_output") == [
        ("ok", f"job {job_id} has ended: exited 0.\nOutput, bytes 0 to 10:\ndone-late\n"
               "[next offset 10]"),
    ]  # fmt: skip
    assert len(model.requests) == 4
    event = model.requests[2]["messages"][-1]
    assert event["role"] == "user"
    assert event["content"].startswith(f"[machine event] background job {job_id} finished")
    assert watch.of("job.ended") == [
        {"job_id": job_id, "status": "exited 0", "delivery": "new turn"}
    ]


async def test_with_background_on_timeout_off_a_slow_command_is_stopped_and_no_job_is_left(
    data, workspace, settings
):
    script = [
        tool_call("shell_run", {"command": WAIT_GO + "echo late", "timeout": 0.2}),
        text("it was stopped"),
    ]
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS, settings=settings) as rt:
            await rt.spawn(
                "session", spec(model, workspace, background_on_timeout=False), name=NAME
            )
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "install it")
                await watch.until("turn.completed")
            view = await rt.inspect(ADDRESS)
    [(status, said)] = results(watch, "shell_run")
    assert status == "error"
    assert said.startswith("The command was stopped after 0.2s: it was still running")
    assert view.state["jobs"] == {}
    assert files_under(Path(settings["jobs_dir"])) == []


async def test_job_output_refuses_a_path_as_a_job_id(data, workspace, settings):
    script = [tool_call("job_output", {"job_id": "../../etc/passwd"}), text("refused")]
    with ScriptedModel(script) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS, settings=settings) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "read it")
                await watch.until("turn.completed")
    assert results(watch, "job_output") == [
        ("error", "error: job id '../../etc/passwd' is not valid: a job id is 1 to 64 "
                  "letters, digits, '_' or '-'; use an id that job_list shows"),
    ]  # fmt: skip


async def test_background_true_returns_at_once_and_the_job_can_be_read_and_stopped(
    data, workspace, settings
):
    script = [
        background(WAIT_GO + "echo never"),
        lambda body: tool_call("job_output", {"job_id": job_ids(body)[0]}),
        lambda body: tool_call("job_stop", {"job_id": job_ids(body)[0]}),
        lambda body: tool_calls([("job_output", {"job_id": job_ids(body)[0]}), ("job_list", {})]),
        text("stopped it"),
    ]
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS, settings=settings) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "start it")
                await watch.until("job.ended")
                view = await rt.inspect(ADDRESS)
                await watch.until("turn.completed")
    [job_id] = view.state["jobs"]
    record = view.state["jobs"][job_id]
    reads = results(watch, "job_output")
    assert reads[0] == (
        "ok", f"job {job_id} is running (pid {record['pid']}).\n(no new output from byte 0)"
    )  # fmt: skip
    assert results(watch, "job_stop") == [
        ("ok", f"Stopped job {job_id} (process group {record['pid']}).")
    ]
    assert "running" not in reads[1][1]
    [(_, listing)] = results(watch, "job_list")
    assert listing.startswith(f"1 background job:\n{job_id}  ")
    assert listing.endswith(f"  {WAIT_GO}echo never")
    assert watch.of("job.ended")[0]["delivery"] is None, "a stopped job wakes nobody"
    assert len(model.requests) == 5
    assert not is_same_process(record["pid"], record["start_time"])


async def test_a_job_started_by_one_session_cannot_be_seen_by_another(data, workspace, settings):
    known: dict[str, str] = {}
    owner_script = [background(WAIT_GO + "echo mine"), text("started"), text("it finished")]
    other_script = [
        lambda body: tool_calls([
            ("job_list", {}),
            ("job_output", {"job_id": known["id"]}),
            ("job_stop", {"job_id": known["id"]}),
        ]),
        text("nothing to see"),
    ]  # fmt: skip
    with (
        ScriptedModel(owner_script) as owner_model,
        ScriptedModel(other_script) as other_model,
        trio.fail_after(30),
    ):
        async with callboard.open_runtime(data, kinds=KINDS, settings=settings) as rt:
            await rt.spawn("session", spec(owner_model, workspace), name="owner")
            await rt.spawn("session", spec(other_model, workspace), name="other")
            async with (
                rt.subscribe("session/owner", after=0) as owner_sub,
                rt.subscribe("session/other", after=0) as other_sub,
            ):
                owner, other = Watch(owner_sub), Watch(other_sub)
                await rt.send("session/owner", "prompt", "start it")
                await owner.until("turn.completed")
                job = (await rt.inspect("session/owner")).state["jobs"]
                [known["id"]] = job
                record = job[known["id"]]
                await rt.send("session/other", "prompt", "find their job")
                await other.until("turn.completed")
                alive = is_same_process(record["pid"], record["start_time"])
                (workspace / "go").touch()
                await owner.until("turn.completed", 2)
    refusal = (
        f"error: there is no job {known['id']!r} among this session's jobs (a session sees "
        "only the jobs it started); job_list shows them"
    )
    assert results(other, "job_list") == [("ok", "No background jobs.")]
    assert results(other, "job_output") == [("error", refusal)]
    assert results(other, "job_stop") == [("error", refusal)]
    assert alive, "the other session's job_stop left the job running"
    assert other.of("job.ended") == []
    assert owner.of("job.ended") == [
        {"job_id": known["id"], "status": "exited 0", "delivery": "new turn"}
    ]


async def test_a_job_that_outlived_a_killed_runtime_reaches_its_owner_once_after_restart(
    data, workspace
):
    command = "echo run >> runs.txt; " + WAIT_GO + "echo finished"
    script = [background(command), text("started"), text("it finished")]
    with ScriptedModel(script) as model, trio.fail_after(60):
        async with killed_at_exit(data, spec(model, workspace), "start it") as child:
            await child.until_event("turn.completed")
        (workspace / "go").touch()
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await watch.until("turn.completed", 2)
            view = await rt.inspect(ADDRESS)
            [job_id] = view.state["jobs"]
            job = await rt.inspect(f"job/{job_id}")
    assert (workspace / "runs.txt").read_text() == "run\n", "the job's process started once"
    assert watch.of("job.ended") == [
        {"job_id": job_id, "status": "exited 0", "delivery": "new turn"}
    ]
    assert len(watch.of("turn.started")) == 2
    assert len(model.requests) == 3
    event = model.requests[2]["messages"][-1]["content"]
    assert event.count(f"[machine event] background job {job_id} finished (exited 0)") == 1
    assert "finished\n" in event
    assert job.status == "exited"
    assert view.state["machine_events"] == [] and view.state["jobs"][job_id]["status"] == "exited"


async def test_a_command_cut_off_by_a_killed_runtime_is_adopted_as_a_job_after_restart(
    data, workspace
):
    ready = workspace / "ready"
    os.mkfifo(ready)
    command = "echo run >> runs.txt; echo $$ > ready; " + WAIT_GO + "echo finished"
    script = [
        tool_call("shell_run", {"command": command, "timeout": 600}),
        text("it was cut off"),
        text("it finished after all"),
    ]
    with ScriptedModel(script) as model, trio.fail_after(60):
        async with killed_at_exit(data, spec(model, workspace), "run it") as child:
            pid = await pid_from(ready)
            await child.until_event("tool.started")
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await watch.until("turn.completed")
                adopted = watch.of("job.adopted")
                (workspace / "go").touch()
                await watch.until("turn.completed", 2)
            view = await rt.inspect(ADDRESS)
    [job_id] = view.state["jobs"]
    assert adopted == [{"job_id": job_id, "command": command}]
    assert view.state["jobs"][job_id]["pid"] == pid
    assert results(watch, "shell_run") == [("interrupted", INTERRUPTED_RESULT)]
    assert (workspace / "runs.txt").read_text() == "run\n", "the command was not run again"
    assert len(model.requests) == 3
    event = model.requests[2]["messages"][-1]["content"]
    assert event.startswith(f"[machine event] background job {job_id} finished (exited 0)")
    assert "finished\n" in event


async def test_a_session_without_a_model_in_its_spec_uses_the_runtimes_model_settings(
    data, workspace
):
    with ScriptedModel([text("hello")]) as model, trio.fail_after(20):
        settings = {"model_url": model.base_url, "model": "host-model"}
        async with callboard.open_runtime(data, kinds=KINDS, settings=settings) as rt:
            await rt.spawn("session", {"workspace": str(workspace)}, name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "hi")
                completed = await watch.until("turn.completed")
    assert completed.data["answer"] == "hello"
    assert [r["model"] for r in model.requests] == ["host-model"]


async def test_job_output_reads_on_from_an_offset_and_caps_each_read(data, workspace, settings):
    ready = workspace / "ready"
    os.mkfifo(ready)
    command = "head -c 20000 /dev/zero | tr '\\0' a; echo written > ready; " + WAIT_GO + "echo b"
    released = threading.Event()

    def first_read(body: dict[str, Any]) -> Any:
        released.wait(20)
        [known["id"]] = job_ids(body)
        return tool_call("job_output", {"job_id": known["id"]})

    script = [
        background(command),
        first_read,
        lambda body: tool_call("job_output", {"job_id": known["id"], "offset": 16384}),
        lambda body: tool_call("job_stop", {"job_id": known["id"]}),
        text("read it all"),
    ]
    known: dict[str, str] = {}
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS, settings=settings) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "print a lot")
                await trio.to_thread.run_sync(ready.read_text, abandon_on_cancel=True)
                released.set()
                await watch.until("turn.completed")
    job_id = known["id"]
    [(s1, first), (s2, second)] = results(watch, "job_output")
    assert (s1, s2) == ("ok", "ok")
    assert first.startswith(f"job {job_id} is running (pid ")
    assert first.endswith(
        "Output, bytes 0 to 16384:\n" + "a" * 16384 + "\n[more output: call job_output with "
        "offset 16384]"
    )
    assert second.endswith("Output, bytes 16384 to 20000:\n" + "a" * 3616 + "\n[next offset 20000]")
    assert len(model.requests) == 5
