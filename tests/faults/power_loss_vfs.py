"""Power loss for SQLite: a VFS in Python (APSW), modelled on SQLite's test6.c.

Writes go to the real files, but for each file the VFS remembers what every
sector it wrote held at the file's last xSync, and which bytes were written
since. At the power loss it decides each such sector's fate as test6 does
(the new bytes reached the disk, or did not, or came out garbled), puts the
sectors back accordingly and SIGKILLs the process before anything else is
written: what is left on disk is what a machine that lost power could have.
Garbling touches only the bytes that were written, the promise of
``SQLITE_IOCAP_POWERSAFE_OVERWRITE`` that the unix VFS makes. File creation
and deletion count as durable (test6 does not model directories either), and
the ``-shm`` file is left as it was: SQLite rebuilds it from the WAL when the
first connection opens the database.

The store uses Python's ``sqlite3``, which links the system's SQLite, while
the APSW wheel embeds a copy of its own, private to it: a VFS registered in
APSW is unknown to ``sqlite3``. So `install` registers the VFS in APSW's
copy, asks that copy for the ``sqlite3_vfs`` struct it made (the C interface
SQLite keeps stable across versions) and registers the same functions in the
system library with ctypes. The store then opens ``file:...?vfs=NAME`` and
every read and write of its files runs through this module and, beneath it,
the unix VFS of APSW's copy, which alone holds the files' locks.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import signal
import threading
from collections import Counter
from collections.abc import Callable

import apsw

__all__ = ["FATES", "SECTOR", "PowerLoss", "install"]

SECTOR = 512
"""The unit a power loss tears: each sector written since the last sync has its own fate."""

FATES = ("reached the disk", "never did", "garbled")
"""What may become of a sector written since its file's last sync, each as likely."""

_SQLITE_FCNTL_VFS_POINTER = 27


class _Unsynced:
    """One file's writes since its last xSync: each sector's synced bytes, and
    the ranges of it written since."""

    def __init__(self, synced_size: int) -> None:
        self.synced_size = synced_size
        self.synced: dict[int, bytes] = {}
        self.written: dict[int, list[tuple[int, int]]] = {}


class PowerLoss:
    """The files' unsynced writes, and the power loss at the ``at``-th write or
    sync of the process (never, if 0)."""

    def __init__(self, at: int, seed: int) -> None:
        self.at = at
        self.events = 0
        self._random = random.Random(seed)
        # Every write, truncate and sync holds this, and a power loss holds it
        # until the process is dead: nothing reaches a file after the loss.
        self._lock = threading.RLock()
        self._files: dict[str, _Unsynced] = {}
        self._fds: dict[str, int] = {}

    def _fd(self, path: str) -> int:
        # Opened once and never closed: closing any descriptor of a file drops
        # every POSIX lock the process holds on it, SQLite's included.
        if path not in self._fds:
            self._fds[path] = os.open(path, os.O_RDWR)
        return self._fds[path]

    def _event(self) -> None:
        self.events += 1
        if self.events == self.at:
            self.now()

    def before_write(self, path: str, offset: int, end: int) -> None:
        """Remember what the sectors of ``[offset, end)`` held at the last sync."""
        with self._lock:
            self._event()
            fd = self._fd(path)
            unsynced = self._files.get(path)
            if unsynced is None:
                unsynced = self._files[path] = _Unsynced(os.fstat(fd).st_size)
            for sector in range(offset // SECTOR, (end - 1) // SECTOR + 1):
                if sector not in unsynced.synced:
                    unsynced.synced[sector] = os.pread(fd, SECTOR, sector * SECTOR)
                low = max(offset, sector * SECTOR) - sector * SECTOR
                high = min(end, (sector + 1) * SECTOR) - sector * SECTOR
                unsynced.written.setdefault(sector, []).append((low, high))

    def before_truncate(self, path: str, size: int) -> None:
        with self._lock:
            current = os.fstat(self._fd(path)).st_size
        if size < current:
            self.before_write(path, size, current)

    def sync(self, path: str, sync: Callable[[], None]) -> None:
        """Run ``sync``; the file's writes are then safe from a power loss."""
        with self._lock:
            self._event()
            sync()
            self._files.pop(path, None)

    def forget(self, path: str) -> None:
        """``path`` was deleted: a file made there later is another one."""
        with self._lock:
            self._files.pop(path, None)
            self._fds.pop(path, None)  # left open, on the deleted file (see _fd)

    def now(self) -> None:
        """Lose power: give each unsynced sector its fate, print how many got
        which (``{"power lost": {fate: sectors}}``), then SIGKILL this process."""
        with self._lock:
            fates: Counter[str] = Counter()
            for path, unsynced in self._files.items():
                self._tear(self._fd(path), unsynced, fates)
            # One write(2) of the whole line: print() writes the text and the
            # newline apart, and the trio thread's lines could fall between.
            os.write(1, (json.dumps({"power lost": fates}) + "\n").encode())
            os.kill(os.getpid(), signal.SIGKILL)

    def _tear(self, fd: int, unsynced: _Unsynced, fates: Counter[str]) -> None:
        pick = self._random.choice
        images: dict[int, bytes] = {}
        for sector, synced in unsynced.synced.items():
            fate = pick(FATES)
            fates[fate] += 1
            if fate == "reached the disk":
                images[sector] = os.pread(fd, SECTOR, sector * SECTOR)
            elif fate == "never did":
                images[sector] = synced
            else:
                ranges = unsynced.written[sector]
                image = bytearray(synced.ljust(max(high for _, high in ranges), b"\0"))
                for low, high in ranges:
                    image[low:high] = self._random.randbytes(high - low)
                images[sector] = bytes(image)
        # The file ends where its last surviving byte is, and never before
        # the bytes no write touched since the sync.
        untouched = min(unsynced.synced_size, os.fstat(fd).st_size)
        size = max([untouched] + [s * SECTOR + len(i) for s, i in images.items() if i])
        os.ftruncate(fd, size)
        for sector, image in images.items():
            if sector * SECTOR < size:
                os.pwrite(fd, image.ljust(SECTOR, b"\0")[: size - sector * SECTOR], sector * SECTOR)


def _path(name: object) -> str | None:
    if isinstance(name, apsw.URIFilename):
        return name.filename()
    return name if isinstance(name, str) else None


class _File(apsw.VFSFile):
    # The method names are APSW's (and SQLite's).

    def __init__(self, loss: PowerLoss, name: object, flags: list[int]) -> None:
        super().__init__("", name, flags)  # type: ignore[arg-type]
        self._loss = loss
        self._path = _path(name)

    def xWrite(self, data, offset: int) -> None:
        if self._path is not None:
            self._loss.before_write(self._path, offset, offset + len(data))
        super().xWrite(data, offset)

    def xTruncate(self, newsize: int) -> None:
        if self._path is not None:
            self._loss.before_truncate(self._path, newsize)
        super().xTruncate(newsize)

    def xSync(self, flags: int) -> None:
        if self._path is None:
            super().xSync(flags)
        else:
            self._loss.sync(self._path, lambda: super(_File, self).xSync(flags))


class _Vfs(apsw.VFS):
    def __init__(self, name: str, loss: PowerLoss) -> None:
        super().__init__(name, "")
        self._loss = loss

    def xOpen(self, name, flags):
        return _File(self._loss, name, flags)

    def xDelete(self, filename: str, syncdir: bool) -> None:
        self._loss.forget(filename)
        super().xDelete(filename, syncdir)


class _SqliteVfs(ctypes.Structure):
    """``struct sqlite3_vfs`` up to version 3 (sqlite3.h)."""

    _fields_ = [
        ("iVersion", ctypes.c_int),
        ("szOsFile", ctypes.c_int),
        ("mxPathname", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("zName", ctypes.c_char_p),
        ("pAppData", ctypes.c_void_p),
        # xOpen ... xGetLastError, xCurrentTimeInt64, then the three system calls
        *((f"method{i}", ctypes.c_void_p) for i in range(16)),
    ]


_installed: list[object] = []  # what the system library points into, alive for good


def install(name: str, loss: PowerLoss) -> None:
    """Register a VFS called ``name`` with Python's ``sqlite3`` (and APSW)."""
    import _sqlite3  # the C module of Python's sqlite3: it names the library it links

    vfs = _Vfs(name, loss)
    probe = apsw.Connection(":memory:", vfs=name)
    pointer = ctypes.c_void_p()
    assert probe.file_control("main", _SQLITE_FCNTL_VFS_POINTER, ctypes.addressof(pointer))
    probe.close()
    made = _SqliteVfs.from_address(pointer.value)
    assert made.iVersion >= 1 and made.zName == name.encode(), (made.iVersion, made.zName)
    copy = _SqliteVfs()
    ctypes.memmove(ctypes.addressof(copy), pointer.value, ctypes.sizeof(_SqliteVfs))
    copy.pNext = None  # the system library links its own list through it
    copy.iVersion = min(made.iVersion, 3)
    library = ctypes.CDLL(_sqlite3.__file__)
    library.sqlite3_vfs_register.argtypes = [ctypes.c_void_p, ctypes.c_int]
    assert library.sqlite3_vfs_register(ctypes.addressof(copy), 0) == 0
    _installed.extend((vfs, copy))
