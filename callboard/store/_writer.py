"""The writer of `SqliteStore`: its queue, group commit and fail-stop recovery.

Every write is an operation (`_Op`) queued to one writer task (the queue and
its waiters are `OpQueue`'s, shared with the PostgreSQL writer), which takes
all that wait, runs them in one transaction and acknowledges them after the
one COMMIT; the slow path (a held lock, a failed operation, a retention
step) runs the batch in a worker thread, each operation alone if one fails.
An I/O error at COMMIT stops the store until it has reopened its files and
recovered from the WAL. It is a base class of `SqliteStore`, kept apart from
the store's lifecycle, writes and reads because it is the part that decides
what was durably accepted; `SqliteStore.__init__` sets the attributes
declared here.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable

import trio

from ..errors import StoreUnavailable, UnknownOutcome
from ._commit_place import CommitPlace
from ._full import FullDisk
from ._op_queue import OpQueue, _Op
from ._rhythm import GroupCommits
from ._sqlite_ops import WriterState
from ._wal import WalCheckpointer
from ._worker import WorkerThread

log = logging.getLogger("callboard.store")


def _is_io_error(exc: sqlite3.Error) -> bool:
    """An SQLITE_IOERR of any kind (a failed fsync, write or read); SQLITE_FULL is not:
    a write that finds the disk full is rolled back, so nothing was accepted."""
    return (getattr(exc, "sqlite_errorcode", 0) & 0xFF) == sqlite3.SQLITE_IOERR


def _committing(conn: sqlite3.Connection) -> bool:
    """After an I/O error: whether it may have come from the COMMIT. A statement
    that fails leaves its transaction open; a failed COMMIT ends it (SQLite rolls
    back what it can), so the outcome of a closed transaction is unknown."""
    return not conn.in_transaction


class BatchWriter(OpQueue):
    """The writer loop and the write queue of `SqliteStore` (see the module)."""

    _clock: Callable[[], float]
    key_clock: Callable[[], float]
    on_recovered: Callable[[], None] | None
    _max_batch: int
    _send: trio.MemorySendChannel[_Op]
    _receive: trio.MemoryReceiveChannel[_Op]
    _writer: sqlite3.Connection | None
    _batches: int
    _operations: int
    _largest: int
    _commit_seconds: float
    _state: WriterState
    _wal: WalCheckpointer
    _stopped_by: sqlite3.Error | None
    _recoveries: int
    _full: FullDisk
    _group_commits: GroupCommits
    _worker: WorkerThread
    _commit_place: CommitPlace

    def _refusing(self) -> bool:
        """The disk is full (see `FullDisk`): writes are refused until there is room."""
        return self._full.full

    def _reopen(self) -> None:
        """Close the files and open them again (`SqliteStore` does it)."""
        raise NotImplementedError

    async def _run_writer(self, task_status: trio.TaskStatus[None]) -> None:
        task_status.started()
        try:
            async for first in self._receive:
                batch = self._take_batch(first)
                started = time.perf_counter()
                try:
                    await self._gather(batch)
                    started = time.perf_counter()  # the commit's time, not the wait's
                    if self._stopped_by is not None and not await self._recover():
                        self._refuse(batch)
                        continue
                    await self._write(batch)
                    if any(op.error is None for op in batch):
                        self._full.committed()
                finally:
                    self._settle(batch, started)
                # After the acks, so no sender waits for it; the writes that
                # arrive meanwhile queue up and share the next commit.
                if self._wal.due():
                    assert self._writer is not None
                    await self._worker.run(self._wal.checkpoint, self._writer)
        finally:
            self._close_queue()
            self._worker.stop()

    async def _write(self, batch: list[_Op]) -> None:
        """One transaction for the whole batch.

        The statements run here, on the trio thread: they are short, and a
        worker thread would have to win the GIL back for each of them while
        the actors keep it busy. Only the COMMIT, which waits for the fsync,
        goes to the writer's thread, and the event loop runs on meanwhile
        (unless nothing would run meanwhile: `CommitPlace`). A batch with a
        slow op (a retention step, a few ms of deleting) runs in that thread
        whole: SQLite lets go of the GIL while it works.
        """
        conn = self._writer
        assert conn is not None
        state = self._state
        state.trim()
        now = self._clock()
        state.key_stamp = self.key_clock()
        if any(op.slow for op in batch):
            await self._worker.run(self._run_batch, batch, now)
            return
        try:
            # busy_timeout is 0 on the writer: this never blocks the event loop.
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            # Someone else holds the write lock: wait for it off the event loop.
            await self._worker.run(self._run_batch, batch, now)
            return
        try:
            for op in batch:
                op.result = op.fn(conn, now)
            # The rows the batch deferred, and each actor's counters, once.
            state.flush(conn)
        except BaseException:
            state.forget()
            # SQLite may have rolled it back itself: an SQLITE_FULL or an I/O
            # error where a statement spilled pages to the WAL does.
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            await self._worker.run(self._run_batch, batch, now)
            return
        place = self._commit_place
        inline = place.inline(len(batch))
        started = time.perf_counter()
        try:
            if inline:
                conn.execute("COMMIT")
            else:
                await self._worker.run(conn.execute, "COMMIT")
        except BaseException as exc:
            # Whatever became of the transaction, the table is the truth now.
            state.forget()
            if not isinstance(exc, sqlite3.Error):
                raise
            if _is_io_error(exc):
                self._stop_after_io_error(exc, batch)
                return
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            for op in batch:
                op.result = None
                op.error = self._unavailable(exc)
        else:
            if inline:
                place.took(time.perf_counter() - started)

    def _stop_after_io_error(self, exc: sqlite3.Error, batch: list[_Op]) -> None:
        """Fail-stop after an I/O error at COMMIT (a failed fsync, typically).

        The batch's frames may already be in the WAL, so its outcome is
        unknown: a later open may find it committed. Retrying the fsync would
        be wrong (after a failed fsync the kernel may have dropped the dirty
        pages and reports success next time: PostgreSQL's lesson of 2018), so
        the store takes no more writes on these files. Before the next batch
        it closes them and opens them again, which recovers from the WAL;
        until that works every write is refused with nothing accepted.
        """
        self._stopped_by = exc
        log.error(
            "the store stopped after an I/O error at COMMIT (%s, %s): the outcome of %d "
            "writes is unknown; it reopens its files and recovers from the WAL before "
            "the next write",
            exc, getattr(exc, "sqlite_errorname", "?"), len(batch),
        )  # fmt: skip
        for op in batch:
            op.result = None
            op.error = UnknownOutcome(
                f"an I/O error ({exc}) came after this write may have reached the disk: "
                "it may or may not have been accepted; retry with the same key to learn which"
            )

    async def _recover(self) -> bool:
        """Reopen the files after a fail-stop; True once the store takes writes again.

        On the trio thread, though opening may recover a WAL of some
        megabytes: the reads run there too, on the reader connection this
        closes and replaces. From another thread the close could come
        between a read's test of the connection and its statement (a closed
        database, or a crash in SQLite). It happens once per I/O error.
        """
        await trio.lowlevel.checkpoint()
        try:
            self._reopen()
        except (sqlite3.Error, OSError) as exc:
            self._stopped_by = exc if isinstance(exc, sqlite3.Error) else self._stopped_by
            return False
        log.warning("the store reopened its files and recovered from the WAL; writes go on")
        self._stopped_by = None
        self._recoveries += 1
        if self.on_recovered is not None:
            self.on_recovered()
        return True

    def _unavailable(self, exc: sqlite3.Error) -> StoreUnavailable:
        """The answer to a write that failed and was rolled back (see `FullDisk`)."""
        self._full.refused(exc)
        return StoreUnavailable(
            f"the store could not persist the write ({exc}); nothing was accepted"
        )

    def _refuse(self, batch: list[_Op]) -> None:
        for op in batch:
            op.result = None
            op.error = StoreUnavailable(
                f"the store stopped after an I/O error ({self._stopped_by}) and cannot "
                "reopen its files yet; nothing was accepted"
            )

    def _run_batch(self, batch: list[_Op], now: float) -> None:
        """The slow path, in a worker thread: wait for the lock, and redo each
        operation alone if one of them fails, so one bad write sinks no other.
        An I/O error at COMMIT stops the store instead (the outcome is unknown,
        so redoing the writes could apply them twice)."""
        conn = self._writer
        assert conn is not None
        state = self._state
        conn.execute("PRAGMA busy_timeout=5000")
        try:
            try:
                conn.execute("BEGIN IMMEDIATE")
                for op in batch:
                    op.result = op.fn(conn, now)
                state.flush(conn)
                conn.execute("COMMIT")
            except BaseException as exc:
                state.forget()
                if isinstance(exc, sqlite3.Error) and _is_io_error(exc) and _committing(conn):
                    self._stop_after_io_error(exc, batch)
                    return
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                for op in batch:
                    op.result = None
                    self._run_alone(conn, op, now)
        finally:
            if self._stopped_by is None:
                conn.execute("PRAGMA busy_timeout=0")

    def _run_alone(self, conn: sqlite3.Connection, op: _Op, now: float) -> None:
        if self._stopped_by is not None:
            self._refuse([op])
            return
        state = self._state
        try:
            conn.execute("BEGIN IMMEDIATE")
            op.result = op.fn(conn, now)
            state.flush(conn)
            conn.execute("COMMIT")
        except BaseException as exc:
            state.forget()
            if isinstance(exc, sqlite3.Error) and _is_io_error(exc) and _committing(conn):
                self._stop_after_io_error(exc, [op])
                return
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.OperationalError | sqlite3.DatabaseError):
                op.error = self._unavailable(exc)
            else:
                op.error = exc
