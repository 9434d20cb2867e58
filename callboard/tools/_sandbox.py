"""A bubblewrap sandbox for the commands of an agent on this machine.

The model writes the commands and the server runs them as its own user,
often root. Without a sandbox a command can read ``/etc/shadow``, the
server's token and its store in the data directory, and write anywhere.
:class:`Sandbox` runs each one under ``bwrap`` (Debian's ``bubblewrap``)
instead, in this shape (the order matters: a later mount covers an earlier
one)::

    --ro-bind / /                the whole file system, read-only
    --dev /dev --proc /proc      a fresh /dev, and a /proc of its own pids
    --tmpfs /tmp /run /root /home
                                 empty: scratch space; no sockets of other
                                 services (/run/dbus, /run/docker.sock: a
                                 socket stays connectable on a read-only
                                 mount); nobody's home directory
    --bind WS WS                 the workspace, writable, at its own path, so
                                 the paths a command prints are the paths the
                                 file tools take
    --bind A A                   each directory between the workspace and a
                                 hidden path inside it, so no command can
                                 rename it and carry the hidden path away
    --ro-bind /dev/null FILE     over each secret file (SECRET_FILES...) and
    --tmpfs DIR                  over each secret directory and each `hide`
                                 path, after the workspace, so a data
                                 directory inside the workspace stays hidden
    --cap-drop ALL               root without capabilities: it cannot
                                 unmount the masks or mount anything
    --unshare-pid/ipc/uts (net)  its own pids, IPC and host name; no network
                                 unless `network`
    --die-with-parent            killed if its monitor dies

Not ``--new-session``: a job is stopped by killing its process group, and a
new session would take the command out of it. Without it the command could
push input into a controlling terminal (TIOCSTI), but a job has none: it runs
under ``setsid`` with stdin from ``/dev/null``.

A stop's SIGTERM reaches bwrap too, which leads the group. Were bwrap to die
of it, ``--die-with-parent`` would SIGKILL the sandbox at once and the
command would get no grace. So a job's bwrap runs with SIGTERM ignored
(inherited through ``exec``) and waits for the command, which gets the
default action back from ``env --default-signal`` (GNU coreutils 8.31 or
later, which ``probe_sandbox`` checks) and exits as it would outside; bwrap
then exits with its status. A SIGTERM in the milliseconds before that reset
is lost, and the stop ends the job with SIGKILL after the grace period.

The uid stays the server's. ``--cap-drop ALL`` takes root's power over
other users' files, but not an owner's access to its own, so root-owned
files that are not masked here stay readable (read-only). Run the server as
a user of its own to close that.
"""

from __future__ import annotations

import glob
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import attrs
import trio

from callboard.errors import ToolError

from ._wrapper import JobFiles

__all__ = [
    "EMPTY_DIRS",
    "RESET_TERM",
    "SCRIPT_PATH",
    "SECRET_DIRS",
    "SECRET_FILES",
    "Sandbox",
    "probe_sandbox",
]

#: Where a job's command file appears inside the sandbox (its real directory
#: is in the data directory, which is hidden).
SCRIPT_PATH = "/run/callboard/job.sh"

#: Run inside the sandbox before the command: gives it back the SIGTERM that
#: bwrap ignores (module docstring).
RESET_TERM: tuple[str, ...] = ("/usr/bin/env", "--default-signal=TERM")

#: Covered by an empty tmpfs before the workspace is bound, so a workspace
#: may lie below one of them (``/home/me/project``, pytest's ``/tmp/...``).
EMPTY_DIRS: tuple[str, ...] = ("/tmp", "/run", "/root", "/home")

#: Files that hold this machine's secrets and that root can read: password
#: hashes and their backups, host keys, keytabs, VPN and PPP secrets. Each
#: one present gets ``/dev/null`` bound over it; globs are expanded.
SECRET_FILES: tuple[str, ...] = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/security/opasswd",
    "/var/backups/shadow.bak",
    "/var/backups/gshadow.bak",
    "/etc/ssh/ssh_host_*_key",
    "/etc/krb5.keytab",
    "/etc/ipsec.secrets",
    "/etc/ppp/chap-secrets",
    "/etc/ppp/pap-secrets",
    "/var/lib/systemd/credential.secret",
    "/var/cache/debconf/passwords.dat",
)

#: Directories of private keys and stored credentials: each one present is
#: covered by an empty tmpfs.
SECRET_DIRS: tuple[str, ...] = (
    "/etc/ssl/private",
    "/etc/pki/tls/private",
    "/etc/letsencrypt",
    "/etc/credstore",
    "/etc/credstore.encrypted",
    "/etc/NetworkManager/system-connections",
    "/etc/wireguard",
    "/var/spool/cron/crontabs",
    # Logs: failed logins (btmp names what people mistyped as user names,
    # passwords often), and package installs' answers.
    "/var/log",
)

# Files of /etc that may be links into /run, which is covered: bound again
# at their real place, or a command with the network would have no DNS.
_RUN_LINKS = ("/etc/resolv.conf",)
_PROBE_TIMEOUT = 10.0


def _hide_paths(value: object) -> tuple[str, ...]:
    if isinstance(value, str | os.PathLike):
        value = (value,)
    if not isinstance(value, Sequence):
        raise TypeError(f"'hide' must be a sequence of absolute paths, got {value!r}")
    paths = tuple(os.fspath(path) for path in value)
    for path in paths:
        if not isinstance(path, str) or not os.path.isabs(path):
            raise ValueError(f"'hide' must hold absolute paths, got {path!r}")
    return paths


def _inside(path: str, parent: str) -> bool:
    """``path`` is ``parent`` or below it (components compared, not string prefixes)."""
    return path == parent or path.startswith(parent.rstrip("/") + "/")


@attrs.frozen
class Sandbox:
    """How local commands are confined: ``bwrap`` with the shape in the module docstring.

    ``hide`` are absolute paths no command may see: the data directory, a
    token file kept elsewhere (a directory gets an empty tmpfs, a file
    ``/dev/null``; a path that does not exist when the command starts is
    not covered, so hide the directory that will hold it). ``network``
    shares the host's network (True) or gives the command none but a
    loopback of its own (False). ``bwrap`` is the program to run.
    """

    hide: tuple[str, ...] = attrs.field(default=(), converter=_hide_paths)
    network: bool = attrs.field(default=True, kw_only=True)
    bwrap: str = attrs.field(default="bwrap", kw_only=True)

    def argv(
        self, workspace: Path, command: Sequence[str], *, script: Path | None = None
    ) -> list[str]:
        """The ``bwrap`` command line that runs ``command`` confined, in ``workspace``.

        With ``script``, that file is bound read-only at :data:`SCRIPT_PATH`,
        where ``command`` can run it. Looks at the file system (which masked
        paths exist, where the hidden ones really are), so async code calls
        it in a thread.

        Raises:
            ToolError: ``workspace`` is not absolute, or lies inside a path
                the sandbox hides (a command could not see it).
        """
        if not workspace.is_absolute():
            raise ToolError(f"the workspace {str(workspace)!r} must be an absolute path")
        ws = os.path.realpath(workspace)
        argv = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        emptied = [directory for directory in EMPTY_DIRS if os.path.isdir(directory)]
        for directory in emptied:
            argv += ["--tmpfs", directory]
        if self.network:
            for link in _RUN_LINKS:
                real = os.path.realpath(link)
                if real != link and _inside(real, "/run") and os.path.exists(real):
                    argv += ["--ro-bind", real, real]
        argv += ["--bind", ws, ws]
        found = self._existing()
        for path in found:
            if _inside(ws, path):
                raise ToolError(
                    f"the workspace {str(workspace)!r} lies inside {path!r}, which the "
                    "sandbox hides, so no command could see it; use a workspace elsewhere"
                )
        covered = _visible(found, ws, emptied)
        argv += _pin_ancestors(ws, list(covered))
        for path, is_dir in covered.items():
            argv += ["--tmpfs", path] if is_dir else ["--ro-bind", "/dev/null", path]
        if script is not None:
            argv += ["--ro-bind", str(script), SCRIPT_PATH]
        argv += ["--chdir", ws, "--cap-drop", "ALL"]
        argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts"]
        if not self.network:
            argv.append("--unshare-net")
        return [*argv, "--die-with-parent", "--", *command]

    def box_script(self, workspace: Path, files: JobFiles) -> str:
        """The ``/bin/sh`` text that runs ``files.cmd`` in the sandbox (the job's ``ID.box``).

        It execs ``bwrap`` with SIGTERM ignored (module docstring), so the
        job's pid stays the one the wrapper wrote, and bwrap exits with the
        command's status. The jobs root (the parent of the owner's directory)
        is hidden as well as ``hide``, so no job reads another's commands or
        output. Blocking like `argv`.
        """
        jobs_root = str(files.directory.parent)
        sandbox = attrs.evolve(self, hide=(*self.hide, jobs_root))
        command = [*RESET_TERM, "/bin/sh", SCRIPT_PATH]
        argv = sandbox.argv(workspace, command, script=files.cmd)
        return (
            "# callboard: runs this job's command in a bubblewrap sandbox "
            "(callboard/tools/_sandbox.py)\n"
            "trap '' TERM\n"
            f"exec {shlex.join(argv)}\n"
        )

    def _existing(self) -> dict[str, bool]:
        """Every secret and hidden path that exists, by its real path: is it a directory."""
        found: dict[str, bool] = {}
        files = [match for pattern in SECRET_FILES for match in sorted(glob.glob(pattern))]
        for path in [*files, *SECRET_DIRS, *self.hide]:
            if os.path.exists(path):
                found.setdefault(os.path.realpath(path), os.path.isdir(path))
        return found


def _visible(found: dict[str, bool], workspace: str, emptied: Sequence[str]) -> dict[str, bool]:
    """The paths of ``found`` that a command could see, so must be covered.

    Not those below an emptied directory outside the workspace, nor those
    below another covered directory: covering them would only make an empty
    mount point there, which shows the hidden path's name.
    """
    return {
        path: is_dir
        for path, is_dir in found.items()
        if (_inside(path, workspace) or not any(_inside(path, d) for d in emptied))
        and not any(_inside(path, d) and path != d for d, dir_ in found.items() if dir_)
    }


def _pin_ancestors(workspace: str, covered: Sequence[str]) -> list[str]:
    """``--bind A A`` for each directory strictly between the workspace and a path
    covered inside it: a mount point cannot be renamed, a plain directory can."""
    pinned: set[str] = set()
    for path in covered:
        if path == workspace or not _inside(path, workspace):
            continue
        parent = os.path.dirname(path)
        while parent != workspace:
            pinned.add(parent)
            parent = os.path.dirname(parent)
    argv: list[str] = []
    for directory in sorted(pinned, key=lambda p: (p.count("/"), p)):  # parents first
        argv += ["--bind", directory, directory]
    return argv


async def probe_sandbox(sandbox: Sandbox | None = None) -> str | None:
    """None if ``sandbox`` (default: ``Sandbox()``) runs commands on this machine; else why not.

    Runs ``/bin/true`` in it once, the way a job runs (after ``RESET_TERM``),
    in a temporary workspace, so a host where ``bwrap`` is installed but
    cannot make namespaces (a container without the rights) counts as not
    working. For ``serve``: sandbox by default where this says it works.
    """
    sandbox = Sandbox() if sandbox is None else sandbox
    if shutil.which(sandbox.bwrap) is None:
        await trio.lowlevel.checkpoint()
        return f"{sandbox.bwrap} is not installed (Debian package bubblewrap)"
    workspace = Path(await trio.to_thread.run_sync(tempfile.mkdtemp))
    try:
        command = [*RESET_TERM, "/bin/true"]
        argv = await trio.to_thread.run_sync(sandbox.argv, workspace, command)
        with trio.move_on_after(_PROBE_TIMEOUT):
            done = await trio.run_process(
                argv, stdin=subprocess.DEVNULL, capture_stdout=True, capture_stderr=True,
                check=False,
            )  # fmt: skip
            if done.returncode == 0:
                return None
            reason = done.stderr.decode("utf-8", "replace").strip() or f"exit {done.returncode}"
            return f"{sandbox.bwrap} does not work here: {reason}"
        return f"{sandbox.bwrap} did not finish /bin/true within {_PROBE_TIMEOUT:g}s"
    finally:
        with trio.move_on_after(_PROBE_TIMEOUT, shield=True):
            await trio.to_thread.run_sync(os.rmdir, workspace)
