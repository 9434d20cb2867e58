"""A session's (or task's) background jobs: the records it keeps and the tools its model calls.

A session or task owns the jobs it starts. Their records live in the owner's own
state (`JobRecord`, keyed by job id), so ownership is a lookup in the
owner's state and nothing else: another session does not have the record,
so it cannot read, list or stop the job, even by id.

`JobTools` is the owner's handle for its running turns: the owner hands it
to `drive_turn`, which passes it to the tool runner (``_tools.run_tool``)
with every call:

- ``adopt`` records a job that ``shell_run`` put in the background and sends
  ``watch`` to its ``job/ID`` actor. Both land in the commit that records
  the tool's result.
- ``job_output`` reads a running job's output files incrementally; a
  finished job's files are gone (the job actor removes them after its
  ``job.finished``), so its tail comes from the record the machine event
  filled in.
- ``job_stop`` stops the job's process group (SIGTERM, SIGKILL after a grace
  period); the model asked for it, so its end raises no machine event.

`find_orphans` finds the jobs a crash cut off before anyone recorded them (a
``shell_run`` that was waiting when the runtime was killed): their process
runs on, detached, so the session adopts them when it starts again.
"""

from __future__ import annotations

from collections.abc import Container
from pathlib import Path
from typing import Any

import attrs

from ..actors import Context
from ..errors import ToolError
from ..tools import (
    STOP_GRACE,
    Executor,
    JobFiles,
    JobHandle,
    LocalExecutor,
    parse_pid,
    read_job_output,
)
from ..tools import process_start_time as _process_start_time
from ..tools import validate_job_id as _validate_job_id

__all__ = [
    "JOB_OUTPUT_CAP",
    "JOB_TOOL_NAMES",
    "JobRecord",
    "JobTools",
    "describe_status",
    "find_orphans",
    "record_finished",
]

JOB_TOOL_NAMES: tuple[str, ...] = ("job_output", "job_list", "job_stop")
"""The tools that read, list and stop the owner's background jobs."""

JOB_OUTPUT_CAP = 16 * 1024
"""The most bytes of output one ``job_output`` call returns."""

_JOBS_KEPT = 50  # finished job records a session keeps for job_list/job_output


@attrs.define
class JobRecord:
    """One job of a session, in the session's snapshot.

    ``status`` is ``running`` until the job's ``job.finished`` arrives, then
    the job actor's word (``exited``, ``lost``, ``stopped``). ``tail`` and
    ``size`` (the output's last bytes and its total length) come with it.
    """

    command: str
    pid: int
    start_time: int | None
    directory: str
    started_at: float
    status: str = "running"
    exit_code: int | None = None
    reason: str = ""
    stop_requested: bool = False
    size: int | None = None
    tail: str = ""


def describe_status(record: JobRecord) -> str:
    """``running``, ``exited 3``, ``stopped (exit 143)``, ``lost: ...`` (one line)."""
    if record.status == "running":
        return "running"
    code = f"exit {record.exit_code}" if record.exit_code is not None else "no exit status"
    if record.stop_requested:
        return f"stopped on request ({code})"
    if record.status == "exited":
        return f"exited {record.exit_code}"
    if record.reason:
        return f"{record.status}: {record.reason}"
    return record.status


@attrs.define(eq=False)
class JobTools:
    """The job tools of one owner, bound to its context and its records.

    ``jobs`` is the dict in the owner's state; changes to it are committed
    with the tool result that caused them. ``executor`` runs the owner's
    commands (this machine, or another over ssh); ``executor_description``
    is what the ``job`` actor rebuilds it from (None for this machine).
    """

    ctx: Context
    jobs: dict[str, JobRecord]
    jobs_root: Path
    background_on_timeout: bool = True
    executor: Executor = attrs.Factory(LocalExecutor)
    executor_description: dict[str, Any] | None = None

    def adopt(self, job: JobHandle) -> None:
        """Record ``job`` as this owner's and ask a ``job`` actor to watch it."""
        self.jobs[job.job_id] = JobRecord(
            command=job.command,
            pid=job.pid,
            start_time=job.start_time,
            directory=str(job.files.directory),
            started_at=self.ctx.now(),
        )
        self._forget_old()
        watch = {
            "job_id": job.job_id, "command": job.command, "owner": self.ctx.address,
            "pid": job.pid, "start_time": job.start_time, "directory": str(job.files.directory),
            "executor": self.executor_description,
        }  # fmt: skip
        self.ctx.send(f"job/{job.job_id}", "watch", watch, key=f"watch:{job.job_id}")

    async def run(self, name: str, args: dict[str, Any]) -> str:
        """Run the job tool ``name``; raises ToolError with a sentence for the model."""
        if name == "job_list":
            return self.list_jobs()
        if name == "job_output":
            return await self.output(args.get("job_id"), int(args.get("offset", 0)))
        if name == "job_stop":
            return await self.stop(args.get("job_id"))
        raise ToolError(f"{name!r} is not a job tool; they are {', '.join(JOB_TOOL_NAMES)}")

    def own(self, job_id: object) -> tuple[str, JobRecord]:
        """The record of ``job_id`` if this owner started it; else ToolError.

        The refusal is the same whether the job belongs to someone else or
        does not exist, so an id tells another owner nothing.
        """
        job_id = _validate_job_id(job_id)
        record = self.jobs.get(job_id)
        if record is None:
            kind = self.ctx.address.split("/", 1)[0]  # session, task
            raise ToolError(
                f"there is no job {job_id!r} among this {kind}'s jobs (a {kind} sees only "
                "the jobs it started); job_list shows them"
            )
        return job_id, record

    def list_jobs(self) -> str:
        """One line per job: id, status, age, command."""
        if not self.jobs:
            return "No background jobs."
        now = self.ctx.now()
        lines = [f"{len(self.jobs)} background job{'s' if len(self.jobs) != 1 else ''}:"]
        for job_id, record in self.jobs.items():
            age = _age(now - record.started_at)
            lines.append(f"{job_id}  {describe_status(record)}  {age}  {_one_line(record.command)}")
        return "\n".join(lines)

    async def output(self, job_id: object, offset: int) -> str:
        """Output of the job from byte ``offset`` (capped), and whether it still runs."""
        job_id, record = self.own(job_id)
        if offset < 0:
            raise ToolError(f"job_output: offset must be 0 or more, got {offset}")
        if record.status != "running":
            return _finished_output(job_id, record, offset)
        files = JobFiles.for_job(Path(record.directory), job_id)
        try:
            read = await read_job_output(
                self.executor, files, offset, JOB_OUTPUT_CAP,
                pid=record.pid, start_time=record.start_time,
            )  # fmt: skip
        except ToolError:
            return (
                f"job {job_id} has just ended and its files are gone; its result arrives "
                "as a machine event in a moment (job_output will show its tail then)."
            )
        if read.running:
            head = f"job {job_id} is running (pid {record.pid})."
        elif read.exit_code is not None:
            head = f"job {job_id} has ended: exited {read.exit_code}."
        else:
            head = f"job {job_id} has ended without an exit status."
        return _with_text(head, read.text, offset, read.next_offset, read.truncated)

    async def stop(self, job_id: object) -> str:
        """Stop the job's whole process group: SIGTERM, then SIGKILL after a grace period."""
        job_id, record = self.own(job_id)
        if record.status != "running":
            return f"job {job_id} is not running: {describe_status(record)}."
        if record.start_time is not None and not await self.executor.is_alive(
            record.pid, record.start_time
        ):
            return f"job {job_id} has already ended; its result arrives as a machine event."
        record.stop_requested = True
        if not await self.executor.stop_group(record.pid, STOP_GRACE):
            raise ToolError(
                f"job {job_id} could not be stopped: process group {record.pid} outlived SIGKILL"
            )
        return f"Stopped job {job_id} (process group {record.pid})."

    def _forget_old(self) -> None:
        finished = [k for k, r in self.jobs.items() if r.status != "running"]
        for job_id in finished[: max(0, len(finished) - _JOBS_KEPT)]:
            del self.jobs[job_id]


def record_finished(jobs: dict[str, JobRecord], job_id: str, body: dict[str, Any]) -> JobRecord:
    """Fill in ``jobs[job_id]`` from a ``job.finished`` body; KeyError if not ours."""
    record = jobs[job_id]
    record.status = str(body.get("status") or "exited")
    code = body.get("exit_code")
    record.exit_code = code if isinstance(code, int) else None
    record.reason = str(body.get("reason") or "")
    tail = body.get("tail")
    record.tail = tail if isinstance(tail, str) else ""
    size = body.get("size")
    record.size = size if isinstance(size, int) else len(record.tail.encode())
    return record


def find_orphans(directory: Path, known: Container[str]) -> list[JobHandle]:
    """The jobs with files in ``directory`` (an owner's) that ``known`` does not name.

    Their ``shell_run`` started them and was cut off (the runtime was killed)
    before the result that records them was committed. Blocking: run it in a
    thread. A job whose process is gone keeps ``start_time`` None; its exit
    file, if any, says how it ended.
    """
    if not directory.is_dir():
        return []
    found = []
    for pid_file in sorted(directory.glob("*.pid")):
        job_id = pid_file.name.removesuffix(".pid")
        try:
            _validate_job_id(job_id)
        except ToolError:
            continue
        if job_id in known:
            continue
        files = JobFiles.for_job(directory, job_id)
        try:
            pid = parse_pid(files.pid.read_text())
            command = files.cmd.read_text() if files.cmd.exists() else ""
        except OSError:
            continue
        if pid is None:
            continue
        start = None if files.exit.exists() else _process_start_time(pid)
        found.append(JobHandle(job_id, pid, start, command, files))
    return found


def _finished_output(job_id: str, record: JobRecord, offset: int) -> str:
    head = f"job {job_id} has ended: {describe_status(record)}."
    tail = record.tail.encode()
    size = record.size if record.size is not None else len(tail)
    tail_start = size - len(tail)
    if offset >= size:
        return f"{head}\n(no output after byte {offset}; the output is {size} bytes)"
    if offset >= tail_start:
        data = tail[offset - tail_start :]
        start = offset
    else:
        data, start = tail, tail_start
        head += f" Only its last {len(tail)} bytes were kept (from byte {tail_start})."
    cut = len(data) > JOB_OUTPUT_CAP
    data = data[:JOB_OUTPUT_CAP]
    text = data.decode("utf-8", "replace")
    return _with_text(head, text, start, start + len(data), cut)


def _with_text(head: str, text: str, start: int, end: int, more: bool) -> str:
    if end == start:
        return f"{head}\n(no new output from byte {start})"
    body = text if text.endswith("\n") else text + "\n"
    tail = f"[more output: call job_output with offset {end}]" if more else f"[next offset {end}]"
    return f"{head}\nOutput, bytes {start} to {end}:\n{body}{tail}"


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def _one_line(command: str, limit: int = 80) -> str:
    line = " ".join(command.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
