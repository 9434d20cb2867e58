"""Failing I/O calls for SQLite, counted for the whole process (a `FileHooks`).

`IoFaults` makes the process's ``sync_at``-th sync of a database file fail
(SQLITE_IOERR_FSYNC, what the unix VFS answers when fdatasync fails), or
its writes ``first`` to ``last`` (SQLITE_FULL, as for ENOSPC, or
SQLITE_IOERR_WRITE, as for EIO); the failing call is not made, as strace's
injection does not make the system call. It runs under power_loss_vfs.py's
VFS: every read and write of the store's files goes through this module.

Why not strace: its counters are per thread. The store commits on the trio
thread when nothing else could run meanwhile, and in its writer's thread
otherwise, so a count per thread would not say which commit a fault meets,
and two threads could each meet one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import apsw

__all__ = ["WRITE_ERRORS", "IoFaults"]

WRITE_ERRORS = {"ENOSPC": apsw.SQLITE_FULL, "EIO": apsw.SQLITE_IOERR_WRITE}
"""What the unix VFS answers for a write that failed with each errno."""


class IoFaults:
    """Counts the writes and syncs of the database files; fails the chosen ones."""

    def __init__(
        self, *, sync_at: int = 0, writes: tuple[int, int] = (0, 0), write_error: str = "EIO"
    ) -> None:
        self.sync_at = sync_at
        self.first, self.last = writes
        self._write_error = WRITE_ERRORS[write_error]
        self.syncs = 0
        self.writes = 0
        # Both the trio thread and the writer's thread write and sync.
        self._lock = threading.Lock()

    def before_write(self, path: str, offset: int, end: int) -> None:
        with self._lock:
            self.writes += 1
            n = self.writes
        if self.first <= n <= self.last:
            raise apsw.exception_for(self._write_error)

    def before_truncate(self, path: str, size: int) -> None:
        pass

    def sync(self, path: str, sync: Callable[[], None]) -> None:
        with self._lock:
            self.syncs += 1
            n = self.syncs
        if n == self.sync_at:
            raise apsw.exception_for(apsw.SQLITE_IOERR_FSYNC)
        sync()

    def forget(self, path: str) -> None:
        pass
