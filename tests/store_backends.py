"""What the store tests do to each backend from outside: open it, hold its writer
back (so the writes queued meanwhile share one batch), and make its database
refuse some rows (a failure only the database sees)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from callboard.store._sqlite import open_sqlite_store

_POISON_MESSAGE = "the disk refused the write"


def _once(release: Callable[[], None]) -> Callable[[], None]:
    """``release`` that does its work the first time only (a test's finally calls it again)."""
    done = False

    def once() -> None:
        nonlocal done
        if not done:
            done = True
            release()

    return once


class SqliteBackend:
    name = "sqlite"

    def open(self, directory: os.PathLike[str] | str, **options: Any) -> Any:
        return open_sqlite_store(directory, **options)

    def hold_writes(self, directory: Path) -> Callable[[], None]:
        """Take the database's write lock; the writer waits for it. Returns the release."""
        holder = sqlite3.connect(directory / "callboard.sqlite3", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")

        def release() -> None:
            try:
                holder.execute("ROLLBACK")
            finally:
                holder.close()

        return _once(release)

    def refuse_poison(self, directory: Path, table: str, column: str) -> None:
        """Make INSERTs into ``table`` whose ``column`` is 'poison' fail."""
        conn = sqlite3.connect(directory / "callboard.sqlite3", isolation_level=None)
        conn.execute(
            f"CREATE TRIGGER refuse_{table} BEFORE INSERT ON {table} "
            f"WHEN NEW.{column} = 'poison' "
            f"BEGIN SELECT RAISE(ABORT, '{_POISON_MESSAGE}'); END"
        )
        conn.close()


class PostgresBackend:
    """Each data directory gets a database of its own: the first opened in a
    test the one the test was given, later ones new ones of the same server."""

    name = "postgresql"

    def __init__(self, url: str, new_database: Callable[[], str]) -> None:
        self._first = url
        self._new_database = new_database
        self._urls: dict[Path, str] = {}

    def url(self, directory: os.PathLike[str] | str) -> str:
        key = Path(directory).resolve()
        if key not in self._urls:
            self._urls[key] = self._new_database() if self._urls else self._first
        return self._urls[key]

    def open(
        self, directory: os.PathLike[str] | str, **options: Any
    ) -> AbstractAsyncContextManager[Any]:
        from callboard.store._postgres import open_postgres_store

        return open_postgres_store(self.url(directory), directory, **options)

    def _connect(self, directory: Path) -> Any:
        import psycopg

        return psycopg.connect(self.url(directory))

    def hold_writes(self, directory: Path) -> Callable[[], None]:
        """Lock a table every batch of the tests starts with (``keys``, which
        ``prune_keys`` deletes from); the writer waits for it."""
        holder = self._connect(directory)
        holder.execute("LOCK TABLE keys IN ACCESS EXCLUSIVE MODE")

        def release() -> None:
            try:
                holder.rollback()
            finally:
                holder.close()

        return _once(release)

    def refuse_poison(self, directory: Path, table: str, column: str) -> None:
        with self._connect(directory) as conn:
            conn.execute(
                f"CREATE FUNCTION refuse_{table}() RETURNS trigger LANGUAGE plpgsql AS $$ "
                f"BEGIN IF NEW.{column} = 'poison' THEN RAISE EXCEPTION '{_POISON_MESSAGE}'; "
                "END IF; RETURN NEW; END $$"
            )
            conn.execute(
                f"CREATE TRIGGER refuse_{table} BEFORE INSERT ON {table} "
                f"FOR EACH ROW EXECUTE FUNCTION refuse_{table}()"
            )


Backend = SqliteBackend | PostgresBackend
