"""The embedded store: SQLite in WAL mode with ``synchronous=FULL`` and group commit.

One writer task takes every operation waiting in its queue, runs them in one
transaction on a worker thread and acknowledges them all after the one
COMMIT (one fsync). Reads use a second connection on the trio thread: they
are short, indexed and hold no transaction across an ``await``. Pages of
events for a replay, which may be big, are read on worker threads instead
(`EventReaders`). Between batches the writer keeps the WAL under a bound
(see ``_wal``).

This module opens and closes the files; the writer's loop is in ``_writer``,
the reads' SQL in ``_sqlite_reads`` and each write's statements in ``_ops_mailbox``
and ``_ops_commit``.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import trio

from ..errors import StoreUnavailable
from . import _retention as retention
from . import _sqlite_ops as ops
from ._commit_place import CommitPlace
from ._company import COMMIT_DELAY, Company
from ._event_reads import EventReaders
from ._full import FullDisk
from ._lock import DirectoryLock
from ._op_queue import _Op
from ._protocol import Store
from ._records import StoreStatistics
from ._rhythm import GroupCommits
from ._schema import prepare as prepare_schema
from ._single_node import SingleNode
from ._sqlite_reads import SqliteReads
from ._wal import WalCheckpointer, limit_wal
from ._worker import WorkerThread
from ._writer import BatchWriter
from ._writes import StoreWrites

__all__ = ["SqliteStore", "open_sqlite_store"]

_DATABASE = "callboard.sqlite3"

# Pages of events read at once (each on a worker thread with its own
# connection): as many as our machines have cores; more replays wait their turn.
_EVENT_READ_THREADS = 2

# A private seam, set only in tests/faults/test_power_loss.py's children: the VFS the
# files open through (None: SQLite's default), and the synchronous level: FULL, as
# NORMAL may lose acknowledged commits on power loss (that test's control shows it).
_VFS: str | None = None
_SYNCHRONOUS = "FULL"


def _connect(path: Path) -> sqlite3.Connection:
    where = path if _VFS is None else f"{path.absolute().as_uri()}?vfs={_VFS}"
    conn = sqlite3.connect(
        where, isolation_level=None, check_same_thread=False, uri=_VFS is not None
    )
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={_SYNCHRONOUS}")
    conn.execute("PRAGMA busy_timeout=5000")
    limit_wal(conn)
    return conn


def _make_private(directory: Path) -> None:
    """Take group and other access away from a data directory made before this rule
    (the files inside then cannot be reached by anyone but the owner)."""
    mode = directory.stat().st_mode & 0o777
    if mode & 0o077:
        os.chmod(directory, mode & 0o700)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class SqliteStore(BatchWriter, SqliteReads, StoreWrites, SingleNode):
    """The store behind the runtime. Writes are async and durable on return;
    reads are sync and see only what was committed."""

    def __init__(
        self,
        directory: Path,
        *,
        clock: Callable[[], float] = time.time,
        max_batch: int = 2048,
        queue_size: int = 16384,
        max_cached_actors: int = 10_000,
        commit_delay: float = COMMIT_DELAY,
    ) -> None:
        self.directory = directory
        self._clock = clock
        self._max_batch = max_batch
        self._send, self._receive = trio.open_memory_channel[_Op](queue_size)
        self._writer: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        self._batches = 0
        self._operations = 0
        self._largest = 0
        self._commit_seconds = 0.0
        # The writer's counters and deferred rows: this store's alone, and
        # used only by its writer, one batch at a time.
        self.life = secrets.randbits(62)
        self._state = ops.WriterState(max_cached_actors, life=self.life)
        self._wal = WalCheckpointer(directory / f"{_DATABASE}-wal")
        # Fail-stop (see _stop_after_io_error): the I/O error that stopped the
        # store, until it has reopened its files and recovered from the WAL.
        self._stopped_by: sqlite3.Error | None = None
        self._recoveries = 0
        self._full = FullDisk(directory)
        self._group_commits = GroupCommits()
        self._worker = WorkerThread("callboard writer")
        self._commit_place = CommitPlace()
        self._company = Company(commit_delay)
        self.key_clock: Callable[[], float] = clock  # stamps keys (see Runtime._key_clock)
        self.on_recovered: Callable[[], None] | None = None
        """Called on the trio thread once the store has recovered from a fail-stop:
        the runtime re-reads every active mailbox, as the WAL may hold writes whose
        senders were told the outcome is unknown."""
        self._event_reads = EventReaders(directory / _DATABASE, connections=_EVENT_READ_THREADS)

    # -- lifecycle -----------------------------------------------------------

    def _open_files(self) -> None:
        path = self.directory / _DATABASE
        fresh = not path.exists()
        self._writer = _connect(path)
        prepare_schema(self._writer, self.directory)
        self._writer.execute("PRAGMA busy_timeout=0")
        if fresh:
            _fsync_directory(self.directory)
        self._reader = _connect(path)

    def _close_files(self) -> None:
        self._event_reads.close()
        self._close_connections()

    def _close_connections(self) -> None:
        """The writer's and the reader's connections (the event readers keep theirs)."""
        for conn in (self._reader, self._writer):
            if conn is not None:
                conn.close()
        self._reader = self._writer = None

    def _reopen(self) -> None:
        # The event readers stay: they read only what was committed.
        self._close_connections()
        self._state.forget()
        self._open_files()

    @property
    def healthy(self) -> bool:
        """False from an I/O error at COMMIT until the store has recovered from it."""
        return self._stopped_by is None

    def statistics(self) -> StoreStatistics:
        return StoreStatistics(
            self._batches, self._operations, self._largest, self._commit_seconds, self._recoveries
        )

    # -- writes: the others are in `StoreWrites`, shared with PostgreSQL ----

    async def retain(
        self, policy: retention.RetentionPolicy, step: retention.RetentionStep
    ) -> retention.RetentionStep:
        """One bounded op of a retention pass, from ``step`` on (see ``_retention``)."""
        state = self._state
        return await self._submit(
            lambda conn, now: retention.retain(conn, state, policy, step), slow=True
        )


@asynccontextmanager
async def open_sqlite_store(
    directory: str | os.PathLike[str],
    *,
    clock: Callable[[], float] = time.time,
    max_batch: int = 2048,
    queue_size: int = 16384,
    max_cached_actors: int = 10_000,
    commit_delay: float = COMMIT_DELAY,
) -> AsyncIterator[SqliteStore]:
    """Lock the data directory, open the database and run the writer until exit.

    On exit the writer finishes every queued write before the files close.
    ``commit_delay``: seconds a batch of actor steps only waits for another
    write to share its COMMIT (`RuntimeConfig.commit_delay`; 0: none).
    """
    path = Path(directory)
    # Owner only: it holds the server's token and everything its actors said.
    path.mkdir(mode=0o700, parents=True, exist_ok=True)  # noqa: ASYNC240 (once, at start-up)
    _make_private(path)
    lock = DirectoryLock(path)
    lock.acquire()
    store = SqliteStore(
        path,
        clock=clock,
        max_batch=max_batch,
        queue_size=queue_size,
        max_cached_actors=max_cached_actors,
        commit_delay=commit_delay,
    )
    try:
        try:
            store._open_files()
        except sqlite3.Error as exc:
            raise StoreUnavailable(
                f"cannot open the store in {str(path)!r}: {exc} "
                f"({getattr(exc, 'sqlite_errorname', 'an SQLite error')})"
            ) from exc
        async with trio.open_nursery() as nursery:
            await nursery.start(store._run_writer)
            try:
                yield store
            finally:
                # Let queued writes finish: closing the channel ends the writer's loop.
                store._send.close()
        store._close_files()
    finally:
        store._close_files()
        lock.release()


def open_store(
    directory: str | os.PathLike[str], *, clock: Callable[[], float] = time.time,
    queue_size: int = 16384,
) -> AbstractAsyncContextManager[Store]:  # fmt: skip
    """The data directory's store: SQLite in ``directory`` (see `open_sqlite_store`)."""
    return open_sqlite_store(directory, clock=clock, queue_size=queue_size)
