"""`StoreWrites`: the writes both stores make, through their writer's queue.

Both run the same operation modules (``_ops_mailbox``, ``_ops_commit``)
against their `WriterState`: SQLite directly, PostgreSQL through its dialect
wrapper. So each write is queued the same way, and written here once; a
store's writer takes them from its `OpQueue`, and the store has its own
``retain`` (SQLite runs a retention step in a thread, as a slow op).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import trio

from . import _ops_commit as commit_ops
from . import _ops_mailbox as mailbox_ops
from . import _retention as retention
from ._op_queue import OpQueue
from ._records import Commit, CommitResult, Enqueue, StoredAck
from ._sqlite_ops import WriterState

__all__ = ["StoreWrites"]

_PROBE_TIMEOUT = 5.0
"""Seconds `StoreWrites.writable` waits for its empty write before it says no."""


def _nothing(conn: Any, now: float) -> None:
    """The empty write of `StoreWrites.writable`: it goes through the writer and asks
    the database one trivial thing, so that a connection the server dropped while
    the store was idle is found out here (a transaction with no statement would
    commit without a word to the server)."""
    conn.execute("SELECT 1")


class StoreWrites(OpQueue):
    """The `Store` writes, queued to the writer of the class this is mixed into."""

    _state: WriterState

    async def enqueue(self, items: Sequence[Enqueue]) -> list[StoredAck | Exception]:
        state = self._state
        return await self._submit(
            lambda conn, now: [mailbox_ops.enqueue(conn, state, i, now) for i in items]
        )

    def enqueue_soon(self, item: Enqueue, then: Callable[[StoredAck | Exception], None]) -> bool:
        state = self._state
        return self._submit_soon(
            lambda conn, now: mailbox_ops.enqueue(conn, state, item, now), then
        )

    def _commit_write(self, c: Commit) -> Callable[[Any, float], CommitResult]:
        state = self._state
        return lambda conn, now: commit_ops.commit(conn, state, c, now)

    async def commit(self, c: Commit) -> CommitResult:
        return await self._submit(self._commit_write(c), step=True)

    def commit_soon(self, c: Commit, then: Callable[[CommitResult | Exception], None]) -> bool:
        return self._submit_soon(self._commit_write(c), then, step=True)

    async def mark_attempts(
        self, address: str, first: int, last: int, attempts: int | None = None
    ) -> None:
        state = self._state
        await self._submit(
            lambda conn, now: mailbox_ops.mark_attempts(conn, state, address, first, last, attempts)
        )

    async def writable(self) -> bool:
        """See `Store.writable`; False too when the writer has not answered within
        `_PROBE_TIMEOUT` (for a load balancer, a writer that slow takes no writes).
        Cancel-atomic: the empty write changes nothing, and is not waited for."""
        answered = trio.Event()
        outcome: list[object] = []

        def then(result: object) -> None:
            outcome.append(result)
            answered.set()

        # Told, not awaited: a writer stuck in a batch must not hold the caller.
        if not self._submit_soon(_nothing, then):
            await trio.lowlevel.checkpoint()
            return False  # the queue is full or closed
        with trio.move_on_after(_PROBE_TIMEOUT):
            await answered.wait()
        if not outcome or isinstance(outcome[0], BaseException):
            return False
        return self.healthy and not self._refusing()

    @property
    def healthy(self) -> bool:
        """The store's own (`Store.healthy`); each store defines it."""
        raise NotImplementedError

    def _refusing(self) -> bool:
        """Whether the store refuses writes though it is healthy (SQLite: a full disk)."""
        return False

    async def after_next_commit(self) -> None:
        """See `Store.after_next_commit`."""
        await self._group_commits.after_next(self._queued())

    def call_after_next_commit(self, fn: Callable[[], None]) -> bool:
        """See `Store.call_after_next_commit`."""
        return self._group_commits.call_after_next(fn, self._queued())

    def _queued(self) -> bool:
        """Writes wait that the writer has not taken yet (or it has taken the
        first of its next batch only). The channel's ``statistics()`` says as
        much, but builds a record of five fields for it, and this is asked
        at every step of an actor with one message."""
        return self._waiting_since is not None

    async def spawn(self, address: str, kind: str, spec: bytes) -> tuple[bool, bytes | None]:
        return await self._submit(
            lambda conn, now: mailbox_ops.spawn(conn, address, kind, spec, now)
        )

    async def fire_timers(self) -> list[StoredAck | Exception]:
        state = self._state
        return await self._submit(lambda conn, now: mailbox_ops.fire_timers(conn, state, now))

    async def requeue(self, dead_letter_id: int) -> StoredAck | Exception:
        state = self._state
        return await self._submit(
            lambda conn, now: mailbox_ops.requeue(conn, state, dead_letter_id, now)
        )

    async def prune_keys(self, older_than: float, *, now: float | None = None) -> int:
        """Forget the idempotency keys stamped more than ``older_than`` seconds
        before ``now`` (by default the store's clock when the write runs)."""
        return await self._submit(
            lambda conn, clock: mailbox_ops.prune_keys(
                conn, (clock if now is None else now) - older_than
            )
        )

    async def delete(self, address: str, *, batch: int = 2000) -> retention.Deletion:
        """One op of deleting the ended actor at ``address`` (`retention.delete_actor`)."""
        state = self._state
        return await self._submit(
            lambda conn, now: retention.delete_actor(conn, state, address, batch), slow=True
        )
