"""The database's tables, the schema version they make, and the migrations to it.

A data directory records the version of its schema in ``meta``. Opening it
(`prepare`) creates the tables of a fresh one, migrates one of an older
version to this one in the same transaction as the version it writes (a
crash leaves the old version or the new, never half of one), and refuses
one of a version this callboard does not know, changing nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from ..errors import DataDirectoryIncompatible

__all__ = ["SCHEMA_VERSION", "prepare"]

# Each statement creates only what is missing: on a migrated database they
# add the tables of this version and leave the migrated ones alone.
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

SCHEMA_VERSION = 1

# ``MIGRATIONS[n]`` takes a database of version ``n`` to version ``n + 1``,
# inside the open transaction.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {}


def prepare(conn: sqlite3.Connection, directory: Path) -> None:
    """Bring the database on ``conn`` to `SCHEMA_VERSION`, in one transaction.

    Raises `DataDirectoryIncompatible`, changing nothing, if the database has
    a version this callboard does not know.
    """
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
        conn.execute("ROLLBACK")
        raise


def _found_version(conn: sqlite3.Connection) -> str | None:
    """The version ``meta`` records; None for a database with no tables at all."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables:
        return None
    if "meta" in tables:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is not None:
            return row[0]
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
