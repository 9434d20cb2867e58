"""The SQLite statements behind each store operation, run by the store's writer.

Each function takes an open connection inside a transaction and does one
logical operation; the writer batches many of them into one COMMIT (one
fsync). Nothing here awaits: the writer runs these on the trio thread, or
in a worker thread on its slow path (see ``SqliteStore._write``). The store's
``WriterState`` carries the actors' counters across operations and batches,
and the rows and actor columns each batch defers to its end (written by
``flush``).
"""

from __future__ import annotations

import sqlite3
from typing import Any

import orjson

from ..errors import ActorStopped, UnknownActor
from ._records import Commit, CommitResult, Enqueue, NewEvent, StoredAck

# What ``flush`` writes for an actor with deferred steps (see ``WriterState``).
_STEP_UPDATE = (
    "UPDATE actors SET state = COALESCE(?, state), state_version = COALESCE(?, state_version), "
    "cursor = MAX(cursor, ?), busy = COALESCE(?, busy), mailbox_head = ?, event_head = ? "
    "WHERE address = ?"
)


class WriterState:
    """What the writer keeps across the operations of a batch, and across batches.

    One per store, used only by its writer (the only connection that writes
    the database), one batch at a time:

    - ``heads``: address -> ``(mailbox_head, event_head)`` of actors that are
      not final, as the open transaction sees them. It spares each operation
      an ``UPDATE ... RETURNING`` on ``actors``. (Tuples of ints: the garbage
      collector stops tracking them, so a full cache adds no gc objects.)
    - ``dirty``: the addresses in ``heads`` whose counters the ``actors``
      table does not hold yet; ``flush`` writes them once per actor per
      batch, before COMMIT. Every dirty address is in ``heads``, so an
      address missing from ``heads`` has its true counters in the table.
    - ``steps``: address -> ``[state, state_version, cursor, busy]`` that
      the batch's ordinary commits (see ``commit``) set and the table does
      not hold yet, merged in the batch's order (``None``: unchanged; the
      cursor a MAX, 0 for unchanged). ``flush`` writes them with the
      counters, one UPDATE per actor per batch. Every address in ``steps``
      is in ``heads``. No writer statement reads these columns; an
      operation that writes other columns of such an actor writes its
      steps first (``flush_actor``), so the table sees the batch's order.
    - The ``mailbox`` INSERTs, ``events`` INSERTs and ``mailbox`` DELETEs of
      the batch, deferred to one ``executemany`` each in ``flush``.

    ``forget`` after every ROLLBACK and on any failure: the table is then the
    truth again. ``trim`` between batches keeps ``heads`` bounded.
    """

    __slots__ = (
        "deleted_to",
        "deletes",
        "dirty",
        "event_rows",
        "heads",
        "inserted_from",
        "key_stamp",
        "mailbox_rows",
        "max_heads",
        "steps",
    )

    def __init__(self, max_heads: int = 10_000) -> None:
        self.max_heads = max_heads
        self.heads: dict[str, tuple[int, int]] = {}
        self.dirty: set[str] = set()
        self.steps: dict[str, list[Any]] = {}
        self.mailbox_rows: list[tuple[object, ...]] = []
        self.event_rows: list[tuple[object, ...]] = []
        self.deletes: list[tuple[str, int]] = []
        # Per address: the lowest seq of a deferred mailbox INSERT, and the
        # highest cursor of a deferred mailbox DELETE (see ``mailbox_read``).
        self.inserted_from: dict[str, int] = {}
        self.deleted_to: dict[str, int] = {}
        # What the batch stamps the idempotency keys it records with (see
        # ``SqliteStore.key_clock``); set by the writer before each batch.
        self.key_stamp = 0.0

    def forget(self) -> None:
        """Drop everything: after a ROLLBACK the table holds the truth."""
        self.heads.clear()
        self.dirty.clear()
        self._clear_deferred()

    def trim(self) -> None:
        """Between batches (nothing deferred): keep ``heads`` bounded."""
        if self.dirty or self.steps or self.mailbox_rows or self.event_rows or self.deletes:
            # A batch left something unwritten: never trust the cache then.
            self.forget()
        elif len(self.heads) > self.max_heads:
            self.heads.clear()

    def _clear_deferred(self) -> None:
        self.steps.clear()
        self.mailbox_rows.clear()
        self.event_rows.clear()
        self.deletes.clear()
        self.inserted_from.clear()
        self.deleted_to.clear()

    def flush(self, conn: sqlite3.Connection) -> None:
        """Write what the batch deferred; before COMMIT, or before a read that needs it."""
        heads = self.heads
        steps = self.steps
        if steps:
            conn.executemany(_STEP_UPDATE, [(*step, *heads[a], a) for a, step in steps.items()])
            if self.dirty:
                self.dirty.difference_update(steps)
            steps.clear()
        if self.dirty:
            conn.executemany(
                "UPDATE actors SET mailbox_head = ?, event_head = ? WHERE address = ?",
                [(*heads[address], address) for address in self.dirty],
            )
            self.dirty.clear()
        # INSERTs before DELETEs: a DELETE never covers a row stored later in
        # the batch (``commit`` checks it), so this order is the batch's order.
        if self.mailbox_rows:
            conn.executemany(
                "INSERT INTO mailbox (address, seq, type, body, sender, key, at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                self.mailbox_rows,
            )
        if self.event_rows:
            conn.executemany(
                "INSERT INTO events (address, seq, type, data, at) VALUES (?, ?, ?, ?, ?)",
                self.event_rows,
            )
        if self.deletes:
            conn.executemany("DELETE FROM mailbox WHERE address = ? AND seq <= ?", self.deletes)
        self._clear_deferred()

    def mailbox_read(self, conn: sqlite3.Connection, address: str, first: int, last: int) -> None:
        """Called before a statement reads or updates ``address``'s mailbox rows
        ``first..last``: flushes if a deferred INSERT or DELETE touches them.

        Deferring the mailbox and events writes to the end of the batch is
        safe only because no operation of a batch reads a row another
        operation of the same batch wrote. For the hot paths that holds by
        construction: an actor reads, marks and dead-letters only messages it
        was handed, and it is handed a message only after the batch that stored
        it committed (and it deletes only up to a cursor it handled). Nothing
        in the writer reads ``events``, nor the ``actors`` columns that
        ``steps`` defers. The rare reads that could still see a
        deferred row (a dead letter or a mark for a message stored or deleted
        earlier in the same batch) flush first instead of relying on that.
        """
        start = self.inserted_from.get(address)
        if (start is not None and start <= last) or self.deleted_to.get(address, 0) >= first:
            self.flush(conn)

    def flush_actor(self, conn: sqlite3.Connection, address: str) -> None:
        """Write ``address``'s deferred steps and counters now, before a statement
        that writes its other columns (so the later commit's values win)."""
        step = self.steps.pop(address)
        conn.execute(_STEP_UPDATE, (*step, *self.heads[address], address))
        self.dirty.discard(address)

    def counters(self, conn: sqlite3.Connection, address: str) -> tuple[int, int] | None:
        """The live counters of an actor that takes messages; None if it is missing or final."""
        entry = self.heads.get(address)
        if entry is None:
            row = conn.execute(
                "SELECT mailbox_head, event_head FROM actors WHERE address = ? AND final = 0",
                (address,),
            ).fetchone()
            if row is None:
                return None
            entry = self.heads[address] = (row[0], row[1])
        return entry


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
    w.mailbox_rows.append((address, seq, item.type, item.body, item.sender, item.key, now))
    w.inserted_from.setdefault(address, seq)
    if item.key is not None:
        conn.execute(
            "INSERT INTO keys (address, key, seq, at) VALUES (?, ?, ?, ?)",
            (address, item.key, seq, w.key_stamp),
        )
    return StoredAck(address, seq, False)


def _missing_or_final(conn: sqlite3.Connection, item: Enqueue, now: float) -> Exception | None:
    """Why an actor did not take a message, or None once a virtual one was created."""
    row = conn.execute("SELECT status FROM actors WHERE address = ?", (item.address,)).fetchone()
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


def commit(conn: sqlite3.Connection, w: WriterState, c: Commit, now: float) -> CommitResult:
    """Apply one actor step: snapshot, cursor, events, sends, timers, logs, status."""
    address = c.address
    entry = w.heads.get(address)
    cached = entry is not None
    if entry is None:
        # None of these columns is one that ``WriterState.steps`` defers.
        row = conn.execute(
            "SELECT mailbox_head, event_head, final FROM actors WHERE address = ?", (address,)
        ).fetchone()
        if row is None:
            raise UnknownActor(f"there is no actor at {address!r} to commit to")
        entry = (row[0], row[1])
        # Only an actor that takes messages after this commit is cached: the
        # cache stands for "not final" in ``enqueue``.
        cached = not c.final and (c.final is False or not row[2])
        if cached:
            w.heads[address] = entry
    mailbox_head, event_head = entry
    first = event_head + 1
    event_head += len(c.events)
    if (
        cached
        and c.status is None
        and c.final is None
        and not c.restarts
        and c.last_error is None
        and not c.clear_error
        and c.dead_letter is None
    ):
        # The ordinary step of a live actor: deferred to ``WriterState.flush``,
        # merged with its counters and its other steps of the batch.
        if c.events:
            w.heads[address] = (mailbox_head, event_head)
            w.dirty.add(address)
        busy = None if c.busy is None else int(c.busy)
        step = w.steps.get(address)
        if step is not None:
            if c.state is not None:
                step[0] = c.state
            if c.state_version is not None:
                step[1] = c.state_version
            if c.cursor is not None and c.cursor > step[2]:
                step[2] = c.cursor
            if busy is not None:
                step[3] = busy
        elif (
            c.state is not None
            or c.state_version is not None
            or c.cursor is not None
            or busy is not None
        ):
            w.steps[address] = [c.state, c.state_version, c.cursor or 0, busy]
    else:
        if address in w.steps:
            w.flush_actor(conn, address)
        _update_actor(conn, w, c, address, cached, mailbox_head, event_head, now)
    events: tuple[tuple[int, NewEvent], ...] = tuple(
        (first + offset, event) for offset, event in enumerate(c.events)
    )
    if events:
        # Deferred to ``WriterState.flush``: nothing in the writer reads events.
        w.event_rows.extend([(address, seq, e.type, e.data, e.at) for seq, e in events])
    if c.dead_letter is not None:
        _dead_letter(conn, w, address, c.dead_letter[0], c.dead_letter[1], now)
    if c.cursor is not None:
        if c.cursor <= mailbox_head:
            # Deferred to ``WriterState.flush``, which runs it after every
            # INSERT of the batch: right, as no later INSERT of this batch
            # can get a seq at or below the current head.
            w.deletes.append((address, c.cursor))
            if c.cursor > w.deleted_to.get(address, 0):
                w.deleted_to[address] = c.cursor
        else:
            # A cursor past the head (never from the runtime): run it in
            # the batch's order rather than reason about later INSERTs.
            w.flush(conn)
            conn.execute("DELETE FROM mailbox WHERE address = ? AND seq <= ?", (address, c.cursor))
    for key in c.cancel_timers:
        conn.execute("DELETE FROM timers WHERE address = ? AND key = ?", (address, key))
    for timer in c.timers:
        conn.execute(
            "INSERT OR REPLACE INTO timers (address, due, type, body, key) VALUES (?, ?, ?, ?, ?)",
            (address, timer.due, timer.type, timer.body, timer.key),
        )
    for log, data in c.appends:
        (last,) = conn.execute(
            "SELECT COALESCE(MAX(idx), -1) FROM logs WHERE address = ? AND log = ?",
            (address, log),
        ).fetchone()
        conn.execute(
            "INSERT INTO logs (address, log, idx, data) VALUES (?, ?, ?, ?)",
            (address, log, last + 1, data),
        )
    acks = tuple(_send_or_dead_letter(conn, w, item, now) for item in c.sends)
    return CommitResult(events=events, acks=acks, timers_added=len(c.timers))


def _update_actor(
    conn: sqlite3.Connection,
    w: WriterState,
    c: Commit,
    address: str,
    cached: bool,
    mailbox_head: int,
    event_head: int,
    now: float,
) -> None:
    # The rarer commits (a status, a crash, a dead letter, an actor that is
    # or goes final): one UPDATE, in the batch's order.
    sets: list[str] = []
    args: list[object] = []
    if c.state is not None:
        sets.append("state = ?")
        args.append(c.state)
    if c.state_version is not None:
        sets.append("state_version = ?")
        args.append(c.state_version)
    if c.cursor is not None:
        sets.append("cursor = MAX(cursor, ?)")
        args.append(c.cursor)
    if c.status is not None:
        sets.append("status = ?")
        args.append(c.status)
    if c.final is not None:
        sets.append("final = ?")
        args.append(int(c.final))
        # When it went final, for ``stopped_retention``; None while it takes messages.
        sets.append("stopped_at = ?")
        args.append(now if c.final else None)
    if c.busy is not None:
        sets.append("busy = ?")
        args.append(int(c.busy))
    if c.restarts:
        sets.append("restarts = restarts + ?")
        args.append(c.restarts)
    if c.last_error is not None:
        sets.append("last_error = ?")
        args.append(c.last_error)
    elif c.clear_error:
        sets.append("last_error = NULL")
    if c.final:
        # Going final: write the counters with this UPDATE and forget the
        # actor, so a later send reads ``final`` from the table and is refused.
        if c.events or address in w.dirty:
            sets.append("mailbox_head = ?")
            args.append(mailbox_head)
            sets.append("event_head = ?")
            args.append(event_head)
        w.dirty.discard(address)
        w.heads.pop(address, None)
    elif c.events:
        if cached:
            w.heads[address] = (mailbox_head, event_head)
            w.dirty.add(address)
        else:
            # A final actor (not cached) still records its own events.
            sets.append("event_head = ?")
            args.append(event_head)
    if sets:
        conn.execute(f"UPDATE actors SET {', '.join(sets)} WHERE address = ?", (*args, address))


def _send_or_dead_letter(
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


def _dead_letter(
    conn: sqlite3.Connection, w: WriterState, address: str, seq: int, error: bytes, now: float
) -> None:
    # Reads the message's mailbox row: it must see this batch's writes to it.
    w.mailbox_read(conn, address, seq, seq)
    conn.execute(
        "INSERT INTO dead_letters (address, seq, type, body, sender, key, attempts, error, at) "
        "SELECT address, seq, type, body, sender, key, attempts, ?, ? FROM mailbox "
        "WHERE address = ? AND seq = ?",
        (error, now, address, seq),
    )


def mark_attempts(
    conn: sqlite3.Connection, w: WriterState, address: str, first: int, last: int
) -> None:
    # Updates mailbox rows: they must be in the table if this batch stored them.
    w.mailbox_read(conn, address, first, last)
    conn.execute(
        "UPDATE mailbox SET attempts = attempts + 1 WHERE address = ? AND seq BETWEEN ? AND ?",
        (address, first, last),
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
            _send_or_dead_letter(conn, w, Enqueue(address, type_, body, sender=address), now)
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
