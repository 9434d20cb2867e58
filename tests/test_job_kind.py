"""The job kind: completion reaches the owner once, even across a SIGKILL of the runtime."""

from __future__ import annotations

import os
from pathlib import Path

import trio
from child import Child
from job_kinds import Inbox

import callboard
from callboard.jobs import Job, fence, machine_event_text
from callboard.tools import LocalExecutor, is_same_process, process_start_time, shell_run

KINDS = [Job, Inbox]


async def _owner_got(rt: callboard.Runtime, count: int) -> list[dict]:
    async with rt.subscribe("inbox/o", after=0) as events:
        seen = 0
        async for event in events:
            seen += event.type == "got"
            if seen == count:
                break
    return (await rt.inspect("inbox/o")).state["got"]


async def _watch(rt, job, owner="inbox/o"):
    return await rt.send(
        f"job/{job.job_id}", "watch",
        {"job_id": job.job_id, "command": job.command, "owner": owner, "pid": job.pid,
         "start_time": job.start_time, "directory": str(job.files.directory)},
        sender=owner,  # as the owner that started it: only the owner may
    )  # fmt: skip


async def test_a_finished_job_sends_its_owner_one_machine_event_and_leaves_no_file(tmp_path):
    jobs = tmp_path / "jobs"
    with trio.fail_after(30):
        async with callboard.open_runtime(tmp_path / "data", kinds=KINDS) as rt:
            result = await shell_run(
                "echo 'it ``` ran'; exit 3", workspace=tmp_path, executor=LocalExecutor(),
                jobs_root=jobs, owner="inbox/o", timeout=10, background=True, output_cap=4096,
            )  # fmt: skip
            assert result.job is not None
            await _watch(rt, result.job)
            [got] = await _owner_got(rt, 1)
            view = await rt.inspect(f"job/{result.job.job_id}")
    assert got["type"] == "job.finished"
    body = got["body"]
    assert (body["status"], body["exit_code"], body["tail"]) == ("exited", 3, "it ``` ran\n")
    assert body["text"].startswith(f"[machine event] background job {result.job.job_id} finished")
    assert "\n````\nit ``` ran\n\n````" in body["text"]
    assert view.status == "exited" and view.state["exit_code"] == 3
    assert [p for p in jobs.rglob("*") if p.is_file()] == []


async def test_a_job_that_outlived_a_killed_runtime_completes_exactly_once_after_restart(tmp_path):
    data, ran, go = tmp_path / "data", tmp_path / "ran.txt", tmp_path / "go"
    command = f"echo run >> {ran}; while [ ! -e {go} ]; do sleep 0.02; done; echo finished"
    with trio.fail_after(60):
        child = await Child.start(
            [str(data), str(tmp_path), command], script=Path(__file__).parent / "job_child.py"
        )
        try:
            line = await child.readline()
        finally:
            await child.kill()
        assert line is not None and line.startswith("started "), child.lines
        _, job_id, pid, start_time = line.split()
        assert is_same_process(int(pid), int(start_time)), "the job outlived its runtime"
        go.touch()
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            [got] = await _owner_got(rt, 1)
            view = await rt.inspect(f"job/{job_id}")
            await trio.testing.wait_all_tasks_blocked()
            again = (await rt.inspect("inbox/o")).state["got"]
    assert got["body"]["status"] == "exited" and got["body"]["tail"] == "finished\n"
    assert len(again) == 1
    assert ran.read_text() == "run\n", "the job's process was started once"
    assert view.status == "exited"


async def test_a_reused_pid_is_not_mistaken_for_the_job_and_the_job_is_reported_lost(tmp_path):
    directory = tmp_path / "jobs" / "inbox_o"
    directory.mkdir(parents=True)
    with trio.fail_after(30):
        async with callboard.open_runtime(tmp_path / "data", kinds=KINDS) as rt:
            # Our own pid is alive, but it is not the process that started at time 1.
            assert process_start_time(os.getpid()) != 1
            await rt.send(
                "job/ghost", "watch",
                {"job_id": "ghost", "command": "sleep 100", "owner": "inbox/o",
                 "pid": os.getpid(), "start_time": 1, "directory": str(directory)},
                sender="inbox/o",
            )  # fmt: skip
            [got] = await _owner_got(rt, 1)
    assert got["body"]["status"] == "lost"
    assert got["body"]["reason"].startswith("the process is gone and left no exit status")


def test_a_fence_is_longer_than_any_run_of_backticks_in_the_output():
    assert fence("a ``````` b") == "````````\na ``````` b\n````````"
    assert fence("plain") == "```\nplain\n```"
    text = machine_event_text("j1", "make", "exited", 0, "")
    assert text.splitlines()[0].startswith("[machine event] background job j1 finished (exited 0)")


async def test_a_watch_from_anyone_but_the_owner_it_names_is_refused_and_starts_nothing(
    tmp_path,
):
    # A client's message has no sender: it could otherwise name any pid to
    # signal and any file to read as the server.
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path / "data", kinds=KINDS) as rt:
            async with rt.subscribe("job/forged", after=0) as events:
                await rt.send(
                    "job/forged", "watch",
                    {"job_id": "forged", "command": "x", "owner": "inbox/o", "pid": os.getpid(),
                     "start_time": process_start_time(os.getpid()), "directory": str(tmp_path)},
                )  # fmt: skip
                async for event in events:
                    if event.type == "job.refused":
                        break
            view = await rt.inspect("job/forged")
    assert event.data == {"from": None, "reason": "only the owner that started a job may watch it"}
    assert view.state["status"] == "new"
