"""``callboard jobs [OWNER]``: the background jobs, with status, age and command.

A job is a ``job/ID`` actor (``callboard.jobs``); its snapshot holds the
command, the owner, the status and when it started. This lists them over the
gateway (one ``list``, then one ``inspect`` per job), newest first, for one
owner (``session/NAME`` or ``task/NAME``) or for all. ``callboard stop job/ID``
stops one: the job actor stops the process group and records the end.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from ..client import Client
from ..errors import UnknownActor
from ._commands import add_common, run_command
from ._verbs import Output, Verb, address_argument, table

__all__ = ["JOBS", "add_parsers", "job_rows", "list_jobs"]


def _jobs_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("owner", metavar="OWNER", nargs="?", default=None, type=address_argument,
                   help="only the jobs of this session or task, e.g. session/s1")  # fmt: skip


async def list_jobs(client: Client, owner: str | None = None) -> list[dict[str, Any]]:
    """Every job (of ``owner``): its id, owner, status, exit code, start time and command."""
    jobs: list[dict[str, Any]] = []
    for info in await client.list("job"):
        try:
            view = await client.inspect(info.actor)
        except UnknownActor:
            continue  # removed between the list and the inspect
        state = view.state if isinstance(view.state, dict) else {}
        if state.get("status", "new") == "new":
            continue  # created, not yet watching a process
        if owner is not None and state.get("owner") != owner:
            continue
        jobs.append(
            {
                "job_id": state.get("job_id") or info.actor.partition("/")[2],
                "owner": state.get("owner", ""),
                "status": state.get("status", ""),
                "exit_code": state.get("exit_code"),
                "started_at": state.get("started_at", 0.0),
                "command": state.get("command", ""),
            }
        )
    jobs.sort(key=lambda job: job["started_at"], reverse=True)
    return jobs


def job_rows(jobs: list[dict[str, Any]], now: float) -> list[str]:
    """The human table: JOB, OWNER, STATUS, AGE, COMMAND (one line)."""
    rows = []
    for job in jobs:
        status = job["status"]
        if status == "exited" and job["exit_code"] is not None:
            status = f"exited {job['exit_code']}"
        command = " ".join(str(job["command"]).split())
        command = command if len(command) <= 60 else command[:57] + "..."
        age = _age(now - float(job["started_at"] or now))
        rows.append([job["job_id"], job["owner"], status, age, command])
    return table(["JOB", "OWNER", "STATUS", "AGE", "COMMAND"], rows)


async def _jobs(client: Client, args: argparse.Namespace, out: Output) -> None:
    jobs = await list_jobs(client, args.owner)
    if not jobs and not out.json:
        whose = f" of {args.owner}" if args.owner else ""
        out.write(f"no jobs{whose}")
        return
    out.emit(job_rows(jobs, time.time()), {"jobs": jobs})


JOBS = Verb("jobs", "list background jobs (of one owner) with status, age and command",
            _jobs_args, _jobs)  # fmt: skip


def add_parsers(subparsers: Any) -> None:
    parser = subparsers.add_parser(JOBS.name, help=JOBS.summary, description=JOBS.summary)
    JOBS.add_arguments(parser)
    add_common(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of columns")
    parser.set_defaults(func=lambda args: run_command(JOBS, args))


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"
