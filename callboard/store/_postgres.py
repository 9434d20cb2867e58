"""The PostgreSQL store: a node's `Store` on a PostgreSQL database that several nodes share.

The same contract as `SqliteStore`, and the same write operations (shared
through ``_pg_dialect``): a write returns once its batch's COMMIT has
returned with ``synchronous_commit=on``, so it is durable on the server.
One writer task batches every queued write into one transaction on a
worker thread (``_pg_writer``); reads run on a pool of other connections
on worker threads (``_pg_reads``).

Several nodes may open one database: each holds a lease, renewed by its
heartbeat, and each actor is owned by one node at a time, every write of
the owner fenced by the epoch of its claim (``_pg_cluster``, ``_pg_lease``).
Anyone may store a message for any actor; its owner is woken by NOTIFY,
with a poll as the fallback.

The data directory still holds the node's own files (the lock, the
operator's token), so it is locked as the SQLite store locks it.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import psycopg
import trio

from ..errors import StoreUnavailable
from . import _retention as retention
from . import _sqlite_ops as ops
from ._company import COMMIT_DELAY, Company
from ._lock import DirectoryLock
from ._op_queue import _Op
from ._pg_cluster import PgCluster, default_node
from ._pg_connect import SecretUrl, connect, redact, scrub
from ._pg_dialect import SqliteDialect
from ._pg_fenced import PgFencedWrites
from ._pg_reads import PgReads, ReaderPool
from ._pg_schema import prepare
from ._pg_writer import PgBatchWriter
from ._records import StoreStatistics
from ._rhythm import GroupCommits
from ._writes import StoreWrites

__all__ = ["PostgresStore", "open_postgres_store"]


class PostgresStore(PgBatchWriter, PgReads, PgFencedWrites, PgCluster, StoreWrites):
    """The store behind the runtime, on PostgreSQL. Writes are durable on return;
    reads see every write that returned before they began."""

    def __init__(
        self,
        url: str,
        directory: Path,
        *,
        node: str | None = None,
        clock: Callable[[], float] = time.time,
        max_batch: int = 2048,
        queue_size: int = 16384,
        max_cached_actors: int = 10_000,
        lease_ttl: float = 10.0,
        lease_poll: float = 1.0,
        commit_delay: float = COMMIT_DELAY,
    ) -> None:
        self.directory = directory
        self.node = node if node is not None else default_node(directory)
        self._lease_ttl = lease_ttl
        self._lease_poll = lease_poll
        self._url = SecretUrl(url)  # its password goes only to `connect` and `scrub`
        self._where = redact(url)
        self._clock = clock
        self._max_batch = max_batch
        self._send, self._receive = trio.open_memory_channel[_Op](queue_size)
        self._writer: SqliteDialect | None = None
        self._writer_thread = trio.CapacityLimiter(1)
        self._reads = ReaderPool(
            lambda: connect(self._url.secret, autocommit=True),
            lambda text: scrub(text, self._url.secret),
            lane=self._writer_thread,
        )
        self._batches = 0
        self._operations = 0
        self._largest = 0
        self._commit_seconds = 0.0
        self.life = secrets.randbits(62)
        self._state = ops.WriterState(max_cached_actors, life=self.life)
        self._group_commits = GroupCommits()
        self._company = Company(commit_delay)
        self._stopped_by: Exception | None = None
        self._recoveries = 0
        self.key_clock: Callable[[], float] = clock  # stamps keys (see Runtime._key_clock)
        self.on_recovered: Callable[[], None] | None = None
        """Called on the trio thread once the store has reconnected after a lost
        connection: the runtime re-reads every active mailbox, as the lost
        batch may have committed."""
        self.on_wake: Callable[[str], None] | None = None
        self.on_events: Callable[[str | None], None] | None = None
        self.on_lost: Callable[[Sequence[str]], None] | None = None
        self._init_cluster()
        self._registered = False

    def __repr__(self) -> str:
        return f"<PostgresStore {self._where} node {self.node!r}>"

    # -- lifecycle (on a worker thread) --------------------------------------

    def _open(self, now: float) -> None:
        """On a worker thread; ``now`` from the store's clock, read on the trio
        thread (a test's clock may be trio's)."""
        conn = connect(self._url.secret, autocommit=False)
        try:
            prepare(conn, self._where)
            self._register()
            self._registered = True
        except psycopg.Error as exc:
            conn.close()
            # Not chained: the driver's text could quote the URL.
            raise StoreUnavailable(
                f"cannot prepare the PostgreSQL store at {self._where}: "
                f"{scrub(str(exc).strip() or type(exc).__name__, self._url.secret)}"
            ) from None
        except BaseException:
            conn.close()
            raise
        self._writer = SqliteDialect(conn)

    def _reconnect(self) -> None:
        self._drop_writer()
        self._state.forget()
        self._writer = SqliteDialect(connect(self._url.secret, autocommit=False))

    def _drop_writer(self) -> None:
        if self._writer is not None:
            conn, self._writer = self._writer.conn, None
            conn.close()

    def _close(self, *, leave: bool) -> None:
        self._reads.close()
        self._drop_writer()
        if leave:
            self._leave()
        elif self._control is not None:
            self._control.close()

    @property
    def healthy(self) -> bool:
        """False from a lost connection until the store has reconnected."""
        return self._stopped_by is None

    def statistics(self) -> StoreStatistics:
        return StoreStatistics(
            self._batches, self._operations, self._largest, self._commit_seconds, self._recoveries
        )

    # -- writes: the others are in `StoreWrites`, through the dialect ------

    async def retain(
        self, policy: retention.RetentionPolicy, step: retention.RetentionStep
    ) -> retention.RetentionStep:
        """One bounded op of a retention pass, from ``step`` on (see ``_retention``)."""
        state = self._state
        return await self._submit(lambda conn, now: retention.retain(conn, state, policy, step))


@asynccontextmanager
async def open_postgres_store(
    url: str,
    directory: str | os.PathLike[str],
    *,
    node: str | None = None,
    clock: Callable[[], float] = time.time,
    max_batch: int = 2048,
    queue_size: int = 16384,
    max_cached_actors: int = 10_000,
    lease_ttl: float = 10.0,
    lease_poll: float = 1.0,
    commit_delay: float = COMMIT_DELAY,
) -> AsyncIterator[PostgresStore]:
    """Lock the data directory, connect to the database at ``url`` (creating
    callboard's tables in an empty one) and run the writer until exit.

    ``node`` names this node (by default its host and data directory); its
    lease lasts ``lease_ttl`` seconds past each heartbeat, and every
    ``lease_poll`` seconds it looks for actors to wake or take. ``commit_delay``:
    seconds a batch of actor steps only waits for another write to share its
    COMMIT (`RuntimeConfig.commit_delay`; 0: none).

    `StoreUnavailable` if the server cannot be reached,
    `DataDirectoryIncompatible` if a newer callboard made it; each names the
    URL without its password. On exit the writer finishes every queued write
    before the connections close, and the node gives up its actors.
    """
    path = Path(directory)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)  # noqa: ASYNC240 (once, at start-up)
    lock = DirectoryLock(path)
    lock.acquire()
    store = PostgresStore(
        url,
        path,
        node=node,
        clock=clock,
        max_batch=max_batch,
        queue_size=queue_size,
        max_cached_actors=max_cached_actors,
        lease_ttl=lease_ttl,
        lease_poll=lease_poll,
        commit_delay=commit_delay,
    )
    try:
        opened = time.monotonic()  # the lease's clock (see ``_pg_cluster._now``)
        await trio.to_thread.run_sync(store._open, clock())
        store._renewed_until = opened + lease_ttl
        async with trio.open_nursery() as nursery:
            await nursery.start(store._run_writer)
            lease = trio.CancelScope()

            async def run_lease(task_status: trio.TaskStatus[None]) -> None:
                with lease:
                    await store._run_lease(task_status=task_status)

            await nursery.start(run_lease)
            try:
                yield store
            finally:
                store._stop_lease()
                lease.cancel()
                store._send.close()
    finally:
        with trio.CancelScope(shield=True):
            # Its actors have stopped (the runtime closes first): it gives them up.
            await trio.to_thread.run_sync(partial(store._close, leave=store._registered))
        lock.release()
