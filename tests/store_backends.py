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


def read_rows(
    data: Path, store_url: str | None, sql: str, args: tuple[object, ...] = ()
) -> list[tuple[Any, ...]]:
    """Rows of a read (``?`` placeholders) from another connection to the store a
    runtime on ``data`` uses: SQLite in ``data`` (None), or the database at ``store_url``."""
    if store_url is None:
        conn = sqlite3.connect(data / "callboard.sqlite3", isolation_level=None)
        try:
            return conn.execute(sql, args).fetchall()
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(store_url, autocommit=True) as pg:
        return [tuple(row) for row in pg.execute(sql.replace("?", "%s"), args).fetchall()]


def write_rows(data: Path, store_url: str | None, sql: str, args: tuple[object, ...] = ()) -> None:
    """Run one write (``?`` placeholders) on the store from another connection,
    with no runtime on it (a test making the database say something else)."""
    if store_url is None:
        conn = sqlite3.connect(data / "callboard.sqlite3", isolation_level=None)
        try:
            conn.execute(sql, args)
        finally:
            conn.close()
        return
    import psycopg

    with psycopg.connect(store_url, autocommit=True) as pg:
        pg.execute(sql.replace("?", "%s"), args)


async def all_blocked(store: object) -> None:
    """`trio.testing.wait_all_tasks_blocked`, and no work of ``store`` on a worker
    thread: to trio a task waiting for its thread is blocked, so with the
    PostgreSQL store (every read and write on a thread) the first alone can
    return while a read is still on its way. Waits for each thread to finish
    (by taking every token of the lanes they run in), then looks again."""
    import trio.testing

    while True:
        await trio.testing.wait_all_tasks_blocked()
        lanes = [lane for lane in _lanes(store) if lane.borrowed_tokens]
        if not lanes:
            return
        for lane in lanes:
            tokens = [object() for _ in range(int(lane.total_tokens))]
            for token in tokens:
                await lane.acquire_on_behalf_of(token)
            for token in tokens:
                lane.release_on_behalf_of(token)


def _lanes(store: object) -> list[Any]:
    from callboard.store._postgres import PostgresStore

    if not isinstance(store, PostgresStore):
        return []
    return [store._writer_thread, store._reads._threads]
