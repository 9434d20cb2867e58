"""The embedded store: SQLite in WAL mode with ``synchronous=FULL`` and group commit.

One writer task takes every operation waiting in its queue, runs them in one
transaction on a worker thread and acknowledges them all after the one
COMMIT (one fsync). Reads use a second connection on the trio thread: they
are short, indexed and hold no transaction across an ``await``. Pages of
events for a replay, which may be big, are read on worker threads instead
(`EventReaders`). Between batches the writer keeps the WAL under a bound
(see ``_wal``).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

import trio

from ..errors import Pruned, RuntimeClosed, StoreUnavailable, UnknownOutcome
from . import _retention as retention
from . import _sqlite_ops as ops
from ._event_reads import EventReaders
from ._full import FullDisk
from ._lock import DirectoryLock
from ._protocol import Store
from ._records import (
    ActorRecord,
    Commit,
    CommitResult,
    DeadLetterRecord,
    Enqueue,
    EventPage,
    EventRecord,
    MailboxRecord,
    StoredAck,
    StoreStatistics,
)
from ._schema import prepare as prepare_schema
from ._wal import WalCheckpointer, limit_wal

__all__ = ["SqliteStore", "open_sqlite_store"]

log = logging.getLogger("callboard.store")

_DATABASE = "callboard.sqlite3"

# Pages of events read at once (each on a worker thread with its own
# connection): as many as our machines have cores; more replays wait their turn.
_EVENT_READ_THREADS = 2

_T = TypeVar("_T")

_ACTOR_COLUMNS = (
    "address, kind, spec, status, final, state, state_version, cursor, mailbox_head, "
    "event_head, restarts, busy, last_error, created_at, events_from, stopped_at"
)


class _Op:
    __slots__ = ("done", "error", "fn", "result", "slow", "task")

    def __init__(self, fn: Callable[[sqlite3.Connection, float], Any], slow: bool = False) -> None:
        self.fn = fn
        self.slow = slow  # takes milliseconds (a retention step): its batch runs in a thread
        self.task: trio.lowlevel.Task | None = None
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None

    def finish(self) -> None:
        self.done = True
        if self.task is not None:
            trio.lowlevel.reschedule(self.task)

    async def wait(self) -> None:
        if self.done:
            await trio.lowlevel.cancel_shielded_checkpoint()
        else:
            self.task = trio.lowlevel.current_task()
            await trio.lowlevel.wait_task_rescheduled(_refuse_abort)


def _refuse_abort(_: object) -> trio.lowlevel.Abort:
    # A queued write will happen; its waiter must learn the outcome.
    return trio.lowlevel.Abort.FAILED


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


def _is_io_error(exc: sqlite3.Error) -> bool:
    """An SQLITE_IOERR of any kind (a failed fsync, write or read); SQLITE_FULL is not:
    a write that finds the disk full is rolled back, so nothing was accepted."""
    return (getattr(exc, "sqlite_errorcode", 0) & 0xFF) == sqlite3.SQLITE_IOERR


def _committing(conn: sqlite3.Connection) -> bool:
    """After an I/O error: whether it may have come from the COMMIT. A statement
    that fails leaves its transaction open; a failed COMMIT ends it (SQLite rolls
    back what it can), so the outcome of a closed transaction is unknown."""
    return not conn.in_transaction


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


class SqliteStore:
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
        self._state = ops.WriterState(max_cached_actors)
        self._wal = WalCheckpointer(directory / f"{_DATABASE}-wal")
        # Fail-stop (see _stop_after_io_error): the I/O error that stopped the
        # store, until it has reopened its files and recovered from the WAL.
        self._stopped_by: sqlite3.Error | None = None
        self._recoveries = 0
        self._full = FullDisk(directory)
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

    async def _run_writer(self, task_status: trio.TaskStatus[None]) -> None:
        task_status.started()
        try:
            async for first in self._receive:
                batch = [first]
                while len(batch) < self._max_batch:
                    try:
                        batch.append(self._receive.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                started = time.perf_counter()
                try:
                    if self._stopped_by is not None and not await self._recover():
                        self._refuse(batch)
                        continue
                    await self._write(batch)
                    if any(op.error is None for op in batch):
                        self._full.committed()
                finally:
                    for op in batch:
                        op.finish()
                    self._batches += 1
                    self._operations += len(batch)
                    self._largest = max(self._largest, len(batch))
                    self._commit_seconds += time.perf_counter() - started
                # After the acks, so no sender waits for it; the writes that
                # arrive meanwhile queue up and share the next commit.
                if self._wal.due():
                    assert self._writer is not None
                    await trio.to_thread.run_sync(self._wal.checkpoint, self._writer)
        finally:
            self._receive.close()
            self._fail_waiting()

    async def _write(self, batch: list[_Op]) -> None:
        """One transaction for the whole batch.

        The statements run here, on the trio thread: they are short, and a
        worker thread would have to win the GIL back for each of them while
        the actors keep it busy. Only the COMMIT, which waits for the fsync,
        goes to a thread, and the event loop runs on meanwhile. A batch with
        a slow op (a retention step, a few ms of deleting) runs in a thread
        whole: SQLite lets go of the GIL while it works.
        """
        conn = self._writer
        assert conn is not None
        state = self._state
        state.trim()
        now = self._clock()
        state.key_stamp = self.key_clock()
        if any(op.slow for op in batch):
            await trio.to_thread.run_sync(self._run_batch, batch, now)
            return
        try:
            # busy_timeout is 0 on the writer: this never blocks the event loop.
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            # Someone else holds the write lock: wait for it off the event loop.
            await trio.to_thread.run_sync(self._run_batch, batch, now)
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
            await trio.to_thread.run_sync(self._run_batch, batch, now)
            return
        try:
            await trio.to_thread.run_sync(conn.execute, "COMMIT")
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
        """Reopen the files after a fail-stop; True once the store takes writes again."""
        try:
            await trio.to_thread.run_sync(self._reopen)
        except (sqlite3.Error, OSError) as exc:
            self._stopped_by = exc if isinstance(exc, sqlite3.Error) else self._stopped_by
            return False
        log.warning("the store reopened its files and recovered from the WAL; writes go on")
        self._stopped_by = None
        self._recoveries += 1
        if self.on_recovered is not None:
            self.on_recovered()
        return True

    def _reopen(self) -> None:
        # The event readers stay: they read only what was committed.
        self._close_connections()
        self._state.forget()
        self._open_files()

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

    @property
    def healthy(self) -> bool:
        """False from an I/O error at COMMIT until the store has recovered from it."""
        return self._stopped_by is None

    def _fail_waiting(self) -> None:
        while True:
            try:
                op = self._receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                return
            op.error = RuntimeClosed("the store closed before this write ran; nothing was written")
            op.finish()

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

    async def _submit(
        self, fn: Callable[[sqlite3.Connection, float], _T], slow: bool = False
    ) -> _T:
        op = _Op(fn, slow)
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            try:
                # The common case queues without yielding; the wait below is the
                # schedule point, so each write costs one trip through the scheduler.
                self._send.send_nowait(op)
            except trio.WouldBlock:
                await self._send.send(op)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise RuntimeClosed("the store is closed; nothing was written") from None
        # Once queued, the write will happen: waiting for it cannot be
        # cancelled, or a caller could be cancelled after its write became
        # durable. (A shielded scope would do the same, at several times the cost.)
        await op.wait()
        if op.error is not None:
            raise op.error
        return cast(_T, op.result)

    def statistics(self) -> StoreStatistics:
        return StoreStatistics(
            self._batches, self._operations, self._largest, self._commit_seconds, self._recoveries
        )

    # -- writes --------------------------------------------------------------

    async def enqueue(self, items: Sequence[Enqueue]) -> list[StoredAck | Exception]:
        state = self._state
        return await self._submit(
            lambda conn, now: [ops.enqueue(conn, state, i, now) for i in items]
        )

    async def commit(self, c: Commit) -> CommitResult:
        state = self._state
        return await self._submit(lambda conn, now: ops.commit(conn, state, c, now))

    async def mark_attempts(self, address: str, first: int, last: int) -> None:
        state = self._state
        await self._submit(lambda conn, now: ops.mark_attempts(conn, state, address, first, last))

    async def spawn(self, address: str, kind: str, spec: bytes) -> tuple[bool, bytes | None]:
        return await self._submit(lambda conn, now: ops.spawn(conn, address, kind, spec, now))

    async def fire_timers(self) -> list[StoredAck | Exception]:
        state = self._state
        return await self._submit(lambda conn, now: ops.fire_timers(conn, state, now))

    async def requeue(self, dead_letter_id: int) -> StoredAck | Exception:
        state = self._state
        return await self._submit(lambda conn, now: ops.requeue(conn, state, dead_letter_id, now))

    async def prune_keys(self, older_than: float, *, now: float | None = None) -> int:
        """Forget the idempotency keys stamped more than ``older_than`` seconds
        before ``now`` (by default the store's clock when the write runs)."""
        return await self._submit(
            lambda conn, clock: ops.prune_keys(conn, (clock if now is None else now) - older_than)
        )

    async def retain(
        self, policy: retention.RetentionPolicy, step: retention.RetentionStep
    ) -> retention.RetentionStep:
        """One bounded op of a retention pass, from ``step`` on (see ``_retention``)."""
        state = self._state
        return await self._submit(
            lambda conn, now: retention.retain(conn, state, policy, step), slow=True
        )

    # -- reads ---------------------------------------------------------------
    # Async by the `Store` protocol; on SQLite they are indexed reads of a
    # local file, fast enough to run on the trio thread without a hop (the
    # replay's pages, which can be large, go to a worker: `read_events`).

    def _read(self, sql: str, args: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        if self._reader is None:
            raise RuntimeClosed("the store is closed")
        # Every read goes through here, and ``fetchall`` steps the statement
        # to its end, which resets it and so ends its read transaction before
        # this returns. (A cursor left half read would pin the WAL: no
        # checkpoint could start the log over while it lives.)
        return self._reader.execute(sql, args).fetchall()

    async def actor(self, address: str) -> ActorRecord | None:
        rows = self._read(f"SELECT {_ACTOR_COLUMNS} FROM actors WHERE address = ?", (address,))
        return ActorRecord.from_row(rows[0]) if rows else None

    async def actors(
        self, kind: str | None = None, *, status: str | None = None, after: str | None = None,
        limit: int = 10_000,
    ) -> list[ActorRecord]:  # fmt: skip
        """At most ``limit`` actors in address order, past ``after`` (a page)."""
        where: list[str] = []
        args: list[object] = []
        for clause, value in (("kind = ?", kind), ("status = ?", status), ("address > ?", after)):
            if value is not None:
                where.append(clause)
                args.append(value)
        condition = f"WHERE {' AND '.join(where)} " if where else ""
        rows = self._read(
            f"SELECT {_ACTOR_COLUMNS} FROM actors {condition}ORDER BY address LIMIT ?",
            (*args, limit),
        )
        return [ActorRecord.from_row(r) for r in rows]

    async def pending(self, address: str, after: int, limit: int) -> list[MailboxRecord]:
        rows = self._read(
            "SELECT address, seq, type, body, sender, key, attempts, at FROM mailbox "
            "WHERE address = ? AND seq > ? ORDER BY seq LIMIT ?",
            (address, after, limit),
        )
        return [MailboxRecord(*r) for r in rows]

    async def events(self, address: str, after: int, limit: int) -> list[EventRecord]:
        """Events after seq ``after``; `Pruned` if retention removed some (never a gap)."""
        rows = self._read(
            "SELECT address, seq, type, data, at FROM events "
            "WHERE address = ? AND seq > ? ORDER BY seq LIMIT ?",
            (address, after, limit),
        )
        if not rows or rows[0][1] != after + 1:
            self._check_held(address, after)
        return [EventRecord(*r) for r in rows]

    async def read_events(
        self, address: str, after: int, *, limit: int, max_bytes: int
    ) -> EventPage:
        """The next page of ``address``'s events after seq ``after``: at most
        ``limit`` events and ``max_bytes`` bytes of their data, but always the
        next event if there is one. Read on a worker thread (`EventReaders`);
        a cancel point only before the read starts. Raises `Pruned` when
        retention removed the events asked for."""
        if self._reader is None:
            raise RuntimeClosed("the store is closed")
        page = await self._event_reads.read(address, after, limit=limit, max_bytes=max_bytes)
        if not page.events or page.events[0].seq != after + 1:
            self._check_held(address, after)
        return page

    async def check_held(self, address: str, after: int) -> None:
        """Raise `Pruned` if retention removed events of ``address`` after seq ``after``.
        (It removes them from the oldest up, moving ``events_from`` with them.)"""
        self._check_held(address, after)

    def _check_held(self, address: str, after: int) -> None:
        rows = self._read("SELECT events_from FROM actors WHERE address = ?", (address,))
        if rows and rows[0][0] > after + 1:
            raise Pruned(address, rows[0][0])

    async def addresses_with_work(self, now: float) -> list[str]:
        """Actors a killed process left with something to do, and no others."""
        rows = self._read(
            "SELECT address FROM actors WHERE final = 0 AND (busy = 1 OR cursor < mailbox_head) "
            "UNION SELECT DISTINCT address FROM timers WHERE due <= ?",
            (now,),
        )
        return sorted(r[0] for r in rows)

    async def status_counts(self) -> dict[str, int]:
        """How many actors have each stored status (``idle`` for the ones in memory too)."""
        return dict(self._read("SELECT status, COUNT(*) FROM actors GROUP BY status"))

    async def dead_letter_count(self) -> int:
        return int(self._read("SELECT COUNT(*) FROM dead_letters")[0][0])

    async def next_timer_due(self) -> float | None:
        rows = self._read("SELECT MIN(due) FROM timers")
        return rows[0][0] if rows else None

    async def dead_letters(self, address: str | None = None) -> list[DeadLetterRecord]:
        cols = "id, address, seq, type, body, sender, key, attempts, error, at"
        if address is None:
            rows = self._read(f"SELECT {cols} FROM dead_letters ORDER BY id")
        else:
            rows = self._read(
                f"SELECT {cols} FROM dead_letters WHERE address = ? ORDER BY id", (address,)
            )
        return [DeadLetterRecord(*r) for r in rows]

    async def read_log(
        self, address: str, log: str, start: int = 0, limit: int = 1000
    ) -> list[bytes]:
        rows = self._read(
            "SELECT data FROM logs WHERE address = ? AND log = ? AND idx >= ? ORDER BY idx LIMIT ?",
            (address, log, start, limit),
        )
        return [r[0] for r in rows]

    async def log_length(self, address: str, log: str) -> int:
        rows = self._read(
            "SELECT COALESCE(MAX(idx), -1) + 1 FROM logs WHERE address = ? AND log = ?",
            (address, log),
        )
        return int(rows[0][0])


@asynccontextmanager
async def open_sqlite_store(
    directory: str | os.PathLike[str],
    *,
    clock: Callable[[], float] = time.time,
    max_batch: int = 2048,
    queue_size: int = 16384,
    max_cached_actors: int = 10_000,
) -> AsyncIterator[SqliteStore]:
    """Lock the data directory, open the database and run the writer until exit.

    On exit the writer finishes every queued write before the files close.
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
