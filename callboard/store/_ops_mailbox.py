"""The writer's operations on messages, actors, timers, dead letters and keys.

Enqueueing (with its idempotency key, creating a virtual actor), spawning,
firing due timers, re-queueing a dead letter, marking attempts and pruning
keys: the SQLite statements of each, run by the store's writer inside a
batch's transaction against its `WriterState` (see ``_sqlite_ops``). Apart
from ``_ops_commit`` because these store and route messages, where a commit
applies an actor's step; a commit's sends go through `send_or_dead_letter`
here.
"""

from __future__ import annotations

import sqlite3

import orjson

from ..errors import ActorStopped, UnknownActor
from ._records import Enqueue, StoredAck
from ._sqlite_ops import WriterState


def enqueue(
    conn: sqlite3.Connection, w: WriterState, item: Enqueue, now: float
) -> StoredAck | Exception:
    """Append one message, honouring its idempotency key; errors are returned, not raised."""
    if item.key is not None:
        seen = conn.execute(
            "SELECT seq FROM keys WHERE address = ? AND key = ?", (item.address, item.key)
        ).fetchone()
        if seen is not None:
            return StoredAck(item.address, seen[0], True)
    address = item.address
    entry = w.counters(conn, address)
    if entry is None:
        refused = _missing_or_final(conn, item, now)
        if refused is not None:
            return refused
        # Created with mailbox_head = 1: the table is up to date.
        seq = 1
        w.heads[address] = (1, 0)
    else:
        seq = entry[0] + 1
        w.heads[address] = (seq, entry[1])
        w.dirty.add(address)
    # Deferred to ``WriterState.flush`` (see ``mailbox_read`` for why that is safe).
    w.mailbox_rows.append((address, seq, item.type, item.body, item.sender, item.key, now, w.life))
    w.inserted_from.setdefault(address, seq)
    if item.key is not None:
        conn.execute(
            "INSERT INTO keys (address, key, seq, at) VALUES (?, ?, ?, ?)",
            (address, item.key, seq, w.key_stamp),
        )
    return StoredAck(address, seq, False)


class ActorRowRaced(Exception):
    """The actor's row was created by another writer after this transaction
    looked for it (several nodes on PostgreSQL, whose statements each see the
    latest commit): the batch is run again, and then finds it."""


def _missing_or_final(conn: sqlite3.Connection, item: Enqueue, now: float) -> Exception | None:
    """Why an actor did not take a message, or None once a virtual one was created."""
    row = conn.execute(
        "SELECT status, final FROM actors WHERE address = ?", (item.address,)
    ).fetchone()
    if row is not None and not row[1]:
        # Not final, yet the counters found none: it appeared in between.
        raise ActorRowRaced(f"the row of {item.address!r} was created meanwhile")
    if row is not None:
        return ActorStopped(
            f"{item.address!r} is {row[0]} and takes no more messages; "
            "spawn a new actor or re-queue from the dead letters"
        )
    if item.create_kind is None:
        return UnknownActor(f"there is no actor at {item.address!r}; spawn it first")
    conn.execute(
        "INSERT INTO actors (address, kind, mailbox_head, created_at) VALUES (?, ?, 1, ?)",
        (item.address, item.create_kind, now),
    )
    return None


def send_or_dead_letter(
    conn: sqlite3.Connection, w: WriterState, item: Enqueue, now: float
) -> StoredAck | Exception:
    # A message an actor sends is part of its commit: if the recipient cannot
    # take it, it goes to the dead letters rather than failing the sender's step.
    result = enqueue(conn, w, item, now)
    if isinstance(result, Exception) and not (
        item.drop_if_stopped and isinstance(result, ActorStopped)
    ):
        conn.execute(
            "INSERT INTO dead_letters (address, seq, type, body, sender, key, attempts, error, at) "
            "VALUES (?, 0, ?, ?, ?, ?, 0, ?, ?)",
            (
                item.address,
                item.type,
                item.body,
                item.sender,
                item.key,
                _error_json(type(result).__name__, str(result)),
                now,
            ),
        )
    return result


def _error_json(kind: str, message: str) -> bytes:
    return orjson.dumps({"type": kind, "message": message, "traceback": ""})


def mark_attempts(
    conn: sqlite3.Connection,
    w: WriterState,
    address: str,
    first: int,
    last: int,
    attempts: int | None = None,
) -> None:
    """Count one more attempt of messages ``first..last`` (with ``attempts``:
    at least that many, for a message whose earlier attempt was assumed)."""
    # Updates mailbox rows: they must be in the table if this batch stored them.
    w.mailbox_read(conn, address, first, last)
    conn.execute(
        "UPDATE mailbox SET attempts = MAX(attempts + 1, ?) "
        "WHERE address = ? AND seq BETWEEN ? AND ?",
        (attempts or 0, address, first, last),
    )


def attempted_at_least(
    conn: sqlite3.Connection, w: WriterState, address: str, first: int, last: int, n: int
) -> None:
    """Messages ``first..last`` were attempted at least ``n`` times (a crashed batch)."""
    w.mailbox_read(conn, address, first, last)
    conn.execute(
        "UPDATE mailbox SET attempts = MAX(attempts, ?) WHERE address = ? AND seq BETWEEN ? AND ?",
        (n, address, first, last),
    )


def spawn(
    conn: sqlite3.Connection, address: str, kind: str, spec: bytes, now: float
) -> tuple[bool, bytes | None]:
    """Create an actor row; returns (existed, the stored spec)."""
    row = conn.execute("SELECT spec FROM actors WHERE address = ?", (address,)).fetchone()
    if row is not None:
        return True, row[0]
    conn.execute(
        "INSERT INTO actors (address, kind, spec, created_at) VALUES (?, ?, ?, ?)",
        (address, kind, spec, now),
    )
    return False, spec


def fire_timers(
    conn: sqlite3.Connection, w: WriterState, now: float
) -> list[StoredAck | Exception]:
    due = conn.execute(
        "SELECT id, address, type, body, key FROM timers WHERE due <= ? ORDER BY due, id", (now,)
    ).fetchall()
    acks = []
    for timer_id, address, type_, body, _key in due:
        conn.execute("DELETE FROM timers WHERE id = ?", (timer_id,))
        # Sent with no idempotency key: the timer's row goes in the same
        # transaction as its message is stored, so it fires once without one.
        # (The keys table is the senders'; a key of the timer's there, such
        # as ``timer:{id}``, would drop a sender's message that used it, or
        # be dropped as that message's duplicate.)
        acks.append(
            send_or_dead_letter(conn, w, Enqueue(address, type_, body, sender=address), now)
        )
    return acks


def requeue(
    conn: sqlite3.Connection, w: WriterState, dead_letter_id: int, now: float
) -> StoredAck | Exception:
    row = conn.execute(
        "SELECT address, type, body, sender FROM dead_letters WHERE id = ?", (dead_letter_id,)
    ).fetchone()
    if row is None:
        return LookupError(f"there is no dead letter with id {dead_letter_id}")
    address, type_, body, sender = row
    # Re-queued without its key: the original key already names the dead copy.
    result = enqueue(conn, w, Enqueue(address, type_, body, sender=sender), now)
    if not isinstance(result, Exception):
        conn.execute("DELETE FROM dead_letters WHERE id = ?", (dead_letter_id,))
    return result


def prune_keys(conn: sqlite3.Connection, before: float) -> int:
    return conn.execute("DELETE FROM keys WHERE at < ?", (before,)).rowcount
