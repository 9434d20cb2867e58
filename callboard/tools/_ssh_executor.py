"""Running jobs on another machine: :class:`SshExecutor`, the executor over ``ssh``.

It drives a job the way :class:`LocalExecutor` (``_executor.py``) does, but
reaches the far machine only through the system ``ssh`` client: each
operation is one ``ssh HOST /bin/sh -s`` fed a small script on stdin (the
wrapper from ``build_wrapper``, or the waiting and stopping scripts of
``_remote_scripts.py``), and the answer is read from its exit status and
output. The host name and options are checked here before any of them reaches
an ``ssh`` command line.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Iterable
from pathlib import Path

import attrs
import trio

from callboard.errors import ToolError

from . import _procs
from ._environment import command_environment
from ._executor import EXIT_WRITE_WAIT, _launch_failure, _names
from ._remote_scripts import REMOTE_PAUSE, build_stop_group_script, build_wait_exit_script
from ._ssh_options import validate_ssh_options
from ._wrapper import JobFiles, build_wrapper

__all__ = ["SshExecutor"]

# A remote wait is one ssh session of at most this long; then another begins.
_REMOTE_WAIT_CHUNK = 60.0


def _q(path: Path) -> str:
    return shlex.quote(str(path))


def _validate_host(host: str) -> str:
    if not host or host.startswith("-") or any(c.isspace() for c in host):
        raise ToolError(f"ssh host {host!r} is not a host name")
    return host


@attrs.define
class SshExecutor:
    """Runs jobs on another machine with the system ``ssh`` client.

    ``options`` are ``Key=Value`` pairs, each passed as ``-o``, and only
    the keys in :data:`SSH_OPTIONS` (a spec gives them, and many other keys
    run commands on this machine). ``BatchMode``
    is always on: a password prompt would hang a tool call. Each operation is
    one ``ssh HOST /bin/sh -s`` with a small script on stdin, bounded by
    ``op_timeout`` (plus the time the operation itself is meant to take).
    The far side needs ``/bin/sh``, ``setsid``, ``base64``, ``awk`` and Linux
    ``/proc``.

    The ``ssh`` process gets this process's environment without the
    server's secrets (:func:`command_environment`, plus ``secret_env``), so
    no ``SendEnv`` in an ssh config can pass them on. Nothing else of the
    local confinement applies: the command runs on the far side as the
    remote user, unsandboxed, with whatever environment sshd gives it.
    """

    host: str = attrs.field(converter=_validate_host)
    port: int = attrs.field(default=22, kw_only=True)
    user: str | None = attrs.field(default=None, kw_only=True)
    identity_file: Path | None = attrs.field(default=None, kw_only=True)
    options: tuple[str, ...] = attrs.field(default=(), kw_only=True, converter=validate_ssh_options)
    connect_timeout: int = attrs.field(default=10, kw_only=True)
    op_timeout: float = attrs.field(default=30.0, kw_only=True)
    secret_env: tuple[str, ...] = attrs.field(default=(), kw_only=True, converter=_names)

    def argv(self) -> list[str]:
        """The ``ssh`` command line that runs ``/bin/sh -s`` on the host."""
        argv = ["ssh", "-T", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={self.connect_timeout}"]
        argv += ["-p", str(self.port)]
        if self.identity_file is not None:
            argv += ["-i", str(self.identity_file)]
        if self.user is not None:
            argv += ["-l", self.user]
        for option in self.options:
            argv += ["-o", option]
        return [*argv, "--", self.host, "/bin/sh -s"]

    async def _run(
        self, script: str, *, extra_time: float = 0.0
    ) -> subprocess.CompletedProcess[bytes]:
        limit = self.op_timeout + extra_time
        with trio.move_on_after(limit):
            done = await trio.run_process(
                self.argv(),
                stdin=script.encode("utf-8"),
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                env=command_environment(self.secret_env),
            )
            if done.returncode == 255:
                reason = done.stderr.decode("utf-8", "replace").strip()
                raise ToolError(f"ssh to {self.host}:{self.port} failed: {reason}")
            return done
        raise ToolError(f"ssh to {self.host}:{self.port} did not answer within {limit:g}s")

    def _unexpected(self, what: str, done: subprocess.CompletedProcess[bytes]) -> ToolError:
        reason = done.stderr.decode("utf-8", "replace").strip() or f"exit {done.returncode}"
        return ToolError(f"{what} on {self.host} failed: {reason}")

    async def start(self, command: str, files: JobFiles, *, cwd: Path) -> None:
        done = await self._run(build_wrapper(command, files, cwd=cwd))
        if done.returncode != 0:
            raise _launch_failure(files, done.stderr)

    async def wait_exit(self, files: JobFiles, pid: int, *, start_time: int | None = None) -> bool:
        # One remote loop per chunk instead of one ssh session per poll. The
        # chunk ends no later than our deadline, so a cancelled wait leaves
        # no loop behind (and the heartbeat ends it if it would).
        while True:
            left = trio.current_effective_deadline() - trio.current_time()
            chunk = max(REMOTE_PAUSE, min(_REMOTE_WAIT_CHUNK, left + 1.0))
            script = build_wait_exit_script(
                files, pid, start_time=start_time, seconds=chunk, gone_wait=EXIT_WRITE_WAIT
            )
            done = await self._run(script, extra_time=chunk)
            if done.returncode in (0, 4):
                return done.returncode == 0
            if done.returncode != 1:
                raise self._unexpected(f"waiting for job {files.job_id}", done)

    async def read_text(self, path: Path) -> str | None:
        done = await self._run(f'f={_q(path)}\n[ -e "$f" ] || exit 3\ncat -- "$f"\n')
        if done.returncode == 3:
            return None
        if done.returncode != 0:
            raise self._unexpected(f"reading {path}", done)
        return done.stdout.decode("utf-8", "replace")

    async def read_bytes(self, path: Path, offset: int, limit: int) -> bytes:
        script = f'f={_q(path)}\n[ -e "$f" ] || exit 3\n'
        if limit > 0:
            script += f'tail -c +{offset + 1} -- "$f" | head -c {limit}\n'
        done = await self._run(script)
        if done.returncode == 3:
            raise FileNotFoundError(f"no such file on {self.host}: {path}")
        if done.returncode != 0:
            raise self._unexpected(f"reading {path}", done)
        return done.stdout

    async def size(self, path: Path) -> int | None:
        done = await self._run(f'f={_q(path)}\n[ -e "$f" ] || exit 3\nwc -c <"$f"\n')
        if done.returncode == 3:
            return None
        if done.returncode != 0:
            raise self._unexpected(f"sizing {path}", done)
        return int(done.stdout.strip())

    async def exists(self, path: Path) -> bool:
        done = await self._run(f"[ -e {_q(path)} ]\n")
        return done.returncode == 0

    async def remove(self, paths: Iterable[Path]) -> None:
        quoted = " ".join(_q(path) for path in paths)
        if not quoted:
            await trio.lowlevel.checkpoint()
            return
        done = await self._run(f"rm -f -- {quoted}\n")
        if done.returncode != 0:
            raise self._unexpected("removing job files", done)

    async def _stat(self, pid: int) -> _procs.ProcStat | None:
        if pid < 1:
            await trio.lowlevel.checkpoint()
            return None
        done = await self._run(f"cat /proc/{int(pid)}/stat 2>/dev/null || exit 3\n")
        if done.returncode != 0:
            return None
        return _procs.parse_stat(done.stdout.decode("utf-8", "replace"))

    async def is_alive(self, pid: int, start_time: int) -> bool:
        stat = await self._stat(pid)
        return stat is not None and stat.alive and stat.start_time == start_time

    async def start_time(self, pid: int) -> int | None:
        stat = await self._stat(pid)
        return None if stat is None else stat.start_time

    async def stop_group(self, pgid: int, grace: float) -> bool:
        if pgid <= 1:
            raise ToolError(f"refusing to signal process group {pgid} on {self.host}")
        script = build_stop_group_script(pgid, grace=grace, kill_wait=_procs.KILL_WAIT)
        done = await self._run(script, extra_time=grace + _procs.KILL_WAIT)
        return done.returncode == 0
