"""Background jobs of a task, against the real ``/bin/sh`` and a scripted model.

The job's command waits for a ``go`` file that the test creates, so the
test decides when it ends and nothing waits on a clock.
"""

from __future__ import annotations

import re
from signal import SIGTERM

import trio
from scripted_model import ScriptedModel, text, tool_call
from session_helpers import Watch
from shell_helpers import JOBS_DIR, marked_processes, no_leaked_job_processes  # noqa: F401
from task_helpers import kinds_in, spec

import callboard
from callboard.agent import Cancelled, Settled, Succeeded, Tasks
from callboard.tools import is_same_process

WAIT_GO = "while [ ! -e go ]; do sleep 0.02; done; "
JOB_ID = re.compile(r"\bjob ([0-9a-f]{12})\b")


async def test_a_task_whose_command_times_out_answers_after_the_jobs_completion(
    tmp_path, workspace
):
    script = [
        tool_call("shell_run", {"command": WAIT_GO + "echo done-late", "timeout": 0.2}),
        text("it runs on"),
        text("it printed done-late"),
    ]
    settings = {"jobs_dir": str(tmp_path / JOBS_DIR)}
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(
            tmp_path / "data", kinds=kinds_in(workspace), settings=settings
        ) as rt:
            tasks = Tasks(rt)
            handle = await tasks.spawn(spec(model))
            async with rt.subscribe(handle, after=0) as sub:
                watch = Watch(sub)
                await watch.until("turn.completed")
                unsettled = await tasks.terminal(handle)
                (workspace / "go").touch()
                outcome = await tasks.wait(handle, timeout=20)
                await watch.until("task.settled")
            view = await rt.inspect(handle)
    assert unsettled is None, "the task settled while its job was running"
    assert isinstance(outcome, Settled)
    assert outcome.record.terminal == Succeeded("it printed done-late")
    [job_id] = view.state["jobs"]
    [shell] = [e for e in watch.of("tool.finished") if e["name"] == "shell_run"]
    assert JOB_ID.findall(shell["result"]) == [job_id]
    assert shell["result"].startswith("The command was still running after 0.2s, so it keeps ")
    assert watch.of("job.ended") == [
        {"job_id": job_id, "status": "exited 0", "delivery": "new turn"}
    ]
    assert [e["turn_id"] for e in watch.of("turn.started")] == ["turn-1", "turn-2"]
    assert len(model.requests) == 3
    event = model.requests[2]["messages"][-1]
    assert event["role"] == "user"
    assert event["content"].startswith(f"[machine event] background job {job_id} finished")
    assert "done-late\n" in event["content"]
    assert view.state["machine_events"] == []
    assert view.state["jobs"][job_id]["status"] == "exited"


async def test_cancelling_a_task_stops_its_running_job(tmp_path, workspace):
    script = [
        tool_call("shell_run", {"command": WAIT_GO + "echo never", "background": True}),
        text("it runs on"),
    ]
    settings = {"jobs_dir": str(tmp_path / JOBS_DIR)}
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(
            tmp_path / "data", kinds=kinds_in(workspace), settings=settings
        ) as rt:
            tasks = Tasks(rt)
            handle = await tasks.spawn(spec(model))
            async with rt.subscribe(handle, after=0) as sub:
                await Watch(sub).until("turn.completed")
            [job_id] = (await rt.inspect(handle)).state["jobs"]
            record = (await rt.inspect(handle)).state["jobs"][job_id]
            async with rt.subscribe(f"job/{job_id}", after=0) as job_sub:
                terminal = await tasks.cancel(handle)
                finished = await Watch(job_sub).until("job.finished")
            dead = rt.dead_letters()
            view = await rt.inspect(handle)
    assert terminal == Cancelled()
    assert (finished.data["status"], finished.data["exit_code"]) == ("exited", 128 + SIGTERM)
    assert not is_same_process(record["pid"], record["start_time"])
    assert view.state["jobs"][job_id]["stop_requested"] is True
    assert dead == [], "the job's end was sent to a task that takes no more messages"
    assert len(model.requests) == 2
