"""Retention in the store: the bounded write op that deletes what is no longer kept.

The runtime's retention service (``callboard.runtime._retention``) runs a
pass as a series of `retain` ops, each queued to the writer like any other
write: it shares the fsync of the batch it lands in, and it deletes at most
``RetentionPolicy.batch`` rows and frees at most ``vacuum_pages`` pages, so
no op holds the writer for long. Each op returns the `RetentionStep` to go
on from; a pass ends at the step whose ``phase`` is ``"done"``.

A pass goes through these phases, in this order:

1. ``dead_letters``: dead letters stored before ``dead_letters_before``.
2. ``stopped``: actors that went final (stopped or failed) before
   ``stopped_before``: their events, logs, mailbox rows, idempotency keys
   and timers, then their row. Their dead letters stay (phase 1 has them).
3. ``events``: the events of each actor beyond its newest ``keep_events``.
4. ``old_events``: the events of each actor stored before
   ``events_before``, from its oldest up to its first younger one.
5. ``vacuum``: free pages given back to the file system
   (``incremental_vacuum``), so the file shrinks after a big prune.

Events go from the oldest up, and ``actors.events_from`` (the first seq
still held) moves with them in the same transaction: an actor always holds
exactly its events ``events_from .. event_head``. So a reader asking for the
events after a seq below ``events_from - 1`` is told they were pruned
(`callboard.errors.Pruned`), never handed a gap. Nothing here touches the
logs of an actor that has not gone final: a session's conversation lives as
long as the session.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import attrs

from ._sqlite_ops import WriterState

__all__ = [
    "PHASES",
    "VACUUM_PAGES",
    "Deletion",
    "RetentionPolicy",
    "RetentionStep",
    "delete_actor",
    "retain",
]

VACUUM_PAGES = 512
"""Free pages one op gives back at most (2 MiB of 4 KiB pages, a few ms)."""

_WALK = 256
"""Actors the ``old_events`` phase looks at in one op (one indexed read each)."""

PHASES = ("dead_letters", "stopped", "events", "old_events", "vacuum")

_INCREMENTAL = 2  # ``PRAGMA auto_vacuum``'s value for INCREMENTAL

# The rows of a final actor besides its events, at most ``?`` at a time.
_DEPENDENTS = (
    "DELETE FROM logs WHERE (address, log, idx) IN "
    "(SELECT address, log, idx FROM logs WHERE address = ? LIMIT ?)",
    "DELETE FROM mailbox WHERE (address, seq) IN "
    "(SELECT address, seq FROM mailbox WHERE address = ? LIMIT ?)",
    "DELETE FROM keys WHERE (address, key) IN "
    "(SELECT address, key FROM keys WHERE address = ? LIMIT ?)",
    "DELETE FROM timers WHERE id IN (SELECT id FROM timers WHERE address = ? LIMIT ?)",
)


@attrs.frozen
class RetentionPolicy:
    """What a pass removes: absolute times by the runtime's clock, None to keep.

    Attributes:
        keep_events: the newest events kept per actor.
        events_before: events stored before this time go.
        stopped_before: actors that went final before this time go, with all they held.
        dead_letters_before: dead letters stored before this time go.
        batch: rows one op deletes at most.
        vacuum_pages: free pages one op gives back at most.
    """

    keep_events: int | None = None
    events_before: float | None = None
    stopped_before: float | None = None
    dead_letters_before: float | None = None
    batch: int = 2000
    vacuum_pages: int = VACUUM_PAGES


@attrs.frozen
class RetentionStep:
    """Where the next op of a pass starts (``phase``, and in ``old_events`` the
    address it goes on ``after``), and what the op that returned it removed."""

    phase: str = PHASES[0]
    after: str = ""
    events: int = 0
    actors: int = 0
    rows: int = 0
    """Logs, mailbox rows, keys and timers of the actors removed."""
    dead_letters: int = 0
    pages: int = 0

    @property
    def done(self) -> bool:
        return self.phase == "done"


@attrs.define
class _Tally:
    """One op's budget of rows and what it removed."""

    left: int
    events: int = 0
    actors: int = 0
    rows: int = 0
    dead_letters: int = 0
    pages: int = 0

    def step(self, phase: str, after: str = "") -> RetentionStep:
        return RetentionStep(
            phase, after, self.events, self.actors, self.rows, self.dead_letters, self.pages
        )


def retain(
    conn: sqlite3.Connection, w: WriterState, policy: RetentionPolicy, start: RetentionStep
) -> RetentionStep:
    """One bounded op of a pass, from ``start`` on; the step to go on from."""
    # The writer's deferred rows and counters first: from here the tables are the truth.
    w.flush(conn)
    tally = _Tally(policy.batch)
    for index in range(PHASES.index(start.phase), len(PHASES)):
        phase = PHASES[index]
        after = start.after if phase == start.phase else ""
        finished, after = _PHASE[phase](conn, w, policy, tally, after)
        if not finished:
            return tally.step(phase, after)
    return tally.step("done")


@attrs.frozen
class Deletion:
    """What one op of `delete_actor` found and did.

    ``status`` is the actor's (None: there is no actor there); ``final``
    whether it has ended; ``done`` whether it is gone (an ended actor with
    more rows than one op's budget takes several ops; one that has not
    ended is left as it is).
    """

    status: str | None
    final: bool = False
    done: bool = False


def delete_actor(conn: sqlite3.Connection, w: WriterState, address: str, batch: int) -> Deletion:
    """Remove the ended actor at ``address`` with everything it held, as the
    ``stopped`` phase of a pass removes one (its dead letters stay), at most
    ``batch`` rows an op; an actor that has not ended is left untouched."""
    w.flush(conn)
    row = conn.execute(
        "SELECT status, final, events_from, event_head FROM actors WHERE address = ?",
        (address,),
    ).fetchone()
    if row is None:
        return Deletion(None)
    status, final, first, head = row
    if not final:
        return Deletion(status)
    done = _remove_actor(conn, w, address, first, head, _Tally(batch))
    return Deletion(status, final=True, done=done)


def _dead_letters(
    conn: sqlite3.Connection, w: WriterState, policy: RetentionPolicy, tally: _Tally, after: str
) -> tuple[bool, str]:
    if policy.dead_letters_before is None or tally.left <= 0:
        return tally.left > 0, after
    deleted = conn.execute(
        "DELETE FROM dead_letters WHERE id IN "
        "(SELECT id FROM dead_letters WHERE at < ? ORDER BY at LIMIT ?)",
        (policy.dead_letters_before, tally.left),
    ).rowcount
    tally.dead_letters += deleted
    tally.left -= deleted
    return tally.left > 0, after


def _stopped(
    conn: sqlite3.Connection, w: WriterState, policy: RetentionPolicy, tally: _Tally, after: str
) -> tuple[bool, str]:
    if policy.stopped_before is None or tally.left <= 0:
        return tally.left > 0, after
    # Each actor costs at least its row: as many as the budget, at most.
    rows = conn.execute(
        "SELECT address, events_from, event_head FROM actors "
        "WHERE stopped_at < ? AND +final = 1 ORDER BY stopped_at LIMIT ?",
        (policy.stopped_before, tally.left),
    ).fetchall()
    for address, first, head in rows:
        if not _remove_actor(conn, w, address, first, head, tally):
            return False, after
    return tally.left > 0, after


def _remove_actor(
    conn: sqlite3.Connection, w: WriterState, address: str, first: int, head: int, tally: _Tally
) -> bool:
    """True once the actor is gone; False when the budget ran out before (the
    next op goes on: its row, removed last, still names it)."""
    if first <= head and not _prune(conn, address, first, head + 1, tally):
        return False
    for statement in _DEPENDENTS:
        if tally.left <= 0:
            return False
        deleted = conn.execute(statement, (address, tally.left)).rowcount
        tally.rows += deleted
        tally.left -= deleted
    if tally.left <= 0:
        return False
    conn.execute("DELETE FROM actors WHERE address = ?", (address,))
    # A final actor is not cached (see ``WriterState``); this makes sure.
    w.heads.pop(address, None)
    w.dirty.discard(address)
    tally.actors += 1
    tally.left -= 1
    return True


def _prune(conn: sqlite3.Connection, address: str, first: int, to: int, tally: _Tally) -> bool:
    """Delete the events of ``address`` from ``first`` up to before ``to``, as far
    as the budget goes, and move ``events_from`` with them; True if all went."""
    until = min(to, first + max(tally.left, 0))
    if until <= first:
        return until >= to
    deleted = conn.execute(
        "DELETE FROM events WHERE address = ? AND seq < ?", (address, until)
    ).rowcount
    conn.execute("UPDATE actors SET events_from = ? WHERE address = ?", (until, address))
    tally.events += deleted
    tally.left -= max(deleted, 1)
    return until >= to


def _events(
    conn: sqlite3.Connection, w: WriterState, policy: RetentionPolicy, tally: _Tally, after: str
) -> tuple[bool, str]:
    keep = policy.keep_events
    if keep is None or tally.left <= 0:
        return tally.left > 0, after
    # Found through the index on ``event_head - events_from``: only the
    # actors that hold more than ``keep``, not every actor.
    rows = conn.execute(
        "SELECT address, events_from, event_head FROM actors "
        "WHERE event_head - events_from >= ? LIMIT ?",
        (keep, tally.left),
    ).fetchall()
    for address, first, head in rows:
        if not _prune(conn, address, first, head - keep + 1, tally):
            return False, after
    return tally.left > 0, after


def _old_events(
    conn: sqlite3.Connection, w: WriterState, policy: RetentionPolicy, tally: _Tally, after: str
) -> tuple[bool, str]:
    before = policy.events_before
    if before is None:
        return True, after
    # There is no index on ``at`` (it would cost every commit): the phase walks
    # the actors that hold events, in address order, a few hundred an op.
    rows = conn.execute(
        "SELECT address, events_from, event_head FROM actors "
        "WHERE address > ? AND event_head >= events_from ORDER BY address LIMIT ?",
        (after, _WALK),
    ).fetchall()
    for address, first, head in rows:
        if tally.left <= 0:
            return False, after
        # From the oldest up to the first younger one, as far as the budget goes.
        cursor = conn.execute(
            "SELECT seq, at FROM events WHERE address = ? AND seq >= ? ORDER BY seq LIMIT ?",
            (address, first, tally.left),
        )
        to, young = first, False
        try:
            for seq, at in cursor:
                if at >= before:
                    young = True
                    break
                to = seq + 1
        finally:
            cursor.close()
        if to > first:
            _prune(conn, address, first, to, tally)
        if not young and to <= head and tally.left <= 0:
            return False, after  # this actor again, next op
        after = address
    return len(rows) < _WALK, after


def _vacuum(
    conn: sqlite3.Connection, w: WriterState, policy: RetentionPolicy, tally: _Tally, after: str
) -> tuple[bool, str]:
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != _INCREMENTAL:
        return True, after  # converted at the next open (see ``_schema``)
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    pages = min(free, policy.vacuum_pages)
    # One page a statement: Python's sqlite3 steps a statement that returns no
    # columns once, and each step of ``incremental_vacuum`` frees one page.
    for _ in range(pages):
        conn.execute("PRAGMA incremental_vacuum(1)")
    tally.pages += pages
    return pages == free, after


_Phase = Callable[[sqlite3.Connection, WriterState, RetentionPolicy, _Tally, str], tuple[bool, str]]
_PHASE: dict[str, _Phase] = {
    "dead_letters": _dead_letters,
    "stopped": _stopped,
    "events": _events,
    "old_events": _old_events,
    "vacuum": _vacuum,
}
