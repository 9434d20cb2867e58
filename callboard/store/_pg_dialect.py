"""`SqliteDialect`: the writer's operations, written for SQLite, run on PostgreSQL.

The statements of every write (``_ops_mailbox``, ``_ops_commit``,
``_sqlite_ops``, ``_retention``) are shared by both stores, so that both
decide the same things the same way: seqs, idempotency keys, virtual
actors, the batch's deferred rows and their order. They are written in
SQLite's dialect against a `sqlite3.Connection`; this wraps a psycopg
connection in the part of that interface they use (``execute`` returning
a cursor, ``executemany``) and translates each statement once:

- ``?`` placeholders become ``%s``;
- SQLite's two-argument scalar ``MAX(a, b)`` becomes ``GREATEST(a, b)``;
- ``INSERT OR REPLACE INTO timers`` becomes an upsert that, as SQLite's
  REPLACE does, gives the replaced timer a new id (timers fire in
  ``(due, id)`` order);
- ``PRAGMA auto_vacuum`` answers "none": the retention step's vacuum phase
  then ends at once, PostgreSQL's autovacuum reclaiming the space instead;
- the reads of an actor's counters lock its row (``FOR UPDATE``): other
  nodes store messages for the same actor, and the counters a batch read
  must stay the ones it writes back; SQLite has one writer and needs none;
- the read of due timers skips those another node is firing
  (``FOR UPDATE SKIP LOCKED``), so that each timer fires once.

Any other SQLite-only form is refused by name (`UnsupportedStatement`), so
an operation changed later fails the PostgreSQL suite instead of doing
something else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg

__all__ = ["SqliteDialect", "UnsupportedStatement", "translate"]

_TIMER_UPSERT = (
    "INSERT INTO timers (address, due, type, body, key) VALUES (%s, %s, %s, %s, %s) "
    "ON CONFLICT (address, key) WHERE key IS NOT NULL DO UPDATE SET "
    "id = nextval('timers_id_seq'), due = EXCLUDED.due, type = EXCLUDED.type, "
    "body = EXCLUDED.body"
)

_SPECIAL = {
    "INSERT OR REPLACE INTO timers (address, due, type, body, key) VALUES (?, ?, ?, ?, ?)": (
        _TIMER_UPSERT
    ),
    "PRAGMA auto_vacuum": "SELECT 0",
    "SELECT mailbox_head, event_head FROM actors WHERE address = ? AND final = 0": (
        "SELECT mailbox_head, event_head FROM actors WHERE address = %s AND final = 0 FOR UPDATE"
    ),
    "SELECT mailbox_head, event_head, final FROM actors WHERE address = ?": (
        "SELECT mailbox_head, event_head, final FROM actors WHERE address = %s FOR UPDATE"
    ),
    "SELECT id, address, type, body, key FROM timers WHERE due <= ? ORDER BY due, id": (
        "SELECT id, address, type, body, key FROM timers WHERE due <= %s ORDER BY due, id "
        "FOR UPDATE SKIP LOCKED"
    ),
}

# ``MAX(`` with a comma before any parenthesis: the scalar form, never the aggregate.
_SCALAR_MAX = re.compile(r"\bMAX\(([^(),]+),")
_SQLITE_ONLY = re.compile(r"\b(PRAGMA|GLOB|INSERT OR|REPLACE INTO|sqlite_\w+)\b", re.IGNORECASE)


class UnsupportedStatement(Exception):
    """A statement in SQLite's dialect that has no translation here."""


def translate(sql: str) -> str:
    """The PostgreSQL form of one of the writer's SQLite statements."""
    special = _SPECIAL.get(sql)
    if special is not None:
        return special
    if _SQLITE_ONLY.search(sql):
        raise UnsupportedStatement(f"no PostgreSQL translation for this statement: {sql!r}")
    return _SCALAR_MAX.sub(r"GREATEST(\1,", sql.replace("%", "%%").replace("?", "%s"))


class SqliteDialect:
    """The part of `sqlite3.Connection` the writer's operations call, on psycopg."""

    __slots__ = ("_cache", "conn")

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self._cache: dict[str, str] = {}

    def _sql(self, sql: str) -> str:
        found = self._cache.get(sql)
        if found is None:
            found = self._cache[sql] = translate(sql)
        return found

    def execute(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        # A cursor per statement: an operation may still iterate one (the
        # retention's walk of events) when it runs the next.
        cursor = self.conn.cursor()
        cursor.execute(self._sql(sql), params)
        return cursor

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> psycopg.Cursor[Any]:
        # psycopg pipelines these: one round trip for all the rows, not one each.
        cursor = self.conn.cursor()
        cursor.executemany(self._sql(sql), rows)
        return cursor
