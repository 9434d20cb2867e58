"""The writer of `PostgresStore`: its queue, group commit, and reconnecting.

As in the SQLite store (``_writer``), every write is an operation (`_Op`)
queued to one writer task, which takes all that wait and runs them in one
transaction, acknowledging them all after the one COMMIT. Here the whole
batch, its statements and its COMMIT, runs on one worker thread with
psycopg's sync API (its async mode needs asyncio): every statement is a
round trip to the server, and the event loop runs on meanwhile. If an
operation fails, the batch is rolled back and each operation runs again
alone, so one bad write sinks no other.

A lost connection is a fail-stop. Lost at COMMIT, the batch's outcome is
unknown (the server may have committed it before the connection went):
its writers are told `UnknownOutcome`. Lost before, nothing was accepted.
Either way the store reconnects before the next batch and tells the
runtime (``on_recovered``), which re-reads its mailboxes; until it can,
every write is refused. (What this node owns is not in question: each
write of an owner carries its own fence, see ``_pg_cluster``.)

Other nodes write the same tables, so the writer trusts none of its cached
counters from one batch to the next (`WriterState.forget` before each), and
reads an actor's counters locking its row (``_pg_dialect``): two nodes that
store messages for one actor at once take turns on its row. A batch that
meets another node's in a deadlock, or in the race to insert the same row,
is rolled back and each write runs again alone, up to `_RETRIES` times.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, cast

import psycopg
import trio

from ..errors import StoreUnavailable, UnknownOutcome
from ._op_queue import OpQueue, _Op
from ._ops_mailbox import ActorRowRaced
from ._pg_connect import SecretUrl, scrub
from ._pg_dialect import SqliteDialect
from ._pg_lease import FENCES
from ._rhythm import GroupCommits
from ._sqlite_ops import WriterState

log = logging.getLogger("callboard.store")

_RETRIES = 3

# The rows of every actor a batch will lock, locked first and in address
# order: two nodes' batches that store messages for the same actors then
# queue on the first row they share, and never wait on each other in a
# circle. Their counters come with them, so the ops need not read them.
_LOCK_ACTORS = (
    "SELECT address, mailbox_head, event_head, final FROM actors "
    "WHERE address = ANY(%s) ORDER BY address FOR UPDATE"
)

# Conflicts with another node's transaction: running it again is right.
_CONFLICTS = (
    psycopg.errors.DeadlockDetected,
    psycopg.errors.SerializationFailure,
    psycopg.errors.UniqueViolation,
    ActorRowRaced,
)


class PgBatchWriter(OpQueue):
    """The writer loop and the write queue of `PostgresStore` (see the module)."""

    _clock: Callable[[], float]
    key_clock: Callable[[], float]
    on_recovered: Callable[[], None] | None
    _url: SecretUrl
    _where: str
    _max_batch: int
    _send: trio.MemorySendChannel[_Op]
    _receive: trio.MemoryReceiveChannel[_Op]
    _writer: SqliteDialect | None
    _writer_thread: trio.CapacityLimiter
    _batches: int
    _operations: int
    _largest: int
    _commit_seconds: float
    _state: WriterState
    _stopped_by: Exception | None
    _recoveries: int
    _group_commits: GroupCommits
    _notes: set[tuple[str, str]]
    _fences: dict[str, tuple[int, int]]
    node: str
    _note: Callable[[object], None]
    """Remember whom an op's result should wake (`PgCluster._note`)."""

    def _reconnect(self) -> None:
        """Open the writer's connection again (`PostgresStore` does it)."""
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
                    state = self._state
                    now = self._clock()
                    state.key_stamp = self.key_clock()
                    await trio.to_thread.run_sync(
                        self._run_batch, batch, now, limiter=self._writer_thread
                    )
                finally:
                    self._settle(batch, started)
        finally:
            self._close_queue()

    # -- on the writer's thread ----------------------------------------------

    def _run_batch(self, batch: list[_Op], now: float) -> None:
        sql = self._writer
        assert sql is not None
        state = self._state
        try:
            self._lock_actors(sql, batch)
            # The ops type their connection as sqlite3's; the dialect is that
            # part of its interface (see ``_pg_dialect``).
            for op in batch:
                op.result = op.fn(cast(Any, sql), now)
                self._note(op.result)
            state.flush(cast(Any, sql))
        except BaseException:
            state.forget()
            if not self._rolled_back(sql, batch):
                return
            for op in batch:
                op.result = None
                self._run_alone(sql, op, now)
            return
        self._commit(sql, batch)

    def _run_alone(self, sql: SqliteDialect, op: _Op, now: float) -> None:
        for attempt in range(1, _RETRIES + 1):
            if self._stopped_by is not None:
                self._refuse([op])
                return
            try:
                self._lock_actors(sql, [op])
                op.result = op.fn(cast(Any, sql), now)
                self._note(op.result)
                self._state.flush(cast(Any, sql))
            except BaseException as exc:
                self._state.forget()
                op.result = None
                if not self._rolled_back(sql, [op]):
                    return
                if isinstance(exc, _CONFLICTS) and attempt < _RETRIES:
                    continue  # another node's transaction was in the way: again
                op.error = self._unavailable(exc) if isinstance(exc, psycopg.Error) else exc
                return
            self._commit(sql, [op])
            return

    def _lock_actors(self, sql: SqliteDialect, ops: list[_Op]) -> None:
        """Before ``ops`` run: lock the rows of the actors they name, read their
        counters into the cache, and read the fences of the owner's writes."""
        self._state.forget()  # whatever another node changed since, the table has it
        addresses = sorted({a for op in ops for a in getattr(op.fn, "addresses", ())})
        if addresses:
            heads = self._state.heads
            for address, mailbox_head, event_head, final in sql.conn.execute(
                _LOCK_ACTORS, (addresses,)
            ):
                if not final:
                    heads[address] = (mailbox_head, event_head)
        fences = self._fences
        fences.clear()
        fenced = sorted({f for op in ops if (f := getattr(op.fn, "fence", None)) is not None})
        if fenced:
            for address, life, epoch in sql.conn.execute(FENCES, (fenced, self.node)):
                fences[address] = (life, epoch)

    def _commit(self, sql: SqliteDialect, ops: list[_Op]) -> None:
        try:
            if self._notes:
                # Sent by the server at COMMIT, and only if it commits.
                notes, node = sorted(self._notes), self.node
                self._notes.clear()
                sql.conn.execute(
                    "SELECT pg_notify(c, p) FROM unnest(%s::text[], %s::text[]) AS t(c, p)",
                    ([c for c, _ in notes], [f"{node}\n{a}" for _, a in notes]),
                )
            sql.conn.commit()
        except psycopg.Error as exc:
            self._state.forget()
            if sql.conn.broken or isinstance(exc, psycopg.OperationalError):
                self._stop(exc, ops, unknown=True)
                return
            # The server refused the COMMIT (a deferred check): rolled back.
            if self._rolled_back(sql, ops):
                for op in ops:
                    op.result = None
                    op.error = self._unavailable(exc)

    def _rolled_back(self, sql: SqliteDialect, ops: list[_Op]) -> bool:
        """Roll the open transaction back; False (the store stopped, ``ops``
        refused) when the connection is gone, which rolled it back anyway."""
        try:
            if not sql.conn.broken:
                sql.conn.rollback()
                return True
            lost: Exception = psycopg.OperationalError("the connection was lost")
        except psycopg.Error as exc:
            lost = exc
        self._stop(lost, ops, unknown=False)
        return False

    def _stop(self, exc: Exception, ops: list[_Op], *, unknown: bool) -> None:
        """Fail-stop after a lost connection: reconnect before the next batch."""
        self._stopped_by = exc
        reason = self._reason(exc)
        if unknown:
            log.error(
                "the PostgreSQL store lost its connection at COMMIT (%s): the outcome of %d "
                "writes is unknown; it reconnects before the next write",
                reason, len(ops),
            )  # fmt: skip
        else:
            log.error(
                "the PostgreSQL store lost its connection (%s); it reconnects before the "
                "next write", reason,
            )  # fmt: skip
        for op in ops:
            op.result = None
            if unknown:
                op.error = UnknownOutcome(
                    f"the connection to PostgreSQL was lost ({reason}) after this write was "
                    "sent to be committed: it may or may not have been accepted; retry with "
                    "the same key to learn which"
                )
            else:
                op.error = StoreUnavailable(
                    f"the connection to PostgreSQL was lost ({reason}); nothing was accepted"
                )

    # -- on the trio thread --------------------------------------------------

    async def _recover(self) -> bool:
        """Reconnect after a fail-stop; True once the store takes writes again."""
        try:
            await trio.to_thread.run_sync(self._reconnect, limiter=self._writer_thread)
        except Exception as exc:
            # Unreachable still.
            self._stopped_by = exc
            return False
        log.warning("the PostgreSQL store reconnected; writes go on")
        self._stopped_by = None
        self._recoveries += 1
        if self.on_recovered is not None:
            self.on_recovered()
        return True

    def _reason(self, exc: BaseException) -> str:
        return scrub(str(exc).strip() or type(exc).__name__, self._url.secret)

    def _unavailable(self, exc: BaseException) -> StoreUnavailable:
        return StoreUnavailable(
            f"the PostgreSQL store could not persist the write ({self._reason(exc)}); "
            "nothing was accepted"
        )

    def _refuse(self, batch: list[_Op]) -> None:
        stopped = self._stopped_by
        for op in batch:
            op.result = None
            op.error = StoreUnavailable(
                f"the PostgreSQL store at {self._where} lost its connection and cannot "
                f"reconnect yet ({self._reason(stopped or Exception())}); nothing was accepted"
            )
