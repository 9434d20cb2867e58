"""The database's tables, the schema version they make, and the migrations to it.

A data directory records the version of its schema in ``meta``. Opening it
(`prepare`) creates the tables of a fresh one, migrates one of an older
version to this one in the same transaction as the version it writes (a
crash leaves the old version or the new, never half of one), and refuses
one of a version this callboard does not know, changing nothing.

A database gives the pages that retention frees back to the file system
(``auto_vacuum=INCREMENTAL``, see ``_retention``). Only a VACUUM changes
that once the file has a header (and the switch to WAL writes one), so a
fresh database is vacuumed while it is still empty, which costs one fsync;
one made before version 3 is converted once, by a VACUUM after its migration.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path

from ..errors import DataDirectoryIncompatible

__all__ = ["SCHEMA_VERSION", "prepare"]

log = logging.getLogger("callboard.store")

# Each statement creates only what is missing: on a migrated database they
# add the tables of this version and leave the migrated ones alone.
#
# ``timers.id`` is AUTOINCREMENT, so an id names one timer for good: a plain
# INTEGER PRIMARY KEY hands the id of a deleted row to the next one. (Version 2
# made it so because fired timers were then sent with the key ``timer:{id}``;
# they now carry no key, see ``fire_timers``.)
#
# ``events`` is a rowid table with a unique index (version 3): a row of a
# WITHOUT ROWID table over about 1 KB (a 4 KB page's limit for an index
# b-tree) spills to an overflow page of its own: 50,000 events of 1 KB took
# 234 MB, and take 70 MB as rows of a rowid table, which hold up to about
# 4 KB in their page (``python -m benchmarks.event_disk``; small events cost
# 7% more for the index). ``actors.events_from`` is the first seq of the actor's events
# still held (retention removes them from the oldest up), ``stopped_at``
# the time it went final; the indexes on ``event_head - events_from``,
# ``stopped_at``, ``timers.address`` and ``dead_letters.at`` let a retention
# pass find its work without reading every row. ``actors.paused`` (version 5)
# holds an operator's pause: it outlives the process, like the mailbox it holds.
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
    created_at REAL NOT NULL,
    events_from INTEGER NOT NULL DEFAULT 1,
    stopped_at REAL,
    paused INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS actors_kind ON actors(kind);
CREATE INDEX IF NOT EXISTS actors_work ON actors(final, busy);
CREATE INDEX IF NOT EXISTS actors_events_held ON actors(event_head - events_from);
CREATE INDEX IF NOT EXISTS actors_stopped ON actors(stopped_at) WHERE stopped_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS mailbox (
    address TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    body BLOB NOT NULL,
    sender TEXT,
    key TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    at REAL NOT NULL,
    life INTEGER,
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
    at REAL NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS events_seq ON events(address, seq);
CREATE TABLE IF NOT EXISTS timers (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    address TEXT NOT NULL,
    due REAL NOT NULL,
    type TEXT NOT NULL,
    body BLOB NOT NULL,
    key TEXT
);
CREATE INDEX IF NOT EXISTS timers_due ON timers(due);
CREATE UNIQUE INDEX IF NOT EXISTS timers_key ON timers(address, key) WHERE key IS NOT NULL;
CREATE INDEX IF NOT EXISTS timers_address ON timers(address);
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
CREATE INDEX IF NOT EXISTS dead_letters_at ON dead_letters(at);
CREATE TABLE IF NOT EXISTS logs (
    address TEXT NOT NULL,
    log TEXT NOT NULL,
    idx INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (address, log, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

SCHEMA_VERSION = 5


def _timers_never_reuse_an_id(conn: sqlite3.Connection) -> None:
    """Version 1 to 2: ``timers.id`` becomes AUTOINCREMENT (see ``SCHEMA``).

    SQLite cannot add AUTOINCREMENT to a table, so the table is rebuilt with
    its rows and their ids. The sequence then starts past every id a fired
    timer's remembered key names, not only past the ids still pending.
    """
    if not _has_table(conn, "timers"):
        return  # version 1 died before it made it: ``SCHEMA`` makes it new
    conn.execute(
        "CREATE TABLE timers_v2 (id INTEGER PRIMARY KEY AUTOINCREMENT, address TEXT NOT NULL, "
        "due REAL NOT NULL, type TEXT NOT NULL, body BLOB NOT NULL, key TEXT)"
    )
    conn.execute(
        "INSERT INTO timers_v2 (id, address, due, type, body, key) "
        "SELECT id, address, due, type, body, key FROM timers"
    )
    conn.execute("DROP TABLE timers")  # and its indexes, which ``SCHEMA`` makes again
    conn.execute("ALTER TABLE timers_v2 RENAME TO timers")
    # Keys of the form ``timer:`` and up to 18 digits only: a sender's own key
    # that merely looks like one must not push the sequence to its end.
    (last,) = conn.execute(
        "SELECT MAX(COALESCE((SELECT MAX(id) FROM timers), 0), COALESCE((SELECT "
        "MAX(CAST(substr(key, 7) AS INTEGER)) FROM keys WHERE key GLOB 'timer:[0-9]*' "
        "AND NOT substr(key, 7) GLOB '*[^0-9]*' AND length(key) <= 24), 0))"
    ).fetchone()
    conn.execute("DELETE FROM sqlite_sequence WHERE name IN ('timers', 'timers_v2')")
    conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('timers', ?)", (last,))


def _events_compact_and_prunable(conn: sqlite3.Connection) -> None:
    """Version 2 to 3: ``events`` becomes a rowid table, ``actors`` gains
    ``events_from`` and ``stopped_at`` (see ``SCHEMA``).

    Version 2 deleted no event, so every actor holds its events from seq 1.
    A final actor is taken to have stopped at its last event (its
    ``actor.stopped`` or ``actor.failed``), or else when it was created. Each
    step does only what is missing, as a directory marked with an older
    version may already have some of it.
    """
    if _has_table(conn, "actors"):
        columns = {row[1] for row in conn.execute("PRAGMA table_info(actors)")}
        if "events_from" not in columns:
            conn.execute("ALTER TABLE actors ADD COLUMN events_from INTEGER NOT NULL DEFAULT 1")
        if "stopped_at" not in columns:
            conn.execute("ALTER TABLE actors ADD COLUMN stopped_at REAL")
            last_event = (
                "(SELECT at FROM events WHERE events.address = actors.address "
                "ORDER BY seq DESC LIMIT 1)"
                if _has_table(conn, "events")
                else "NULL"
            )
            conn.execute(
                f"UPDATE actors SET stopped_at = COALESCE({last_event}, created_at) WHERE final = 1"
            )
    if _has_table(conn, "events") and not _has_rowid(conn, "events"):
        conn.execute(
            "CREATE TABLE events_v3 (address TEXT NOT NULL, seq INTEGER NOT NULL, "
            "type TEXT NOT NULL, data BLOB NOT NULL, at REAL NOT NULL)"
        )
        # In the order of the old primary key: each actor's events in seq order.
        conn.execute(
            "INSERT INTO events_v3 (address, seq, type, data, at) "
            "SELECT address, seq, type, data, at FROM events ORDER BY address, seq"
        )
        conn.execute("DROP TABLE events")
        conn.execute("ALTER TABLE events_v3 RENAME TO events")  # ``SCHEMA`` adds its index


def _mailbox_rows_know_their_life(conn: sqlite3.Connection) -> None:
    """Version 3 to 4: ``mailbox`` gains ``life``, the store's life that stored a row.

    A row stored before version 4 keeps NULL: its ``attempts`` were marked
    before each delivery, so they are exact (see ``Inbox`` for why rows of a
    newer version count their first attempt otherwise).
    """
    if _has_table(conn, "mailbox"):
        columns = {row[1] for row in conn.execute("PRAGMA table_info(mailbox)")}
        if "life" not in columns:
            conn.execute("ALTER TABLE mailbox ADD COLUMN life INTEGER")


def _actors_can_be_paused(conn: sqlite3.Connection) -> None:
    """Version 4 to 5: ``actors`` gains ``paused`` (an operator's durable pause);
    every actor of an older directory was running, so it starts unpaused."""
    if _has_table(conn, "actors"):
        columns = {row[1] for row in conn.execute("PRAGMA table_info(actors)")}
        if "paused" not in columns:
            conn.execute("ALTER TABLE actors ADD COLUMN paused INTEGER NOT NULL DEFAULT 0")


# ``MIGRATIONS[n]`` takes a database of version ``n`` to version ``n + 1``,
# inside the open transaction.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _timers_never_reuse_an_id,
    2: _events_compact_and_prunable,
    3: _mailbox_rows_know_their_life,
    4: _actors_can_be_paused,
}


def prepare(conn: sqlite3.Connection, directory: Path) -> None:
    """Bring the database on ``conn`` to `SCHEMA_VERSION`, in one transaction.

    Raises `DataDirectoryIncompatible`, changing nothing, if the database has
    a version this callboard does not know.
    """
    fresh = conn.execute("SELECT 1 FROM sqlite_master").fetchone() is None
    if fresh and conn.execute("PRAGMA auto_vacuum").fetchone()[0] != _INCREMENTAL:
        conn.execute(f"PRAGMA auto_vacuum={_INCREMENTAL}")
        conn.execute("VACUUM")  # of an empty database: before the first table
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = _found_version(conn)
        version = _known_version(found, directory)
        for step in range(version, SCHEMA_VERSION):
            MIGRATIONS[step](conn)
        for statement in SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),)
        )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != _INCREMENTAL:
        _give_freed_pages_back(conn, directory)


_INCREMENTAL = 2  # ``PRAGMA auto_vacuum``'s value for INCREMENTAL


def _give_freed_pages_back(conn: sqlite3.Connection, directory: Path) -> None:
    """Convert a database made before version 3 to ``auto_vacuum=INCREMENTAL``, once.

    Only a VACUUM can change it, and a VACUUM rewrites the whole database
    (it needs about as much free space again, and its time). It changes no
    row: if it fails (a full disk, typically) the database goes on as it
    was, freed pages are reused by later writes but the file does not
    shrink, and the next open tries again.
    """
    log.info(
        "converting the database in %s to incremental auto-vacuum, once: a VACUUM "
        "rewrites it, which takes a while for a big one",
        directory,
    )
    try:
        conn.execute(f"PRAGMA auto_vacuum={_INCREMENTAL}")
        conn.execute("VACUUM")
        # VACUUM wrote the whole database through the WAL: start it over now.
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except sqlite3.Error as exc:
        log.warning(
            "could not convert the database in %s to incremental auto-vacuum (%s); it works "
            "as before, its file does not shrink after retention, and the next open tries again",
            directory,
            exc,
        )


def _has_rowid(conn: sqlite3.Connection, table: str) -> bool:
    try:
        conn.execute(f"SELECT rowid FROM {table} LIMIT 0")
    except sqlite3.OperationalError:
        return False  # a WITHOUT ROWID table has no rowid column
    return True


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
    return row.fetchone() is not None


def _found_version(conn: sqlite3.Connection) -> str | None:
    """The version ``meta`` records; None for a database with no tables at all."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table'").fetchone() is None:
        return None
    if _has_table(conn, "meta"):
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is not None:
            return str(row[0])
    # Version 1 created its tables before it wrote its version, each in a
    # transaction of its own: a process that died between them left these.
    return "1"


def _known_version(found: str | None, directory: Path) -> int:
    if found is None:
        return SCHEMA_VERSION
    version = int(found) if found.isascii() and found.isdigit() else None
    if version is None or version < 1:
        raise DataDirectoryIncompatible(
            f"the data directory {str(directory)!r} has schema version {found!r}, which no "
            f"callboard writes (this one supports versions 1 to {SCHEMA_VERSION}); "
            "restore it from a backup or use another directory"
        )
    if version > SCHEMA_VERSION:
        raise DataDirectoryIncompatible(
            f"the data directory {str(directory)!r} has schema version {version}, newer than "
            f"version {SCHEMA_VERSION} that this callboard supports; open it with the newer "
            "callboard that wrote it, or use another directory"
        )
    return version
