"""The schema version that holds an operator's pause (SQLite 5, PostgreSQL 2; 3 then adds leases):
a directory or database of the version before is migrated in place, its
actors unpaused and their mailboxes kept, and can be paused from then on."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import psycopg
import trio
from core_kinds import Counter

import callboard
from callboard.store._pg_schema import SCHEMA_VERSION as PG_VERSION
from callboard.store._schema import SCHEMA_VERSION as SQLITE_VERSION


async def _leave_one_message_unhandled(data: Path, store: str | None) -> None:
    """counter/a handled m1; m2 waits in its mailbox, stored while it was stopped."""
    async with callboard.open_runtime(data, kinds=[Counter], store=store) as rt:
        await rt.wait_handled("counter/a", (await rt.send("counter/a", "add", {"id": "m1"})).seq)
        await rt.pause("counter/a")
        await rt.send("counter/a", "add", {"id": "m2"})


async def _resumed_after_migration(data: Path, store: str | None) -> tuple[list[str], dict]:
    async with callboard.open_runtime(data, kinds=[Counter], store=store) as rt:
        statuses = [a.status for a in await rt.list()]
        ack = await rt.send("counter/a", "add", {"id": "m3"})
        await rt.wait_handled("counter/a", ack.seq)
        await rt.pause("counter/a")  # the new column takes a pause
        paused = (await rt.inspect("counter/a")).status
        return [*statuses, paused], await rt.get_state("counter/a")


async def test_a_version_4_directory_gains_the_pause_column_with_every_actor_running(tmp_path):
    with trio.fail_after(20):
        await _leave_one_message_unhandled(tmp_path, None)
        with closing(sqlite3.connect(tmp_path / "callboard.sqlite3", isolation_level=None)) as db:
            db.execute("ALTER TABLE actors DROP COLUMN paused")
            db.execute("UPDATE meta SET value = '4' WHERE key = 'schema'")
        statuses, state = await _resumed_after_migration(tmp_path, None)
    with closing(sqlite3.connect(tmp_path / "callboard.sqlite3", isolation_level=None)) as db:
        version = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0]
    assert SQLITE_VERSION == 5
    assert version == "5"
    # Unpaused by the migration (version 4 had no pause): m2 and m3 were handled.
    assert statuses == ["active", "paused"]
    assert state == {"total": 3, "seen": ["m1", "m2", "m3"]}


async def test_a_version_1_database_gains_the_pause_column_with_every_actor_running(
    pg_url, tmp_path
):
    with trio.fail_after(30):
        await _leave_one_message_unhandled(tmp_path, pg_url)
        # As version 1 left it: no pause column, a store-wide owner row, no leases.
        with psycopg.connect(pg_url, autocommit=True) as db:
            db.execute("ALTER TABLE actors DROP COLUMN paused")
            db.execute("DROP TABLE callboard_nodes, callboard_ownership")
            db.execute(
                "CREATE TABLE callboard_owner (id INTEGER PRIMARY KEY, epoch BIGINT NOT NULL, "
                "node TEXT, opened_at DOUBLE PRECISION NOT NULL)"
            )
            db.execute("UPDATE callboard_meta SET value = '1' WHERE key = 'schema'")
        statuses, state = await _resumed_after_migration(tmp_path, pg_url)
    with psycopg.connect(pg_url) as db:
        row = db.execute("SELECT value FROM callboard_meta WHERE key = 'schema'").fetchone()
    assert PG_VERSION == 3  # 2 added the pause, 3 the leases
    assert row == ("3",)
    assert statuses == ["active", "paused"]
    assert state == {"total": 3, "seen": ["m1", "m2", "m3"]}
