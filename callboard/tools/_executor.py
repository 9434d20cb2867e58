"""Where jobs run: the :class:`Executor` seam, on this machine or over ssh.

``shell_run`` and the job actor never touch a process or a job file directly:
they go through an executor, so the same code drives a job on this host
(:class:`LocalExecutor`) or on another one (:class:`SshExecutor`, in
``_ssh_executor.py``). Every method is a checkpoint.

Both start a job the same way: the wrapper script from ``build_wrapper`` is
fed to ``/bin/sh -s`` on the target, as stdin (never as an argument, which
would put a size limit and a layer of quoting on it). The executor builds
the script itself, so how its commands are confined (a local sandbox, a
clean environment) is the executor's to decide, not its caller's. The
launcher exits as soon as the job runs, so the only process that is ours to
reap lives for milliseconds; the job itself belongs to no one and survives
us.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol, runtime_checkable

import attrs
import trio

from callboard.errors import ToolError

from . import _procs
from ._environment import command_environment
from ._sandbox import Sandbox
from ._wrapper import JobFiles, build_wrapper

__all__ = ["EXIT_WRITE_WAIT", "Executor", "LocalExecutor"]

_POLL_FIRST = 0.001
_POLL_MAX = 0.05
#: How long ``wait_exit`` waits for the exit file once the job's process is gone.
#: The monitor writes it within milliseconds; only a dead monitor takes longer.
EXIT_WRITE_WAIT = 2.0


@runtime_checkable
class Executor(Protocol):
    """What ``shell_run`` and the job actor need from the machine a job runs on.

    Paths are paths on that machine. ``pid`` is a job's pid, which is also
    its process group id, because every job leads its own session. Every
    method is a checkpoint. The reads and checks are cancel-safe (they change
    nothing). ``start`` is not cancel-atomic: a launch cancelled midway may
    have started the job, whose pid file then appears within milliseconds
    (``shell_run`` looks for it and stops the job). A cancelled
    ``stop_group`` still ends the group with SIGKILL.
    """

    async def start(self, command: str, files: JobFiles, *, cwd: Path) -> None:
        """Start ``command`` in ``cwd`` as the job ``files`` names (through the wrapper);
        return once it runs and ``files.pid`` exists.

        Raises ToolError if the job did not start (the message says why).
        """
        ...

    async def wait_exit(self, files: JobFiles, pid: int, *, start_time: int | None = None) -> bool:
        """Return once job ``pid`` has ended: True with an exit file, False without.

        Waits as long as the job runs: bound it with ``trio.move_on_after``.
        False means the process is gone and no exit file came within a few
        seconds (its monitor was killed too). With ``start_time``, a later
        process that reuses the pid is not mistaken for the job.
        """
        ...

    async def read_text(self, path: Path) -> str | None:
        """The whole of a small file as text, or None if there is no such file."""
        ...

    async def read_bytes(self, path: Path, offset: int, limit: int) -> bytes:
        """Up to ``limit`` bytes from ``offset``. Raises FileNotFoundError if missing."""
        ...

    async def size(self, path: Path) -> int | None:
        """The size of a file in bytes, or None if there is no such file."""
        ...

    async def exists(self, path: Path) -> bool:
        """Whether the file exists."""
        ...

    async def remove(self, paths: Iterable[Path]) -> None:
        """Remove files; missing ones are fine (removing twice succeeds)."""
        ...

    async def is_alive(self, pid: int, start_time: int) -> bool:
        """True if ``pid`` is alive and still the process that started at ``start_time``."""
        ...

    async def start_time(self, pid: int) -> int | None:
        """The start time of ``pid`` (``/proc/PID/stat`` field 22), or None if it is gone."""
        ...

    async def stop_group(self, pgid: int, grace: float) -> bool:
        """SIGTERM the group, wait ``grace`` s, SIGKILL, wait; True once it is gone."""
        ...


def _names(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(names)


def _launch_failure(files: JobFiles, stderr: bytes) -> ToolError:
    reason = stderr.decode("utf-8", "replace").strip() or "no reason given"
    return ToolError(f"job {files.job_id} did not start: {reason}")


@attrs.define
class LocalExecutor:
    """Runs jobs on this machine with ``/bin/sh``.

    ``start_timeout`` bounds the launch (the launcher normally takes a few
    milliseconds; it is only slow on a machine that is out of processes).
    Every command gets this process's environment without the server's
    secrets (:func:`command_environment`, with the operator's
    ``secret_env`` names too). With a ``sandbox``, every command runs in it
    (``Sandbox.box_script``, written beside the job's files as ``ID.box``).
    """

    start_timeout: float = 10.0
    secret_env: tuple[str, ...] = attrs.field(default=(), kw_only=True, converter=_names)
    sandbox: Sandbox | None = attrs.field(default=None, kw_only=True)

    async def start(self, command: str, files: JobFiles, *, cwd: Path) -> None:
        box = None
        if self.sandbox is not None:
            try:
                box = await trio.to_thread.run_sync(_box_script, self.sandbox, cwd, files)
            except OSError as exc:
                raise ToolError(f"job {files.job_id} did not start: {exc}") from exc
        script = build_wrapper(command, files, cwd=cwd, box=box)
        with trio.move_on_after(self.start_timeout):
            done = await trio.run_process(
                ["/bin/sh", "-s"],
                stdin=script.encode("utf-8"),
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                env=command_environment(self.secret_env),
            )
            if done.returncode != 0:
                raise _launch_failure(files, done.stderr)
            if not await _exists(files.pid):
                raise ToolError(f"job {files.job_id} started but left no pid file at {files.pid}")
            return
        raise ToolError(f"job {files.job_id} did not start within {self.start_timeout:g}s")

    async def wait_exit(self, files: JobFiles, pid: int, *, start_time: int | None = None) -> bool:
        # The job is not our child, but the kernel still tells us when it
        # exits: a pidfd becomes readable then. The monitor writes the exit
        # file a moment later, which a short poll picks up.
        if await _exists(files.exit):
            return True
        if start_time is None or _procs.is_same_process(pid, start_time):
            await _wait_pid_exit(pid)
        with trio.move_on_after(EXIT_WRITE_WAIT):
            await _wait_for_file(files.exit)
            return True
        return await _exists(files.exit)

    async def read_text(self, path: Path) -> str | None:
        def read() -> str | None:
            try:
                return path.read_text(encoding="utf-8", errors="replace")
            except FileNotFoundError:
                return None

        return await trio.to_thread.run_sync(read)

    async def read_bytes(self, path: Path, offset: int, limit: int) -> bytes:
        def read() -> bytes:
            with path.open("rb") as file:
                file.seek(offset)
                return file.read(limit)

        return await trio.to_thread.run_sync(read)

    async def size(self, path: Path) -> int | None:
        def size() -> int | None:
            try:
                return os.stat(path).st_size
            except FileNotFoundError:
                return None

        return await trio.to_thread.run_sync(size)

    async def exists(self, path: Path) -> bool:
        return await _exists(path)

    async def remove(self, paths: Iterable[Path]) -> None:
        def remove_all(todo: list[Path]) -> None:
            for path in todo:
                path.unlink(missing_ok=True)

        await trio.to_thread.run_sync(remove_all, list(paths))

    async def is_alive(self, pid: int, start_time: int) -> bool:
        await trio.lowlevel.checkpoint()
        return _procs.is_same_process(pid, start_time)

    async def start_time(self, pid: int) -> int | None:
        await trio.lowlevel.checkpoint()
        return _procs.process_start_time(pid)

    async def stop_group(self, pgid: int, grace: float) -> bool:
        return await _procs.stop_group(pgid, grace=grace)


def _box_script(sandbox: Sandbox, cwd: Path, files: JobFiles) -> str:
    # The owner's directory is made first, so the jobs root exists when the
    # sandbox is built: a path that is not there yet cannot be covered.
    files.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    return sandbox.box_script(cwd, files)


async def _wait_pid_exit(pid: int) -> None:
    """Return when ``pid`` has exited (a zombie counts as exited)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # no pidfd on this kernel: watch /proc
        delay = _POLL_FIRST
        while (stat := _procs.read_stat(pid)) is not None and stat.alive:
            await trio.sleep(delay)
            delay = min(delay * 2, _POLL_MAX)
        return
    try:
        await trio.lowlevel.wait_readable(fd)
    finally:
        trio.lowlevel.notify_closing(fd)
        os.close(fd)


async def _exists(path: Path) -> bool:
    return await trio.to_thread.run_sync(os.path.exists, path)


async def _wait_for_file(path: Path) -> None:
    delay = _POLL_FIRST
    while not await _exists(path):
        await trio.sleep(delay)
        delay = min(delay * 2, _POLL_MAX)
