"""A runtime in a child process that starts a background job, then waits to be killed.

Usage: job_child.py DATA WORKSPACE COMMAND [sandbox]
With ``sandbox``, the job runs in a bubblewrap sandbox (which hides DATA)
and the runtime's settings carry it, as a server's would.
Prints "started JOB_ID PID START_TIME" once the job actor recorded the job.
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).parent))

from job_kinds import Inbox

import callboard
from callboard.jobs import Job, executor_from
from callboard.tools import Confinement, Sandbox, shell_run


async def main(data: str, workspace: str, command: str, *options: str) -> None:
    settings = {"sandbox": Sandbox()} if options == ("sandbox",) else {}
    async with callboard.open_runtime(data, kinds=[Job, Inbox], settings=settings) as rt:
        confinement = Confinement.from_settings(rt.settings)
        result = await shell_run(
            command, workspace=Path(workspace),
            executor=executor_from(None, confinement=confinement),
            jobs_root=Path(data) / "jobs", owner="inbox/o", timeout=10, background=True,
            output_cap=65536,
        )  # fmt: skip
        job = result.job
        assert job is not None
        ack = await rt.send(
            f"job/{job.job_id}", "watch",
            {"job_id": job.job_id, "command": job.command, "owner": "inbox/o", "pid": job.pid,
             "start_time": job.start_time, "directory": str(job.files.directory)},
            sender="inbox/o",  # as the owner that started it: only the owner may
        )  # fmt: skip
        await rt.wait_handled(f"job/{job.job_id}", ack.seq)
        print(f"started {job.job_id} {job.pid} {job.start_time}", flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:])
