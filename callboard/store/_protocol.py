"""`Store`: what the layers above ask of persistence, async throughout.

The runtime, its cells, the hub, retention, the gateway and the metrics type
against this protocol, never against a backend: `SqliteStore` is the first
implementation, and a networked one fills the same methods. Bodies, states
and event data cross it already serialized (bytes of JSON).

Writes are durable when they return (the backend's group commit), and
cancel-atomic: a write cancelled before it is queued did not happen, and one
queued is waited for. Reads see every write that returned before they began.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from ._records import (
    ActorRecord,
    Commit,
    CommitResult,
    DeadLetterRecord,
    Enqueue,
    EventPage,
    EventRecord,
    MailboxRecord,
    NodeRecord,
    StoredAck,
    StoreStatistics,
)
from ._retention import Deletion, RetentionPolicy, RetentionStep
from ._timings import CommitHistograms

__all__ = ["Store"]


class Store(Protocol):
    """Persistence of actors, mailboxes, events, timers, logs and dead letters."""

    directory: Path
    """The data directory (its lock, its token, the backend's files if local)."""
    key_clock: Callable[[], float]
    """Stamps idempotency keys (the runtime sets its steady clock here)."""
    on_recovered: Callable[[], None] | None
    """Called after the store recovered from a fail-stop (writes may have landed)."""
    life: int
    """Tells this opening of the store from every other one: stamped on each
    message stored (`MailboxRecord.life`), so that a row stored in an earlier
    life is known to have been pending when that life ended."""

    # -- several nodes on one store (trivial on one: see ``_single_node``) -----

    on_wake: Callable[[str], None] | None
    """Called on the trio thread when ``address`` may have work for this node:
    another node stored a message for it, or it has work and no live owner."""
    on_events: Callable[[str | None], None] | None
    """Called when another node committed events of ``address`` (None: of any
    actor, when a notification may have been lost): subscribers here read them."""
    on_lost: Callable[[Sequence[str]], None] | None
    """Called when this node lost its lease on these actors: stop them at once."""

    def owns(self, address: str) -> bool:
        """Whether this node holds ``address``'s lease and may run it."""
        ...

    async def claim(self, address: str) -> bool:
        """Take ``address``'s lease unless a live node holds it; True if this
        node holds it now. Its commits are fenced by it (`LeaseLost`)."""
        ...

    async def nodes(self) -> list[NodeRecord]:
        """The nodes on the store, with heartbeat and actors owned ([] on one node)."""
        ...

    @property
    def healthy(self) -> bool:
        """False from an I/O error at COMMIT until the store has recovered."""
        ...

    def statistics(self) -> StoreStatistics: ...

    def commit_histograms(self) -> CommitHistograms:
        """Ack latency, commit latency and batch size of every group commit so far."""
        ...

    async def writable(self) -> bool:
        """Whether the store takes writes now: an empty write went through the
        writer, and the store is neither stopped nor refusing writes (a full disk)."""
        ...

    # -- writes ------------------------------------------------------------------

    async def enqueue(self, items: Sequence[Enqueue]) -> list[StoredAck | Exception]:
        """Append messages to mailboxes; each item succeeds or fails alone."""
        ...

    def enqueue_soon(self, item: Enqueue, then: Callable[[StoredAck | Exception], None]) -> bool:
        """Append one message without waiting: ``then`` is called on the trio
        thread with its outcome once it is durable (or refused). Returns False,
        having queued nothing, when that would have to wait (use `enqueue`)."""
        ...

    async def commit(self, c: Commit) -> CommitResult:
        """One actor's handled batch: state, cursor, events, sends, timers, logs."""
        ...

    def commit_soon(self, c: Commit, then: Callable[[CommitResult | Exception], None]) -> bool:
        """`commit` without waiting: ``then`` is called on the trio thread with
        its result once it is durable, or with the exception that refused it.
        Returns False, having queued nothing, when that would have to wait."""
        ...

    async def after_next_commit(self) -> None:
        """Return once the group commit being written (or, with writes queued,
        the next one) is done; at once when the writer is idle. Writes nothing."""
        ...

    def call_after_next_commit(self, fn: Callable[[], None]) -> bool:
        """`after_next_commit` without waiting: ``fn`` is called on the trio
        thread once that group commit is done. False, keeping nothing, when
        the writer is idle (there is nothing to wait for)."""
        ...

    async def mark_attempts(
        self, address: str, first: int, last: int, attempts: int | None = None
    ) -> None:
        """Count an attempt of messages ``first..last``, durably, before it starts
        (``attempts``: at least that many in all)."""
        ...

    async def spawn(self, address: str, kind: str, spec: bytes) -> tuple[bool, bytes | None]:
        """Create the actor; (existed, the stored spec) when it was already there."""
        ...

    async def fire_timers(self) -> list[StoredAck | Exception]:
        """Turn every due timer into a message in its actor's mailbox."""
        ...

    async def requeue(self, dead_letter_id: int) -> StoredAck | Exception: ...

    async def prune_keys(self, older_than: float, *, now: float | None = None) -> int: ...

    async def retain(self, policy: RetentionPolicy, step: RetentionStep) -> RetentionStep:
        """One bounded step of a retention pass, from ``step`` on."""
        ...

    async def delete(self, address: str, *, batch: int = 2000) -> Deletion:
        """One bounded op of removing an ended actor with all it held; repeat until
        ``done`` (an actor that has not ended is left as it is)."""
        ...

    # -- reads -------------------------------------------------------------------

    async def actor(self, address: str) -> ActorRecord | None: ...

    async def actors(
        self, kind: str | None = None, *, status: str | None = None, after: str | None = None,
        limit: int = 10_000,
    ) -> list[ActorRecord]:  # fmt: skip
        """At most ``limit`` actors in address order, past ``after`` (a page)."""
        ...

    async def pending(self, address: str, after: int, limit: int) -> list[MailboxRecord]:
        """Unhandled messages of ``address`` after seq ``after``, in order."""
        ...

    async def events(self, address: str, after: int, limit: int) -> list[EventRecord]: ...

    async def read_events(
        self, address: str, after: int, *, limit: int, max_bytes: int
    ) -> EventPage:
        """The next page of events after ``after`` (`Pruned` if retention took some)."""
        ...

    async def check_held(self, address: str, after: int) -> None:
        """Raise `Pruned` if events of ``address`` after ``after`` are gone."""
        ...

    async def addresses_with_work(self, now: float) -> list[str]:
        """Actors a killed process left with something to do."""
        ...

    async def status_counts(self) -> dict[str, int]: ...

    async def dead_letter_count(self) -> int: ...

    async def next_timer_due(self) -> float | None: ...

    async def dead_letters(self, address: str | None = None) -> list[DeadLetterRecord]: ...

    async def read_log(
        self, address: str, log: str, start: int = 0, limit: int = 1000
    ) -> list[bytes]: ...

    async def log_length(self, address: str, log: str) -> int: ...
