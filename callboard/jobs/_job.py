"""The ``job`` kind: a detached process that outlives a timeout and the runtime itself.

A job actor is created by its owner (a session or task) with a ``watch``
message carrying the process's identity (pid and start time) and its files.
It watches the process in an activity; after a restart it re-attaches by pid
*and* start time (a reused pid is not mistaken for it) or reads the exit
file the process left. When the process ends, one commit records the end,
emits ``job.finished`` and sends the owner a machine event; the files are
removed after that commit. Its output is copied into the job's own log as it
runs and in that last commit (``_output``), so it can be read after the end.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import attrs
import trio

from ..actors import Actor, Context
from ..codec import JSONShapeError, structure_json
from ..errors import ToolError
from ..mailbox import Message
from ..tools import (
    EXIT_WRITE_WAIT,
    STOP_GRACE,
    Confinement,
    Executor,
    JobFiles,
    LocalExecutor,
    SshExecutor,
    parse_exit_status,
)
from ..views import executor_shape_problem
from ._bodies import WatchBody
from ._machine_event import machine_event_text
from ._output import OUTPUT_LOG, output_cap, output_interval, take_output

__all__ = ["Job", "JobState"]

TAIL_BYTES = 4096
_COPY_STEP = 64 * 1024  # bytes one read of the output file takes
_COPY_PER_COMMIT = 4 * _COPY_STEP  # bytes one periodic copy commits at most
_REMOTE_INTERVAL = 5.0  # seconds between copies at least, for a job on another machine
log = logging.getLogger(__name__)


@attrs.define
class JobState:
    job_id: str = ""
    command: str = ""
    owner: str = ""
    pid: int | None = None
    start_time: int | None = None
    directory: str = ""
    executor: dict[str, Any] | None = None
    status: str = "new"
    exit_code: int | None = None
    reason: str = ""
    started_at: float = 0.0
    finished_at: float | None = None
    # The owner stopped or settled and takes no more messages: no job.finished to it.
    owner_ending: bool = False
    # How much of the output file is copied into the log (``_output``).
    output_size: int = 0
    output_pending: str = ""
    output_capped: bool = False


def executor_from(description: dict[str, Any] | None, *, confinement: Confinement) -> Executor:
    """``None`` for this machine, ``{"ssh": {"host": ..., ...}}`` for another.

    The description comes from a spec (the caller's); ``confinement`` from the
    host's settings (``Confinement.from_settings(ctx.settings)``), and only it
    says how commands are confined: a local executor runs them in its
    sandbox, and both leave its ``secret_env`` out of the environment. The
    sandbox applies to this machine only; over ssh a command runs as the
    remote user, unsandboxed.
    """
    if not description:
        return LocalExecutor(sandbox=confinement.sandbox, secret_env=confinement.secret_env)
    problem = executor_shape_problem(description)
    if problem is not None:
        raise ValueError(problem)
    return SshExecutor(**description["ssh"], secret_env=confinement.secret_env)


def _read_watch(message: Message, address: str) -> WatchBody | str:
    """What a ``watch`` asks for, or why it is refused: it must come from the actor
    it names as the owner. A client's message has no sender, so no client can make
    a job. A body that does not fit `WatchBody` is refused naming the field."""
    body = message.body
    if not isinstance(body, dict) or not isinstance(body.get("owner"), str):
        return "a watch names its owner"
    if message.sender is None or message.sender != body["owner"]:
        return "only the owner that started a job may watch it"
    try:
        return structure_json(body, WatchBody, what=f"the body of 'watch' to {address}")
    except JSONShapeError as exc:
        return str(exc)


class Job(Actor):
    """One background process, owned by the session or task that started it."""

    kind = "job"
    state_type = JobState
    virtual = True
    # The watcher's wait and read, until it records the end; a stop cancels it
    # first, so that one of the two records the end, never both.
    _watching: trio.CancelScope | None = None

    def is_busy(self) -> bool:
        return bool(self.state.status == "running")

    @property
    def files(self) -> JobFiles:
        return JobFiles.for_job(Path(self.state.directory), self.state.job_id)

    async def on_start(self, ctx: Context) -> None:
        if self.state.status == "running":
            ctx.start_activity(self._watch, ctx, name="watch")

    async def handle(self, ctx: Context, message: Message) -> None:
        if message.type == "watch" and self.state.status == "new":
            watch = _read_watch(message, ctx.address)
            if isinstance(watch, str):
                # A watch names a pid to signal and files to read as this server:
                # only the owner that started the job may send it (never a client).
                ctx.emit("job.refused", {"from": message.sender, "reason": watch})
                return
            self.state = JobState(
                job_id=watch.job_id,
                command=watch.command,
                owner=watch.owner,
                pid=watch.pid,
                start_time=watch.start_time,
                directory=watch.directory,
                executor=watch.executor,
                status="running",
                started_at=ctx.now(),
            )
            ctx.emit(
                "job.started",
                {"job_id": self.state.job_id, "command": self.state.command,
                 "owner": self.state.owner, "pid": self.state.pid},
            )  # fmt: skip
            ctx.start_activity(self._watch, ctx, name="watch")
        elif message.type == "stop":
            if message.sender not in (None, self.state.owner):
                ctx.emit("job.refused", {"from": message.sender, "reason": "not the owner"})
                return
            if isinstance(message.body, dict) and message.body.get("owner_ending") is True:
                self.state.owner_ending = True
            await self._stop_process(ctx)

    def _executor(self, ctx: Context) -> Executor:
        return executor_from(
            self.state.executor, confinement=Confinement.from_settings(ctx.settings)
        )

    async def on_stop(self, ctx: Context) -> None:
        if self._watching is not None:
            self._watching.cancel()
        if self.state.status == "running":
            executor = self._executor(ctx)
            await self._stop_process(ctx)
            code: int | None = None
            if self.state.pid is not None:
                # The monitor writes the exit status just after the group is gone.
                with trio.move_on_after(EXIT_WRITE_WAIT + 1.0):
                    pid, start = self.state.pid, self.state.start_time
                    if await executor.wait_exit(self.files, pid, start_time=start):
                        code = parse_exit_status(await executor.read_text(self.files.exit))
            await self._finish(ctx, "stopped", code, "stopped on request")
            # No commit follows a stop's (the actor ends with it), so the files go
            # now: a crash before that commit reports the job lost, not stopped.
            await executor.remove(self.files.every_file)

    async def _stop_process(self, ctx: Context) -> None:
        """Stop the job's process group, if the job's process is still the one running:
        a later process that reuses the pid (and so leads a group of that id) is left alone."""
        pid, start = self.state.pid, self.state.start_time
        if pid is None:
            return
        executor = self._executor(ctx)
        if start is None or not await executor.is_alive(pid, start):
            return  # without a start time, the command had ended before it could be read
        await executor.stop_group(pid, STOP_GRACE)

    async def _watch(self, ctx: Context) -> None:
        executor = self._executor(ctx)
        pid, start = self.state.pid, self.state.start_time
        assert pid is not None
        with trio.CancelScope() as self._watching:
            async with trio.open_nursery() as copying:
                copying.start_soon(self._copy_output, ctx, executor)
                exited = await executor.wait_exit(self.files, pid, start_time=start)
                copying.cancel_scope.cancel()
            status = await executor.read_text(self.files.exit) if exited else None
            # _finish records the end only after its last await: cancelled, it recorded
            # none (only more of the output, which is the same either way).
            if status is not None and status.strip().lstrip("-").isdigit():
                code = int(status.strip())
                await self._finish(ctx, "exited", code, "")
            else:
                await self._finish(
                    ctx, "lost", None,
                    "the process is gone and left no exit status (it was killed, or the "
                    "machine restarted)",
                )  # fmt: skip
        if self._watching.cancelled_caught:
            return  # on_stop records the end
        ctx.stop(self.state.status)
        await ctx.checkpoint()
        # Only after the commit that recorded the end: the files are not needed any more.
        await executor.remove(self.files.every_file)

    async def _copy_output(self, ctx: Context, executor: Executor) -> None:
        """While the process runs: copy what it wrote into the log, commit, and
        announce it (``job.output``, ephemeral, after the commit is durable)."""
        interval = output_interval(ctx.settings)
        if self.state.executor:
            # Each read of a remote file is an ssh round trip (a process of its own).
            interval = max(interval, _REMOTE_INTERVAL)
        while True:
            await trio.sleep(interval)
            try:
                changed = await self._record_output(ctx, executor, _COPY_PER_COMMIT)
            except (ToolError, OSError) as exc:
                # The host is unreachable for now: the next round, or the end, copies it.
                log.debug("could not copy the output of %s: %s", ctx.address, exc)
                continue
            if changed:
                await ctx.checkpoint()
                ctx.emit("job.output", {"size": self.state.output_size}, ephemeral=True)

    async def _record_output(self, ctx: Context, executor: Executor, most: int | None) -> bool:
        """Copy output past what is recorded into the state and the log, up to the
        cap (and ``most`` bytes, if given); True if anything changed."""
        cap = output_cap(ctx.settings)
        changed = False
        copied = 0
        while most is None or copied < most:
            have = self.state.output_size
            if have >= cap:
                size = await executor.size(self.files.out) or 0
                if size > cap and not self.state.output_capped:
                    self.state.output_capped = True
                    changed = True
                break
            try:
                data = await executor.read_bytes(self.files.out, have, min(_COPY_STEP, cap - have))
            except FileNotFoundError:
                break
            if not data:
                break
            # No await from here to the state's change: both or neither.
            for item in take_output(self.state, data):
                ctx.append(OUTPUT_LOG, item)
            copied += len(data)
            changed = True
        return changed

    async def _finish(self, ctx: Context, status: str, code: int | None, reason: str) -> None:
        if self.state.status != "running":
            return
        executor = self._executor(ctx)
        # The rest of the output joins the commit that records the end: the file
        # is removed after it.
        await self._record_output(ctx, executor, None)
        size = await executor.size(self.files.out) or 0
        start = max(0, size - TAIL_BYTES)
        tail_bytes = await executor.read_bytes(self.files.out, start, TAIL_BYTES) if size else b""
        tail = tail_bytes.decode("utf-8", "replace")
        self.state.status, self.state.exit_code, self.state.reason = status, code, reason
        self.state.finished_at = ctx.now()
        data = {"job_id": self.state.job_id, "command": self.state.command, "status": status,
                "exit_code": code, "reason": reason, "tail": tail, "size": size}  # fmt: skip
        ctx.emit("job.finished", data)
        if self.state.owner_ending:
            return
        # In the same commit as the end, keyed: a replayed end cannot notify twice.
        # An owner that ended meanwhile reads no more; the end is in this job's events.
        ctx.send(
            self.state.owner,
            "job.finished",
            {**data, "text": machine_event_text(self.state.job_id, self.state.command, status,
                                                code, tail, reason)},
            key=f"job.finished:{self.state.job_id}",
            drop_if_stopped=True,
        )  # fmt: skip
