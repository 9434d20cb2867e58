"""The writer's commit operation: one actor step, applied in the batch's transaction.

A commit stores an actor's snapshot, cursor, events, sends, timers, logs
and status. The ordinary step of a live actor is deferred to
`WriterState.flush` and merged with its other steps of the batch; the
rarer ones (a status, a crash, a dead letter, going final) run one UPDATE
in the batch's order. Apart from ``_ops_mailbox`` because it is the hot
path of every handled message and the most involved use of `WriterState`.
"""

from __future__ import annotations

import sqlite3

from ..errors import UnknownActor
from ._ops_mailbox import attempted_at_least, send_or_dead_letter
from ._records import Commit, CommitResult, NewEvent
from ._sqlite_ops import WriterState


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
        and c.attempts is None
        and c.paused is None
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
    if c.attempts is not None:
        attempted_at_least(conn, w, address, *c.attempts)
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
    acks = tuple(send_or_dead_letter(conn, w, item, now) for item in c.sends)
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
    if c.paused is not None:
        sets.append("paused = ?")
        args.append(int(c.paused))
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
