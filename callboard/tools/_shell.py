"""``shell_run``: one command through the job wrapper, foreground or background.

Every command runs as a job (``_wrapper.py``), even one that will take a
millisecond, because nobody knows in advance which commands finish in time.
One that finishes within its timeout is answered like a foreground command
and leaves no file behind. One that does not becomes a :class:`JobHandle` the
caller owns (later the job actor), or is stopped if the caller said so.

Nothing is left running by accident: until a job is handed over, any error or
cancellation stops its whole process group and removes its files, in a
shielded, bounded cleanup.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import trio

from ..codec import complete_utf8_prefix
from ..errors import ToolError
from ._executor import Executor
from ._procs import KILL_WAIT
from ._wrapper import (
    JobFiles,
    new_job_id,
    owner_dir,
    parse_exit_status,
    parse_pid,
)

__all__ = ["STOP_GRACE", "JobHandle", "JobOutput", "ShellResult", "read_job_output", "shell_run"]

#: Seconds a stopped job gets between SIGTERM and SIGKILL.
STOP_GRACE = 2.0
# A job cancelled while launching writes its pid file within milliseconds.
_PID_WAIT = 1.0
_CLEANUP_MARGIN = 5.0


@attrs.frozen
class JobHandle:
    """A running job handed to the caller: enough to find it again after a restart.

    ``pid`` is also the job's process group. ``start_time`` tells the job from
    a later process with the same pid; it is None only when the command had
    already ended before it could be read (its exit file then says how).
    Whoever holds the handle owns the job: it reads it (``read_job_output``),
    stops it (``Executor.stop_group``) and removes ``files.every_file`` at
    the end.
    """

    job_id: str
    pid: int
    start_time: int | None
    command: str
    files: JobFiles


@attrs.frozen
class ShellResult:
    """What one ``shell_run`` call came to.

    ``text`` is what the model reads. ``output`` is what the command printed
    (stdout and stderr interleaved); if it was over the cap, its middle is
    replaced by a marker and ``dropped`` counts the bytes cut. ``job`` is set
    when the command goes on in the background; ``killed`` when it timed out
    and was stopped.
    """

    text: str
    exit_code: int | None = None
    output: str = ""
    dropped: int = 0
    timed_out: bool = False
    killed: bool = False
    job: JobHandle | None = None

    @property
    def truncated(self) -> bool:
        """Whether output was cut to fit the cap."""
        return self.dropped > 0


@attrs.frozen
class JobOutput:
    """One incremental read of a job's output.

    Read again from ``next_offset`` for what came after. ``truncated`` means
    the read stopped at its cap and more is there already.
    """

    text: str
    next_offset: int
    running: bool
    exit_code: int | None
    truncated: bool


async def shell_run(
    command: str,
    *,
    workspace: Path,
    executor: Executor,
    jobs_root: Path,
    owner: str,
    timeout: float,  # noqa: ASYNC109 (when to hand over to the background, not a cancel)
    background: bool = False,
    background_on_timeout: bool = True,
    output_cap: int,
    stop_grace: float = STOP_GRACE,
) -> ShellResult:
    """Run ``command`` with ``/bin/sh`` in ``workspace`` as a job of ``owner``.

    Waits up to ``timeout`` seconds. A command that ends by then is answered
    with its output (at most ``output_cap`` bytes: the middle is cut and the
    text says how much) and its exit status, and its files are removed. One
    that is still running is handed back as ``ShellResult.job`` and keeps
    running, or, with ``background_on_timeout=False``, is stopped (its whole
    process group) and removed. ``background=True`` hands it back at once.

    Not cancel-atomic, but cancel-safe: cancelled before the job is handed
    over, it stops the job's process group and removes its files first.

    Raises:
        ToolError: the command is empty, an argument is out of range, or the
            job could not be started.
    """
    if not command.strip():
        raise ToolError("the command is empty; give shell_run a command to run")
    if timeout <= 0:
        raise ToolError(f"timeout must be more than 0 seconds, got {timeout!r}")
    if output_cap < 16:
        raise ToolError(f"output_cap must be at least 16 bytes, got {output_cap!r}")
    files = JobFiles.for_job(owner_dir(jobs_root, owner), new_job_id())
    try:
        await executor.start(command, files, cwd=workspace)
    except ToolError:
        raise  # the launcher did not start the job and removed what it made
    except BaseException as error:
        with trio.move_on_after(stop_grace + KILL_WAIT + _CLEANUP_MARGIN, shield=True):
            await _discard(executor, files, None, stop_grace, error)
        raise
    pid: int | None = None
    try:
        pid = parse_pid(await executor.read_text(files.pid))
        if pid is None:
            raise ToolError(f"job {files.job_id} started but its pid file is unreadable")
        start_time = await executor.start_time(pid)
        job = JobHandle(files.job_id, pid, start_time, command, files)
        if background:
            return ShellResult(
                text=f"Started job {job.job_id} in the background (pid {pid}). "
                "Read its output with job_output and stop it with job_stop.",
                job=job,
            )
        ended = False
        with trio.move_on_after(timeout):  # only the wait: reading and removing are not timed
            await executor.wait_exit(files, pid, start_time=start_time)
            ended = True
        if not ended and (start_time is None or not await executor.is_alive(pid, start_time)):
            await executor.wait_exit(files, pid, start_time=start_time)  # ended at the deadline
            ended = True
        if ended:
            return await _finished(executor, files, output_cap)
        if background_on_timeout:
            return ShellResult(
                text=f"The command was still running after {timeout:g}s, so it keeps running "
                f"in the background as job {job.job_id} (pid {pid}). Read its output with "
                "job_output and stop it with job_stop.",
                timed_out=True,
                job=job,
            )
        if not await executor.stop_group(pid, stop_grace):
            raise ToolError(
                f"job {files.job_id} timed out and could not be stopped: process group "
                f"{pid} outlived SIGKILL"
            )
        await executor.wait_exit(files, pid, start_time=start_time)
        exit_code = parse_exit_status(await executor.read_text(files.exit))
        output, dropped = await _read_capped(executor, files.out, output_cap)
        await executor.remove(files.every_file)
        text = (
            f"The command was stopped after {timeout:g}s: it was still running, and "
            "running on in the background is turned off for it.\n" + _with_output(output)
        )
        return ShellResult(
            text=text,
            exit_code=exit_code,
            output=output,
            dropped=dropped,
            timed_out=True,
            killed=True,
        )
    except BaseException as error:
        with trio.move_on_after(stop_grace + KILL_WAIT + _CLEANUP_MARGIN, shield=True):
            await _discard(executor, files, pid, stop_grace, error)
        raise


async def _finished(executor: Executor, files: JobFiles, output_cap: int) -> ShellResult:
    """Answer for a command that has ended, and remove its files."""
    exit_code = parse_exit_status(await executor.read_text(files.exit))
    output, dropped = await _read_capped(executor, files.out, output_cap)
    await executor.remove(files.every_file)
    text = _with_output(output)
    sep = "" if text.endswith("\n") else "\n"
    if exit_code is None:
        text += f"{sep}[the command ended, but its exit status was lost]"
    elif exit_code != 0:
        text += f"{sep}[the command exited {exit_code}]"
    return ShellResult(text=text, exit_code=exit_code, output=output, dropped=dropped)


async def _discard(
    executor: Executor,
    files: JobFiles,
    pid: int | None,
    grace: float,
    error: BaseException,
) -> None:
    """Stop a job that was never handed over and remove its files.

    Runs while ``error`` propagates; a failure here is added to it as a note
    rather than hiding it.
    """
    try:
        if pid is None:
            pid = await _poll_pid(executor, files)
        if pid is not None and await executor.stop_group(pid, grace):
            await executor.wait_exit(files, pid)
        await executor.remove(files.every_file)
    except Exception as cleanup_error:
        error.add_note(f"cleaning up job {files.job_id} failed too: {cleanup_error!r}")


async def _poll_pid(executor: Executor, files: JobFiles) -> int | None:
    """The pid of a job whose launch was interrupted, if it started at all."""
    delay = 0.005
    with trio.move_on_after(_PID_WAIT):
        while (pid := parse_pid(await executor.read_text(files.pid))) is None:
            if not await executor.exists(files.cmd):
                return None  # the launcher never got as far as starting it
            await trio.sleep(delay)
            delay = min(delay * 2, 0.1)
        return pid
    return None


async def _read_capped(executor: Executor, path: Path, cap: int) -> tuple[str, int]:
    """The output file as text, its middle cut to fit ``cap`` bytes; and the bytes cut."""
    size = await executor.size(path)
    if not size:
        return "", 0
    if size <= cap:
        data = await executor.read_bytes(path, 0, size)
        return data.decode("utf-8", "replace"), 0
    head = await executor.read_bytes(path, 0, cap // 2)
    head = head[: complete_utf8_prefix(head)]
    tail = await executor.read_bytes(path, size - (cap - cap // 2), cap - cap // 2)
    tail = tail[_continuation_prefix(tail) :]
    dropped = size - len(head) - len(tail)
    marker = f"\n[... {dropped} bytes of output cut here ...]\n"
    return head.decode("utf-8", "replace") + marker + tail.decode("utf-8", "replace"), dropped


def _with_output(output: str) -> str:
    """The output as the model reads it; a cut is marked where it was made."""
    return output if output else "(no output)"


def _continuation_prefix(data: bytes) -> int:
    """How many bytes at the start of ``data`` finish a sequence cut off before it."""
    count = 0
    while count < min(3, len(data)) and data[count] & 0xC0 == 0x80:
        count += 1
    return count


async def read_job_output(
    executor: Executor,
    files: JobFiles,
    offset: int,
    cap: int,
    *,
    pid: int | None = None,
    start_time: int | None = None,
) -> JobOutput:
    """Read a job's output from byte ``offset``, at most ``cap`` bytes.

    The exit status is read *before* the output, so once ``running`` is
    False, everything the command wrote is at or before the end of this read
    and its continuation reads. A read never ends inside a UTF-8 character
    while more may follow: ``next_offset`` then points at that character.
    Without ``pid`` and ``start_time`` a job counts as running until it has an
    exit status; with them, a process that vanished without one does not.

    Raises:
        ToolError: ``offset`` or ``cap`` is out of range, or the job has no
            output file (it was removed, or never started).
    """
    if offset < 0:
        raise ToolError(f"offset must be 0 or more, got {offset!r}")
    if cap < 4:
        raise ToolError(f"cap must be at least 4 bytes, got {cap!r}")
    exit_code = parse_exit_status(await executor.read_text(files.exit))
    running = exit_code is None
    if running and pid is not None and start_time is not None:
        running = await executor.is_alive(pid, start_time)
    try:
        data = await executor.read_bytes(files.out, offset, cap + 1)
    except FileNotFoundError:
        raise ToolError(
            f"job {files.job_id} has no output file: it was removed or never started"
        ) from None
    truncated = len(data) > cap
    data = data[:cap]
    if truncated or running:
        data = data[: complete_utf8_prefix(data)] or data
    return JobOutput(
        text=data.decode("utf-8", "replace"),
        next_offset=offset + len(data),
        running=running,
        exit_code=exit_code,
        truncated=truncated,
    )
