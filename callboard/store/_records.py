"""The store's vocabulary: what goes in (enqueues, commits) and what comes out (records).

Bodies, data, specs and snapshots cross this boundary as JSON bytes already
serialized by the layer above, so a store never needs to know a user's types.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

# The records a write is made of (``Enqueue`` .. ``CommitResult``) are built
# for every message: plain slotted classes, cheaper to build than frozen ones.
# Nothing hashes them, and nothing changes them once built (the writer may
# run an operation a second time, after a rollback, from the same record).

__all__ = [
    "ActorRecord",
    "Commit",
    "CommitResult",
    "DeadLetterRecord",
    "Enqueue",
    "EventPage",
    "EventRecord",
    "MailboxRecord",
    "NewEvent",
    "NewTimer",
    "NodeRecord",
    "StoreStatistics",
    "StoredAck",
]


@attrs.define
class Enqueue:
    """One message to append to an actor's mailbox.

    ``create_kind`` names the kind to create the actor as when it does not
    exist yet (virtual actors); ``None`` makes a missing actor an error.
    ``drop_if_stopped``: sent by an actor to one that takes no more
    messages, it is dropped rather than dead-lettered.
    """

    address: str
    type: str
    body: bytes
    sender: str | None = None
    key: str | None = None
    create_kind: str | None = None
    drop_if_stopped: bool = False


@attrs.define
class StoredAck:
    address: str
    seq: int
    duplicate: bool


@attrs.define
class NewEvent:
    type: str
    data: bytes
    at: float


@attrs.define
class NewTimer:
    due: float
    type: str
    body: bytes
    key: str | None = None


@attrs.define
class Commit:
    """Everything one step of one actor changes, made durable all at once.

    ``None`` means "leave as it is" for the optional fields.
    """

    address: str
    state: bytes | None = None
    state_version: int | None = None
    cursor: int | None = None
    events: tuple[NewEvent, ...] = ()
    sends: tuple[Enqueue, ...] = ()
    timers: tuple[NewTimer, ...] = ()
    cancel_timers: tuple[str, ...] = ()
    appends: tuple[tuple[str, bytes], ...] = ()
    status: str | None = None
    final: bool | None = None
    busy: bool | None = None
    restarts: int = 0
    last_error: bytes | None = None
    clear_error: bool = False
    dead_letter: tuple[int, bytes] | None = None
    attempts: tuple[int, int, int] | None = None
    """``(first, last, n)``: messages ``first..last`` were attempted at least
    ``n`` times (a crashed batch, counted before its dead letter is taken)."""
    paused: bool | None = None
    """Paused (its mailbox fills and is not handled) or resumed, from this commit on."""


@attrs.frozen
class NodeRecord:
    """A node on a shared store: its name, its last heartbeat (ISO 8601, UTC, by
    the database's clock), whether its lease is live, and the actors it owns."""

    node: str
    heartbeat: str
    live: bool
    actors: int


@attrs.define
class CommitResult:
    events: tuple[tuple[int, NewEvent], ...]
    acks: tuple[StoredAck | Exception, ...]
    timers_added: int


@attrs.frozen
class ActorRecord:
    address: str
    kind: str
    spec: bytes | None
    status: str
    final: bool
    state: bytes | None
    state_version: int
    cursor: int
    mailbox_head: int
    event_head: int
    restarts: int
    busy: bool
    last_error: bytes | None
    created_at: float
    events_from: int = 1
    """The first seq of its events still held: retention removed those before it."""
    stopped_at: float | None = None
    """When it went final (stopped or failed), by the store's clock; None before."""
    paused: bool = False
    """Paused by an operator: its mailbox fills and nothing is handled until resumed."""
    owner: str | None = None
    """The node that holds its lease (several nodes on PostgreSQL); None on one node."""

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> ActorRecord:
        """From the columns in this class's order (SQLite's 0 and 1 for the booleans);
        ``owner`` only where the store has one."""
        (address, kind, spec, status, final, state, version, cursor, head, ehead, restarts,
         busy, error, created, events_from, stopped_at, paused, *owner) = row  # fmt: skip
        return cls(
            address, kind, spec, status, bool(final), state, version, cursor, head, ehead,
            restarts, bool(busy), error, created, events_from, stopped_at, bool(paused),
            owner[0] if owner else None,
        )  # fmt: skip

    @property
    def unhandled(self) -> int:
        return self.mailbox_head - self.cursor


@attrs.frozen
class MailboxRecord:
    address: str
    seq: int
    type: str
    body: bytes
    sender: str | None
    key: str | None
    attempts: int
    at: float
    life: int | None = None
    """The `Store.life` that stored it; None for a row from before it was kept."""


@attrs.frozen
class EventRecord:
    address: str
    seq: int
    type: str
    data: bytes
    at: float


@attrs.frozen
class EventPage:
    """Stored events of one actor in seq order, and whether more were stored
    after them when the page was read (a replay reads on while ``more``)."""

    events: tuple[EventRecord, ...]
    more: bool


@attrs.frozen
class DeadLetterRecord:
    id: int
    address: str
    seq: int
    type: str
    body: bytes
    sender: str | None
    key: str | None
    attempts: int
    error: bytes
    at: float


@attrs.frozen
class StoreStatistics:
    """A snapshot of the writer's counters (for metrics and benchmarks)."""

    batches: int
    operations: int
    largest_batch: int
    commit_seconds_total: float
    recoveries: int = 0
