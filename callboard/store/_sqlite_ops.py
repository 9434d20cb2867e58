"""The SQLite statements behind each store operation, run on the writer thread.

Each function takes an open connection inside a transaction and does one
logical operation; the writer batches many of them into one COMMIT (one
fsync). Nothing here awaits: these run in a worker thread.
"""

from __future__ import annotations

import sqlite3

import orjson

from ..errors import ActorStopped, UnknownActor
from ._records import Commit, CommitResult, Enqueue, NewEvent, StoredAck

SCHEMA = """
CREATE TABLE IF NOT EXISTS actors (
    address TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    spec BLOB,
    status TEXT NOT NULL DEFAULT 'idle',
    final INTEGER NOT NULL DEFAULT 0,
    state BLOB,
    state_version INTEGER NOT NULL DEFAULT 0,
    cursor INTEGER NOT NULL DEFAULT 0,
    mailbox_head INTEGER NOT NULL DEFAULT 0,
    event_head INTEGER NOT NULL DEFAULT 0,
    restarts INTEGER NOT NULL DEFAULT 0,
    busy INTEGER NOT NULL DEFAULT 0,
    last_error BLOB,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS actors_kind ON actors(kind);
CREATE INDEX IF NOT EXISTS actors_work ON actors(final, busy);
CREATE TABLE IF NOT EXISTS mailbox (
    address TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    body BLOB NOT NULL,
    sender TEXT,
    key TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    at REAL NOT NULL,
    PRIMARY KEY (address, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS keys (
    address TEXT NOT NULL,
    key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (address, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS keys_at ON keys(at);
CREATE TABLE IF NOT EXISTS events (
    address TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    data BLOB NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (address, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS timers (
    id INTEGER PRIMARY KEY,
    address TEXT NOT NULL,
    due REAL NOT NULL,
    type TEXT NOT NULL,
    body BLOB NOT NULL,
    key TEXT
);
CREATE INDEX IF NOT EXISTS timers_due ON timers(due);
CREATE UNIQUE INDEX IF NOT EXISTS timers_key ON timers(address, key) WHERE key IS NOT NULL;
CREATE TABLE IF NOT EXISTS dead_letters (
    id INTEGER PRIMARY KEY,
    address TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    body BLOB NOT NULL,
    sender TEXT,
    key TEXT,
    attempts INTEGER NOT NULL,
    error BLOB NOT NULL,
    at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS dead_letters_address ON dead_letters(address);
CREATE TABLE IF NOT EXISTS logs (
    address TEXT NOT NULL,
    log TEXT NOT NULL,
    idx INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (address, log, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

SCHEMA_VERSION = "1"


def enqueue(conn: sqlite3.Connection, item: Enqueue, now: float) -> StoredAck | Exception:
    """Append one message, honouring its idempotency key; errors are returned, not raised."""
    if item.key is not None:
        seen = conn.execute(
            "SELECT seq FROM keys WHERE address = ? AND key = ?", (item.address, item.key)
        ).fetchone()
        if seen is not None:
            return StoredAck(item.address, seen[0], True)
    # The common case is one statement: the actor exists and takes messages.
    row = conn.execute(
        "UPDATE actors SET mailbox_head = mailbox_head + 1 WHERE address = ? AND final = 0 "
        "RETURNING mailbox_head",
        (item.address,),
    ).fetchone()
    if row is None:
        refused = _missing_or_final(conn, item, now)
        if refused is not None:
            return refused
        row = (1,)
    seq = row[0]
    conn.execute(
        "INSERT INTO mailbox (address, seq, type, body, sender, key, at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (item.address, seq, item.type, item.body, item.sender, item.key, now),
    )
    if item.key is not None:
        conn.execute(
            "INSERT INTO keys (address, key, seq, at) VALUES (?, ?, ?, ?)",
            (item.address, item.key, seq, now),
        )
    return StoredAck(item.address, seq, False)


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


def commit(conn: sqlite3.Connection, c: Commit, now: float) -> CommitResult:
    """Apply one actor step: snapshot, cursor, events, sends, timers, logs, status."""
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
    if c.events:
        sets.append("event_head = event_head + ?")
        args.append(len(c.events))
    sets.append("address = address")
    row = conn.execute(
        f"UPDATE actors SET {', '.join(sets)} WHERE address = ? RETURNING event_head",
        (*args, c.address),
    ).fetchone()
    if row is None:
        raise UnknownActor(f"there is no actor at {c.address!r} to commit to")
    events: list[tuple[int, NewEvent]] = []
    first = row[0] - len(c.events) + 1
    for offset, event in enumerate(c.events):
        events.append((first + offset, event))
    if events:
        conn.executemany(
            "INSERT INTO events (address, seq, type, data, at) VALUES (?, ?, ?, ?, ?)",
            [(c.address, seq, e.type, e.data, e.at) for seq, e in events],
        )
    if c.dead_letter is not None:
        _dead_letter(conn, c.address, c.dead_letter[0], c.dead_letter[1], now)
    if c.cursor is not None:
        conn.execute("DELETE FROM mailbox WHERE address = ? AND seq <= ?", (c.address, c.cursor))
    for key in c.cancel_timers:
        conn.execute("DELETE FROM timers WHERE address = ? AND key = ?", (c.address, key))
    for timer in c.timers:
        conn.execute(
            "INSERT OR REPLACE INTO timers (address, due, type, body, key) VALUES (?, ?, ?, ?, ?)",
            (c.address, timer.due, timer.type, timer.body, timer.key),
        )
    for log, data in c.appends:
        (last,) = conn.execute(
            "SELECT COALESCE(MAX(idx), -1) FROM logs WHERE address = ? AND log = ?",
            (c.address, log),
        ).fetchone()
        conn.execute(
            "INSERT INTO logs (address, log, idx, data) VALUES (?, ?, ?, ?)",
            (c.address, log, last + 1, data),
        )
    acks = tuple(_send_or_dead_letter(conn, item, now) for item in c.sends)
    return CommitResult(events=tuple(events), acks=acks, timers_added=len(c.timers))


def _send_or_dead_letter(conn: sqlite3.Connection, item: Enqueue, now: float):
    # A message an actor sends is part of its commit: if the recipient cannot
    # take it, it goes to the dead letters rather than failing the sender's step.
    result = enqueue(conn, item, now)
    if isinstance(result, Exception):
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


def _dead_letter(conn: sqlite3.Connection, address: str, seq: int, error: bytes, now: float):
    conn.execute(
        "INSERT INTO dead_letters (address, seq, type, body, sender, key, attempts, error, at) "
        "SELECT address, seq, type, body, sender, key, attempts, ?, ? FROM mailbox "
        "WHERE address = ? AND seq = ?",
        (error, now, address, seq),
    )


def mark_attempts(conn: sqlite3.Connection, address: str, first: int, last: int) -> None:
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


def fire_timers(conn: sqlite3.Connection, now: float) -> list[StoredAck | Exception]:
    due = conn.execute(
        "SELECT id, address, type, body, key FROM timers WHERE due <= ? ORDER BY due, id", (now,)
    ).fetchall()
    acks = []
    for timer_id, address, type_, body, _key in due:
        conn.execute("DELETE FROM timers WHERE id = ?", (timer_id,))
        # The timer key is scoped to timers; the mailbox key makes a fired
        # timer idempotent should the same timer row ever be read twice.
        acks.append(
            _send_or_dead_letter(
                conn, Enqueue(address, type_, body, sender=address, key=f"timer:{timer_id}"), now
            )
        )
    return acks


def requeue(conn: sqlite3.Connection, dead_letter_id: int, now: float) -> StoredAck | Exception:
    row = conn.execute(
        "SELECT address, type, body, sender FROM dead_letters WHERE id = ?", (dead_letter_id,)
    ).fetchone()
    if row is None:
        return LookupError(f"there is no dead letter with id {dead_letter_id}")
    address, type_, body, sender = row
    # Re-queued without its key: the original key already names the dead copy.
    result = enqueue(conn, Enqueue(address, type_, body, sender=sender), now)
    if not isinstance(result, Exception):
        conn.execute("DELETE FROM dead_letters WHERE id = ?", (dead_letter_id,))
    return result


def prune_keys(conn: sqlite3.Connection, before: float) -> int:
    return conn.execute("DELETE FROM keys WHERE at < ?", (before,)).rowcount
