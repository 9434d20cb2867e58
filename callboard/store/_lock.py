"""One process owns a data directory: an flock the kernel drops when the process dies."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..errors import DataDirectoryLocked

__all__ = ["DirectoryLock"]


class DirectoryLock:
    """An exclusive, non-blocking lock on ``DIR/LOCK`` holding the owner's pid.

    flock (not a pid file) because the kernel releases it on SIGKILL too, so a
    killed runtime never leaves a stale lock behind.
    """

    def __init__(self, directory: Path) -> None:
        self.path = directory / "LOCK"
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise DataDirectoryLocked(
                f"the data directory {str(self.path.parent)!r} is in use by another runtime "
                f"(pid {owner}); stop that process or use another directory"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
