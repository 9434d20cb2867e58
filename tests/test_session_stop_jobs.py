"""A stopped session stops its background jobs, and their ends go nowhere.

Against the real ``/bin/sh`` and a scripted model; the job's command waits for
a ``go`` file that never comes, so only the stop can end it.
"""

from __future__ import annotations

from pathlib import Path
from signal import SIGTERM

import trio
from scripted_model import ScriptedModel, text, tool_call
from session_helpers import ADDRESS, KINDS, NAME, Watch, spec
from shell_helpers import JOBS_DIR, marked_processes, no_leaked_job_processes  # noqa: F401

import callboard
from callboard.tools import is_same_process

WAIT_GO = "while [ ! -e go ]; do sleep 0.02; done; "


async def test_stopping_a_session_stops_its_running_job_without_a_dead_letter(tmp_path: Path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = [
        tool_call("shell_run", {"command": WAIT_GO + "echo never", "background": True}),
        text("it runs on"),
    ]
    settings = {"jobs_dir": str(tmp_path / JOBS_DIR)}
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(tmp_path / "data", kinds=KINDS, settings=settings) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                await rt.send(ADDRESS, "prompt", "start it")
                await Watch(sub).until("turn.completed")
            [job_id] = (await rt.inspect(ADDRESS)).state["jobs"]
            record = (await rt.inspect(ADDRESS)).state["jobs"][job_id]
            async with rt.subscribe(f"job/{job_id}", after=0) as job_sub:
                status = await rt.stop(ADDRESS)
                finished = await Watch(job_sub).until("job.finished")
            dead = await rt.dead_letters()
            view = await rt.inspect(ADDRESS)
    assert status == "stopped"
    assert (finished.data["status"], finished.data["exit_code"]) == ("exited", 128 + SIGTERM)
    assert not is_same_process(record["pid"], record["start_time"])
    assert view.state["jobs"][job_id]["stop_requested"] is True
    assert dead == [], "the job's end was sent to a session that takes no more messages"
    assert len(model.requests) == 2
