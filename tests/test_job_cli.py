"""``callboard jobs [OWNER]`` over the real gateway, with real jobs under ``/bin/sh``.

The verb runs in-process against the gateway (the command line loads it once
``_jobs`` is among the CLI's modules); ``stop job/ID`` is the gateway's stop.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import trio
from client_helpers import serving
from shell_helpers import JOBS_DIR, marked_processes, no_leaked_job_processes  # noqa: F401

import callboard
from callboard.cli._jobs import JOBS
from callboard.cli._verbs import Output
from callboard.client import connect
from callboard.tools import JobHandle, LocalExecutor, is_same_process, shell_run

WAIT_GO = "while [ ! -e go ]; do sleep 0.02; done; "


async def start_job(rt: callboard.Runtime, root: Path, owner: str, command: str) -> JobHandle:
    """A background job of ``owner`` that a ``job`` actor watches (as a session starts one)."""
    result = await shell_run(
        command, workspace=root, executor=LocalExecutor(), jobs_root=root / JOBS_DIR,
        owner=owner, timeout=10, background=True, output_cap=4096,
    )  # fmt: skip
    job = result.job
    assert job is not None
    ack = await rt.send(
        f"job/{job.job_id}", "watch",
        {"job_id": job.job_id, "command": job.command, "owner": owner, "pid": job.pid,
         "start_time": job.start_time, "directory": str(job.files.directory)},
        sender=owner,  # as the owner that started it: only the owner may
    )  # fmt: skip
    await rt.wait_handled(f"job/{job.job_id}", ack.seq)
    return job


async def jobs_lines(url: str, owner: str | None, *, json: bool = False) -> list[str]:
    lines: list[str] = []
    async with connect(url) as client:
        await JOBS.run(client, argparse.Namespace(owner=owner), Output(lines.append, json=json))
    return lines


def columns(line: str) -> list[str]:
    return re.split(r"\s{2,}", line)


async def test_jobs_lists_one_owners_jobs_with_status_age_and_command_and_stop_ends_one(tmp_path):
    with trio.fail_after(30):
        async with serving(tmp_path / "data") as server:
            rt = server.rt
            assert rt is not None
            failed = await start_job(rt, tmp_path, "counter/a", "exit 3")
            async with rt.subscribe(f"job/{failed.job_id}", after=0) as events:
                async for event in events:
                    if event.type == "job.finished":
                        break
            running = await start_job(rt, tmp_path, "counter/a", WAIT_GO + "echo a")
            other = await start_job(rt, tmp_path, "counter/b", WAIT_GO + "echo b")
            mine = await jobs_lines(server.url, "counter/a")
            everyone = await jobs_lines(server.url, None)
            nobody = await jobs_lines(server.url, "counter/zz")
            async with connect(server.url) as client:
                stopped = await client.stop(f"job/{running.job_id}")
            after_stop = await jobs_lines(server.url, "counter/a", json=True)
            left = sorted(p.name for p in running.files.directory.iterdir())
            alive = is_same_process(running.pid, running.start_time or 0)
            other_alive = is_same_process(other.pid, other.start_time or 0)
            async with connect(server.url) as client:
                await client.stop(f"job/{other.job_id}")
    assert columns(mine[0]) == ["JOB", "OWNER", "STATUS", "AGE", "COMMAND"]
    rows = [columns(line) for line in mine[1:]]
    assert [(r[0], r[1], r[2], r[4]) for r in rows] == [
        (running.job_id, "counter/a", "running", WAIT_GO + "echo a"),
        (failed.job_id, "counter/a", "exited 3", "exit 3"),
    ]
    assert all(re.fullmatch(r"\d+s", r[3]) for r in rows)
    assert len(everyone) == 4 and other.job_id in everyone[1]
    assert nobody == ["no jobs of counter/zz"]
    assert stopped == "stopped"
    assert not alive, "stop job/ID ended the job's process group"
    assert other_alive, "stopping one job left the other running"
    assert '"status":"stopped"' in after_stop[0] and running.job_id in after_stop[0]
    assert [name for name in left if name.startswith(running.job_id)] == []
