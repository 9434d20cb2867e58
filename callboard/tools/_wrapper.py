"""The job wrapper: the POSIX ``/bin/sh`` text that runs one command as a detached job.

Pure: no trio, no I/O. Everything here builds strings and paths, so it can be
checked with ``sh -n`` and read in a test without running anything. The
scripts an ssh executor runs beside the wrapper are in ``_remote_scripts.py``.

Why a wrapper at all: a job must outlive the call that started it, the tool
call that timed out and even the runtime process. So the command does not run
as our child. The wrapper (the *launcher*) starts a *monitor* in a session of
its own, the monitor starts the command in yet another session (``setsid``:
its pid is its process group, so the whole group can be stopped at once), and
the launcher exits as soon as the command's pid is on disk. The monitor waits
for the command and writes its exit status. Nothing of it is ours to reap, and
a runtime killed with SIGKILL loses nothing: the files say what happened.

The files of one job, all under its owner's directory (:func:`owner_dir`)::

    ID.cmd    the command, decoded from base64 (never shell-quoted)
    ID.box    only for a sandboxed job: the script that runs ID.cmd under
              bubblewrap (``_sandbox.py``); the job runs it instead
    ID.pid    the command's pid (= its process group and session), written
              by the command itself once it leads its own session
    ID.out    stdout and stderr, interleaved
    ID.exit   the command's exit status, written when it has exited

``ID.pid`` and ``ID.exit`` are written to a ``.tmp`` name and renamed, so a
reader sees either no file or the whole number, and :func:`parse_exit_status`
also insists on the trailing newline that only a complete write has.

A sandboxed job changes nothing of this: the launcher, the monitor and the
prelude that writes the pid and redirects the output are ours and run
outside the sandbox (the job files live in the data directory, which the
sandbox hides); only ``exec /bin/sh ID.box`` enters it. The pid recorded is
then bwrap's, which execs in place of the prelude, so it still leads the
process group and still exits with the command's status.
"""

from __future__ import annotations

import base64
import re
import secrets
import shlex
import string
from pathlib import Path

import attrs

from callboard.errors import ToolError

__all__ = [
    "JobFiles",
    "build_wrapper",
    "new_job_id",
    "owner_dir",
    "parse_exit_status",
    "parse_pid",
    "validate_job_id",
]

_JOB_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_OWNER_SAFE = frozenset(string.ascii_letters + string.digits + "_-")
#: Longest directory name an owner address may map to (file names stop at 255 bytes).
OWNER_DIR_MAX = 200
_NUMBER_LINE = re.compile(r"([0-9]{1,10})\n")


def validate_job_id(job_id: object) -> str:
    """Return ``job_id`` if it is safe to use in a file name, else raise ToolError.

    A job id comes back from the model (``job_output(id=...)``), so it is
    untrusted: it must never be able to name a file outside its owner's
    directory. Only letters, digits, ``_`` and ``-`` pass, 1 to 64 of them.
    """
    if not isinstance(job_id, str) or _JOB_ID.fullmatch(job_id) is None:
        raise ToolError(
            f"job id {job_id!r} is not valid: a job id is 1 to 64 letters, digits, "
            "'_' or '-'; use an id that job_list shows"
        )
    return job_id


def new_job_id() -> str:
    """A fresh random job id: 12 hex digits, unguessable by another owner."""
    return secrets.token_hex(6)


def owner_dir(root: Path, owner_address: str) -> Path:
    """The directory under ``root`` that holds the job files of one owner.

    The address (``session/s1``) becomes one path component: letters, digits,
    ``_`` and ``-`` stay, every other byte becomes ``%XX``. The mapping is
    one-to-one, so two owners never share a directory, and it has no ``/``
    and no ``.``, so no address can climb out of ``root``.
    """
    if not root.is_absolute():
        raise ToolError(f"the jobs root {str(root)!r} must be an absolute path")
    if not isinstance(owner_address, str) or not owner_address:
        raise ToolError(f"owner address {owner_address!r} is empty; expected KIND/NAME")
    if any(ord(char) < 0x20 or char == "\x7f" for char in owner_address):
        raise ToolError(f"owner address {owner_address!r} contains control characters")
    try:
        raw = owner_address.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolError(f"owner address {owner_address!r} is not valid text") from None
    name = "".join(chr(b) if chr(b) in _OWNER_SAFE else f"%{b:02X}" for b in raw)
    if len(name) > OWNER_DIR_MAX:
        raise ToolError(
            f"owner address {owner_address[:40]!r}... is too long for a directory name "
            f"({len(name)} characters once encoded, at most {OWNER_DIR_MAX})"
        )
    return root / name


def _absolute(_instance: object, attribute: attrs.Attribute[Path], value: Path) -> None:
    if not value.is_absolute():
        raise ToolError(f"{attribute.name} {str(value)!r} must be an absolute path")


def _job_id(_instance: object, _attribute: attrs.Attribute[str], value: str) -> None:
    validate_job_id(value)


@attrs.frozen
class JobFiles:
    """Where the files of one job live: ``directory/ID.{cmd,box,pid,out,exit}``.

    Only the directory and the id are stored; the paths are derived, so a
    stored ``JobFiles`` can never point one file somewhere else.
    """

    directory: Path = attrs.field(validator=_absolute)
    job_id: str = attrs.field(validator=_job_id)

    @classmethod
    def for_job(cls, directory: Path, job_id: str) -> JobFiles:
        """The files of ``job_id`` in ``directory`` (an :func:`owner_dir`)."""
        return cls(directory=directory, job_id=job_id)

    def _file(self, suffix: str) -> Path:
        return self.directory / f"{self.job_id}.{suffix}"

    @property
    def cmd(self) -> Path:
        """The command itself, as the user wrote it."""
        return self._file("cmd")

    @property
    def box(self) -> Path:
        """The sandbox script that runs ``cmd``; only a sandboxed job has one."""
        return self._file("box")

    @property
    def pid(self) -> Path:
        """The command's pid, which is also its process group and session id."""
        return self._file("pid")

    @property
    def out(self) -> Path:
        """The command's stdout and stderr, interleaved in the order written."""
        return self._file("out")

    @property
    def exit(self) -> Path:
        """The command's exit status; present only once it has exited."""
        return self._file("exit")

    @property
    def every_file(self) -> tuple[Path, ...]:
        """Every file the wrapper may create, temporaries included, for removal."""
        return (
            self.cmd,
            self.box,
            self.pid,
            self.out,
            self.exit,
            self._file("pid.tmp"),
            self._file("exit.tmp"),
        )


# The command's own prelude, run under setsid (so it leads its own session):
# it records its pid, tells the launcher through fd 3, and becomes the command
# (or, for a sandboxed job, bwrap running the command: ID.box).
# Writing the pid from *inside* the new session means that once the pid file
# exists the process group exists too, so a stop that follows at once works.
# $1 = job directory, $2 = job id. No single quote may appear in it.
_CHILD = """\
d=$1 id=$2
printf "%s\\n" "$$" >"$d/$id.pid.tmp" && mv -f "$d/$id.pid.tmp" "$d/$id.pid" || exit 125
printf "%s\\n" "$$" >&3
s=$d/$id.cmd
[ -e "$d/$id.box" ] && s=$d/$id.box
exec /bin/sh "$s" </dev/null >"$d/$id.out" 2>&1 3>&-
"""

# The monitor, in a session of its own: it starts the command (through _CHILD)
# in the background, lets go of the launcher's pipe, waits and records the
# exit status. The subshell is what waits: the outer monitor exits at once, so
# the launcher's command substitution does not wait for the job.
# $1 = the child prelude, $2 = job directory, $3 = job id. No single quote.
_MONITOR = """\
exec 2>/dev/null
c=$1 d=$2 id=$3
(
  setsid /bin/sh -c "$c" callboard-job "$d" "$id" 3>&1 </dev/null >/dev/null &
  pid=$!
  exec >/dev/null
  wait "$pid"
  status=$?
  printf "%s\\n" "$status" >"$d/$id.exit.tmp" && mv -f "$d/$id.exit.tmp" "$d/$id.exit"
) &
"""

_LAUNCHER = """\
# callboard job {job_id}: runs one command detached (callboard/tools/_wrapper.py)
cd -- {cwd} || exit 125
d={directory}
id={job_id}
mkdir -p -m 700 -- "$d" || exit 125
printf '%s' {payload} | base64 -d >"$d/$id.cmd" || exit 125
{box}m='{monitor}'
c='{child}'
pid=$(setsid /bin/sh -c "$m" callboard-monitor "$c" "$d" "$id" </dev/null)
case $pid in
  ''|*[!0-9]*)
    rm -f -- "$d/$id.cmd" "$d/$id.box" "$d/$id.out" "$d/$id.pid" "$d/$id.pid.tmp"
    echo "callboard: job $id did not start" >&2
    exit 125
    ;;
esac
exit 0
"""


_BOX = """\
printf '%s' {payload} | base64 -d >"$d/$id.box" || {{
  rm -f -- "$d/$id.cmd" "$d/$id.box"; exit 125
}}
"""


def build_wrapper(command: str, files: JobFiles, *, cwd: Path, box: str | None = None) -> str:
    """The ``/bin/sh`` script that starts ``command`` as the job ``files`` names.

    The command travels base64-encoded and is decoded into ``ID.cmd``, which
    ``/bin/sh`` then runs: it is never inside a quoted shell string, so quotes,
    ``$VAR``, backticks and newlines in it mean what they mean to the shell
    and nothing to the wrapper. Our own paths are quoted with
    :func:`shlex.quote`. The script exits 0 once the command runs and its pid
    is in ``ID.pid``, and 125 (with a reason on stderr) if it could not start.
    It reads nothing from its stdin, so it can be fed to ``sh -s``.

    ``box`` is the text of ``ID.box`` (``Sandbox.box_script``): given, it
    travels base64-encoded too, and the job runs it instead of ``ID.cmd``.

    Raises:
        ToolError: the command is not valid text, or ``cwd`` is not absolute.
    """
    if not cwd.is_absolute():
        raise ToolError(f"the working directory {str(cwd)!r} must be an absolute path")
    try:
        payload = base64.b64encode(command.encode("utf-8")).decode("ascii")
    except UnicodeEncodeError:
        raise ToolError("the command is not valid text (it contains a lone surrogate)") from None
    box_part = ""
    if box is not None:
        box_payload = base64.b64encode(box.encode("utf-8")).decode("ascii")
        box_part = _BOX.format(payload=box_payload or "''")
    return _LAUNCHER.format(
        box=box_part,
        job_id=files.job_id,
        cwd=shlex.quote(str(cwd)),
        directory=shlex.quote(str(files.directory)),
        payload=payload or "''",
        monitor=_MONITOR,
        child=_CHILD,
    )


def parse_pid(text: str | None) -> int | None:
    """The pid in a pid file's text, or None if there is no whole, positive one."""
    return _parse_number(text, minimum=2)


def parse_exit_status(text: str | None) -> int | None:
    """The status in an exit file's text, or None if the file is missing or partial.

    Only ``digits + newline`` counts: the newline is the last byte written, so
    a status without it was not written whole.
    """
    return _parse_number(text, minimum=0)


def _parse_number(text: str | None, *, minimum: int) -> int | None:
    if text is None:
        return None
    match = _NUMBER_LINE.fullmatch(text)
    if match is None:
        return None
    value = int(match.group(1))
    return value if value >= minimum else None
