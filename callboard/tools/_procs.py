"""Process identity and control for jobs, read from ``/proc`` (Linux).

A job outlives the runtime, so the runtime finds it again by pid. Pids are
reused, so a pid alone is no identity: the pair (pid, start time) is. The
start time is field 22 of ``/proc/PID/stat`` (clock ticks since boot); a new
process that got the same pid has a later one.

A dead process whose parent has not reaped it yet (a zombie) still has a
``/proc`` entry and still counts for ``kill(pid, 0)``. On hosts whose init
does not reap orphans it stays forever, so every check here treats a zombie
as gone, or a stopped job would look alive until the machine restarts.
"""

from __future__ import annotations

import os
import signal

import attrs
import trio

from callboard.errors import ToolError

__all__ = [
    "KILL_WAIT",
    "ProcStat",
    "group_alive",
    "is_same_process",
    "parse_stat",
    "process_start_time",
    "read_stat",
    "signal_group",
    "stop_group",
    "wait_group_gone",
]

#: How long ``stop_group`` waits for a group to vanish after SIGKILL. SIGKILL
#: cannot be caught, so only a process stuck in the kernel takes this long.
KILL_WAIT = 5.0
_POLL_FIRST = 0.002
_POLL_MAX = 0.05
_GONE_STATES = frozenset("ZXx")


@attrs.frozen
class ProcStat:
    """The fields of ``/proc/PID/stat`` that a job needs."""

    pid: int
    state: str
    ppid: int
    pgrp: int
    session: int
    start_time: int

    @property
    def alive(self) -> bool:
        """Running or sleeping, not a zombie waiting to be reaped."""
        return self.state not in _GONE_STATES


def parse_stat(text: str) -> ProcStat | None:
    """Parse one ``/proc/PID/stat`` line, or return None if it is not one.

    The second field is the command name in parentheses, and the name itself
    may hold spaces and parentheses (``a) (b``), so the fields are counted
    from the *last* ``)``, never by splitting the whole line.
    """
    open_paren = text.find("(")
    close_paren = text.rfind(")")
    if open_paren < 1 or close_paren < open_paren:
        return None
    rest = text[close_paren + 1 :].split()
    # rest[0] is field 3 (state), so field N is rest[N - 3].
    if len(rest) < 20:
        return None
    try:
        return ProcStat(
            pid=int(text[:open_paren]),
            state=rest[0],
            ppid=int(rest[1]),
            pgrp=int(rest[2]),
            session=int(rest[3]),
            start_time=int(rest[19]),
        )
    except ValueError:
        return None


def read_stat(pid: int) -> ProcStat | None:
    """The stat of ``pid`` now, or None if there is no such process."""
    if pid < 1:
        return None
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            return parse_stat(stat.read())
    except (FileNotFoundError, ProcessLookupError):
        return None


def process_start_time(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot, or None if there is no such process."""
    stat = read_stat(pid)
    return None if stat is None else stat.start_time


def is_same_process(pid: int, start_time: int) -> bool:
    """True if ``pid`` is alive and is the very process that started at ``start_time``.

    False for a dead pid, a zombie, and a pid the kernel has given to a newer
    process since.
    """
    stat = read_stat(pid)
    return stat is not None and stat.alive and stat.start_time == start_time


def _check_pgid(pgid: int) -> None:
    if pgid <= 1 or pgid == os.getpgrp():
        raise ToolError(
            f"refusing to signal process group {pgid}: it is not a job's group "
            "(it is init's, every process's, or the runtime's own)"
        )


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to every process in group ``pgid``; False if the group is gone.

    Raises:
        ToolError: ``pgid`` is 0, 1, negative or the caller's own group, any
            of which would hit far more than one job.
    """
    _check_pgid(pgid)
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def group_alive(pgid: int) -> bool:
    """True while any process of group ``pgid`` is alive (zombies do not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    leader = read_stat(pgid)
    if leader is not None and leader.pgrp == pgid and leader.alive:
        return True
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if entry.isdigit():
            stat = read_stat(int(entry))
            if stat is not None and stat.pgrp == pgid and stat.alive:
                return True
    return False


async def wait_group_gone(pgid: int) -> None:
    """Return once group ``pgid`` has no live process; bound it with ``trio.move_on_after``.

    The group is not our child, so there is nothing to wait on but ``/proc``:
    this polls, from 2 ms doubling to 50 ms. Cancel-safe: it changes nothing.
    """
    delay = _POLL_FIRST
    while group_alive(pgid):
        await trio.sleep(delay)
        delay = min(delay * 2, _POLL_MAX)
    await trio.lowlevel.checkpoint()


async def _gone_within(pgid: int, seconds: float) -> bool:
    with trio.move_on_after(seconds):
        await wait_group_gone(pgid)
        return True
    return not group_alive(pgid)


async def stop_group(pgid: int, *, grace: float, kill_wait: float = KILL_WAIT) -> bool:
    """Stop every process in group ``pgid``: SIGTERM, ``grace`` seconds, SIGKILL, wait.

    Returns True once the group is gone, False if it outlived even SIGKILL by
    ``kill_wait`` seconds (a process stuck in the kernel). If the caller is
    cancelled mid-way the group gets SIGKILL at once, before the cancellation
    goes on: a stop that was asked for is never left half done.
    """
    if not signal_group(pgid, signal.SIGTERM):
        await trio.lowlevel.checkpoint()
        return True
    try:
        if await _gone_within(pgid, grace):
            return True
        signal_group(pgid, signal.SIGKILL)
        return await _gone_within(pgid, kill_wait)
    except BaseException:
        signal_group(pgid, signal.SIGKILL)
        raise
