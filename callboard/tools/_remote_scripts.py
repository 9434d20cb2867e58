"""The scripts an executor runs on a machine it reaches only through a shell (ssh).

Pure, like the wrapper (``_wrapper.py``): these functions only build the
``/bin/sh`` text that :class:`SshExecutor` feeds to ``sh -s`` on the far side,
one that waits for a job's exit file and one that stops a process group the
way ``_procs.stop_group`` does here. Both read ``/proc/PID/stat`` with
``awk`` and poll with short sleeps, and say what they found in their exit
status.
"""

from __future__ import annotations

import math
import shlex

from callboard.errors import ToolError

from ._wrapper import JobFiles

__all__ = ["REMOTE_PAUSE", "build_stop_group_script", "build_wait_exit_script"]

# Scripts for an executor that reaches the job's machine only through a shell
# (ssh). Each is fed to `sh -s` there. They poll with `sleep 0.05`, which GNU
# and busybox sleep take; a POSIX-only sleep falls back to whole seconds.

#: Seconds between two polls of a remote script.
REMOTE_PAUSE = 0.05

# Sets `live` if the /proc/PID/stat line on stdin or in the file argument is
# a process that is not a zombie, in group `g` if set, started at `st` if
# set. Fields are counted from the last ")" since the name may hold spaces.
_AWK_LIVE = """'
    { i = length($0); while (i > 0 && substr($0, i, 1) != ")") i--
      split(substr($0, i + 2), f, " ")
      if (f[1] != "Z" && f[1] != "X" && f[1] != "x" \\
          && (g == "" || f[3] == g) && (st == "" || f[20] == st)) live = 1 }
    END { exit !live }'"""

_STOP_GROUP = """\
g={pgid}
alive() {{
  cat /proc/[0-9]*/stat 2>/dev/null | awk -v g="$g" -v st= {awk}
}}
pause() {{ sleep {pause} 2>/dev/null || sleep 1; }}
kill -s TERM -- "-$g" 2>/dev/null || exit 0
i=0
while alive; do
  [ "$i" -ge {term_polls} ] && break
  pause; i=$((i + 1))
done
alive || exit 0
kill -s KILL -- "-$g" 2>/dev/null
i=0
while alive; do
  [ "$i" -ge {kill_polls} ] && exit 1
  pause; i=$((i + 1))
done
exit 0
"""

_WAIT_EXIT = """\
f={path}
alive() {{
  awk -v g= -v st={start_time} {awk} /proc/{pid}/stat 2>/dev/null
}}
i=0
gone=0
while [ ! -e "$f" ]; do
  [ "$i" -ge {polls} ] && exit 1
  if ! alive; then
    gone=$((gone + 1))
    [ "$gone" -gt {gone_polls} ] && exit 4
  fi
  printf . || exit 1
  sleep {pause} 2>/dev/null || sleep 1
  i=$((i + 1))
done
exit 0
"""


def _polls(seconds: float) -> int:
    return max(1, math.ceil(seconds / REMOTE_PAUSE))


def build_stop_group_script(pgid: int, *, grace: float, kill_wait: float) -> str:
    """A script that stops process group ``pgid`` the way ``_procs.stop_group`` does.

    SIGTERM, up to ``grace`` seconds for the group to go, SIGKILL, up to
    ``kill_wait`` more. Exits 0 once the group is gone (zombies do not count)
    and 1 if it outlived SIGKILL.
    """
    if pgid <= 1:
        raise ToolError(f"refusing to signal process group {pgid}: it is not a job's group")
    return _STOP_GROUP.format(
        pgid=int(pgid),
        awk=_AWK_LIVE,
        pause=REMOTE_PAUSE,
        term_polls=_polls(grace),
        kill_polls=_polls(kill_wait),
    )


def build_wait_exit_script(
    files: JobFiles, pid: int, *, start_time: int | None, seconds: float, gone_wait: float
) -> str:
    """A script that waits up to ``seconds`` for the job's exit file.

    Exits 0 when it is there; 4 when process ``pid`` (started at
    ``start_time``, if given) has been gone for ``gone_wait`` seconds with
    no exit file; 1 when ``seconds`` are up. It prints a dot per poll, so
    once the reader is gone a broken pipe ends it early.
    """
    return _WAIT_EXIT.format(
        path=shlex.quote(str(files.exit)),
        pid=int(pid),
        start_time="" if start_time is None else int(start_time),
        awk=_AWK_LIVE,
        polls=_polls(seconds),
        gone_polls=_polls(gone_wait),
        pause=REMOTE_PAUSE,
    )
