"""The writes of an actor's owner on PostgreSQL, fenced; and whom each write wakes.

The part of `PostgresStore` between its writes and its writer (``_pg_cluster``
has the lease they rely on, ``_pg_writer`` the batch that runs them):

- A commit or a count of attempts is made with the epoch this node's
  `claim` returned for the actor, and runs only if the fence the batch read
  before its ops (``FOR SHARE`` on the ownership row, in the same
  transaction) still has that life and epoch: otherwise it writes nothing
  and raises `LeaseLost`, and only it: the other writes of its batch go on.
  A first write of an actor this node never claimed (a store driven directly,
  as its own tests do) claims it in the same transaction instead; a write of
  one it owned and lost is refused (`LeaseLost`) until a `claim` takes it
  again: it comes from a cell that knew the actor as it was before another
  node's commits, and must not take the actor back by writing.
- Every write names the actors whose rows it locks (`Touching`), so that the
  writer locks them all first, in address order.
- `_note` remembers the mailboxes a batch stored messages in: their owners
  are notified at its COMMIT (``_pg_cluster.MAIL``); a commit with events
  notifies ``EVENTS``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import LeaseLost
from . import _ops_commit as commit_ops
from . import _ops_mailbox as mailbox_ops
from . import _pg_lease as lease
from ._op_queue import OpQueue
from ._records import Commit, CommitResult, Enqueue, StoredAck
from ._sqlite_ops import WriterState

__all__ = ["EVENTS", "MAIL", "PgFencedWrites", "Touching"]

MAIL = "callboard_mail"
EVENTS = "callboard_events"

_FENCED = object()


class Touching:
    """A write that names the actors whose rows it will lock, so that the
    writer locks them all first, in address order (see ``_pg_writer``)."""

    __slots__ = ("addresses", "fence", "fn")

    def __init__(
        self, fn: Callable[[Any, float], Any], addresses: Sequence[str], fence: str | None = None
    ) -> None:
        self.fn = fn
        self.addresses = addresses
        self.fence = fence  # the actor whose owner writes: its fence is read first

    def __call__(self, conn: Any, now: float) -> Any:
        return self.fn(conn, now)


class _Claimed:
    """What a write that claimed its actor first returns: the claim's epoch too."""

    __slots__ = ("epoch", "result")

    def __init__(self, epoch: int, result: object) -> None:
        self.epoch = epoch
        self.result = result


class PgFencedWrites(OpQueue):
    """The writes of `PostgresStore` that differ from SQLite's (see the module)."""

    node: str
    _state: WriterState
    _lease_life: int
    _epochs: dict[str, int]
    _dropped: set[str]
    _fences: dict[str, tuple[int, int]]
    _notes: set[tuple[str, str]]

    def _lost(self, address: str) -> LeaseLost:
        return LeaseLost(
            f"node {self.node!r} no longer owns {address!r} (another node took it after this "
            "node's lease lapsed); nothing was written, and the actor stops here"
        )

    # -- fenced writes ---------------------------------------------------------

    async def enqueue(self, items: Sequence[Enqueue]) -> list[StoredAck | Exception]:
        state = self._state
        return await self._submit(
            Touching(
                lambda conn, now: [mailbox_ops.enqueue(conn, state, i, now) for i in items],
                [i.address for i in items],
            )
        )

    def enqueue_soon(self, item: Enqueue, then: Callable[[StoredAck | Exception], None]) -> bool:
        state = self._state
        return self._submit_soon(
            Touching(lambda conn, now: mailbox_ops.enqueue(conn, state, item, now), [item.address]),
            then,
        )

    def _fenced_op(
        self, address: str, write: Callable[[Any, float], Any], touches: Sequence[str] = ()
    ) -> tuple[int | None, Callable[[Any, float], Any]]:
        """``write`` behind the fence of ``address``: with the epoch of this
        node's claim, or, for an actor it has not claimed (a first write, as a
        store's own tests make), after a claim in the same transaction."""
        epoch = self._epochs.get(address)
        node, life = self.node, self._lease_life
        fences = self._fences
        lost = epoch is None and address in self._dropped

        def op(conn: Any, now: float) -> Any:
            if lost:
                return _FENCED
            if epoch is None:
                taken = lease.claim(conn.conn, address, node, life)
                return _FENCED if taken is None else _Claimed(taken, write(conn, now))
            # Read (and locked) before the batch's ops ran, in its transaction.
            if fences.get(address) != (life, epoch):
                return _FENCED
            return write(conn, now)

        return epoch, Touching(op, [address, *touches], fence=None if epoch is None else address)

    async def _fenced_submit(
        self,
        address: str,
        write: Callable[[Any, float], Any],
        touches: Sequence[str] = (),
        *,
        step: bool = False,
    ) -> Any:
        epoch, op = self._fenced_op(address, write, touches)
        return self._unfenced(address, epoch, await self._submit(op, step=step))

    def _unfenced(self, address: str, epoch: int | None, result: Any) -> Any:
        """The result of a fenced op as its caller should hear it (raises `LeaseLost`)."""
        if result is _FENCED:
            if epoch is not None and self._epochs.get(address) == epoch:
                del self._epochs[address]
                self._dropped.add(address)
            raise self._lost(address)
        if isinstance(result, _Claimed):
            # Epochs only grow: a later claim in the same batch wins.
            self._epochs[address] = max(self._epochs.get(address, 0), result.epoch)
            return result.result
        return result

    def _commit_write(self, c: Commit) -> Callable[[Any, float], CommitResult]:
        state, notes = self._state, self._notes

        def write(conn: Any, now: float) -> CommitResult:
            result = commit_ops.commit(conn, state, c, now)
            if result.events:
                notes.add((EVENTS, c.address))  # subscribers on other nodes read them
            return result

        return write

    async def commit(self, c: Commit) -> CommitResult:
        touches = [s.address for s in c.sends]  # its sends lock their recipients' rows
        result: CommitResult = await self._fenced_submit(
            c.address, self._commit_write(c), touches, step=True
        )
        return result

    def commit_soon(self, c: Commit, then: Callable[[CommitResult | Exception], None]) -> bool:
        address = c.address
        epoch, op = self._fenced_op(address, self._commit_write(c), [s.address for s in c.sends])

        def told(outcome: Any) -> None:
            if not isinstance(outcome, BaseException):
                try:
                    outcome = self._unfenced(address, epoch, outcome)
                except LeaseLost as lost:
                    outcome = lost
            then(outcome)

        return self._submit_soon(op, told, step=True)

    async def mark_attempts(
        self, address: str, first: int, last: int, attempts: int | None = None
    ) -> None:
        state = self._state

        def write(conn: Any, now: float) -> None:
            mailbox_ops.mark_attempts(conn, state, address, first, last, attempts)

        await self._fenced_submit(address, write)

    # -- notifications, on the writer's thread -----------------------------------

    def _note(self, result: object) -> None:
        """Remember whom ``result`` (an op's) should wake, for the batch's COMMIT:
        the owner of each mailbox it stored a message in."""
        if isinstance(result, StoredAck):
            if not result.duplicate:
                self._notes.add((MAIL, result.address))
        elif isinstance(result, CommitResult):
            for ack in result.acks:
                self._note(ack)
        elif isinstance(result, list):
            for item in result:
                self._note(item)
        elif isinstance(result, _Claimed):
            self._note(result.result)
