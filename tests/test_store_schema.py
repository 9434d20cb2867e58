"""The schema version of a data directory: written when it is made, read on every
open, an older one migrated in place, and a version this callboard does not
know refused with nothing changed."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
import trio
from core_kinds import Alarm

import callboard
from callboard.store._schema import SCHEMA_VERSION


class FakeWallClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def database(data: Path) -> closing[sqlite3.Connection]:
    """The directory's database, opened beside the runtime (or with none running)."""
    return closing(sqlite3.connect(data / "callboard.sqlite3", isolation_level=None))


def stored_version(data: Path) -> str:
    with database(data) as conn:
        return conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0]


def mark_version(data: Path, version: str) -> None:
    with database(data) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (version,))


async def test_a_new_data_directory_records_the_schema_version_it_was_made_with(data):
    with trio.fail_after(10):
        async with callboard.open_runtime(data):
            pass
    assert stored_version(data) == str(SCHEMA_VERSION)


async def test_a_data_directory_of_a_newer_schema_version_is_refused_and_left_as_it_was(data):
    newer = str(SCHEMA_VERSION + 1)
    refusals = []
    with trio.fail_after(10):
        async with callboard.open_runtime(data):
            pass
        mark_version(data, newer)
        # Twice: the first refusal let go of the directory's lock.
        for _ in range(2):
            with pytest.raises(callboard.DataDirectoryIncompatible) as refused:
                async with callboard.open_runtime(data):
                    pass
            refusals.append(str(refused.value))
    assert (
        refusals
        == [
            f"the data directory {str(data)!r} has schema version {newer}, newer than version "
            f"{SCHEMA_VERSION} that this callboard supports; open it with the newer callboard "
            "that wrote it, or use another directory"
        ]
        * 2
    )
    assert stored_version(data) == newer


async def test_a_schema_version_that_no_callboard_writes_is_refused(data):
    with trio.fail_after(10):
        async with callboard.open_runtime(data):
            pass
        mark_version(data, "1.5-beta")
        with pytest.raises(callboard.DataDirectoryIncompatible) as refused:
            async with callboard.open_runtime(data):
                pass
    assert str(refused.value) == (
        f"the data directory {str(data)!r} has schema version '1.5-beta', which no callboard "
        f"writes (this one supports versions 1 to {SCHEMA_VERSION}); restore it from a backup "
        "or use another directory"
    )


def put_back_to_version_1(data: Path) -> None:
    """Give the directory the timers table version 1 made, rows and ids kept,
    and mark it version 1: what a version 1 runtime would have left."""
    with database(data) as conn:
        conn.executescript(
            """
            BEGIN;
            CREATE TABLE timers_v1 (
                id INTEGER PRIMARY KEY,
                address TEXT NOT NULL,
                due REAL NOT NULL,
                type TEXT NOT NULL,
                body BLOB NOT NULL,
                key TEXT
            );
            INSERT INTO timers_v1 SELECT id, address, due, type, body, key FROM timers;
            DROP TABLE timers;
            ALTER TABLE timers_v1 RENAME TO timers;
            CREATE INDEX timers_due ON timers(due);
            CREATE UNIQUE INDEX timers_key ON timers(address, key) WHERE key IS NOT NULL;
            UPDATE meta SET value = '1' WHERE key = 'schema';
            COMMIT;
            """
        )
        # Version 1 had no AUTOINCREMENT, so SQLite kept no sequence for it.
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'").fetchone():
            conn.execute("DELETE FROM sqlite_sequence")


async def test_a_version_1_directory_is_migrated_and_its_timers_fire_and_new_ones_after_them(
    data,
):
    clock = FakeWallClock()
    with trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=[Alarm], clock=clock) as rt:
            # Timer 1 stays pending; timer 2 fires, and a version 1 table
            # would next hand out id 2 again.
            await rt.send("alarm/m", "set", {"delay": 3600, "label": "pending"})
            async with rt.subscribe("alarm/m") as events:
                await rt.send("alarm/m", "set", {"delay": 0, "label": "fired"})
                async for event in events:
                    if event.type == "rang":
                        break
            before = await rt.head("alarm/m")
        put_back_to_version_1(data)
        clock.now += 7200
        rang = []
        async with callboard.open_runtime(data, kinds=[Alarm], clock=clock) as rt:
            async with rt.subscribe("alarm/m", after=before) as events:
                await rt.send("alarm/m", "set", {"delay": 0, "label": "set after"})
                # Bounded apart from the test: a lost timer shows as what rang,
                # below, not as a timeout.
                with trio.move_on_after(10):
                    async for event in events:
                        if event.type == "rang":
                            rang.append(event.data["label"])
                            if len(rang) == 2:
                                break
            view = await rt.inspect("alarm/m")
    assert rang == ["pending", "set after"]
    assert view.state == {"rang": ["fired", "pending", "set after"]}
    assert stored_version(data) == str(SCHEMA_VERSION)


async def test_a_directory_version_1_left_without_its_version_is_migrated_as_version_1(data):
    with trio.fail_after(10):
        async with callboard.open_runtime(data):
            pass
        put_back_to_version_1(data)
        with database(data) as conn:
            conn.execute("DELETE FROM meta")
        async with callboard.open_runtime(data):
            pass
    with database(data) as conn:
        (timers,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'timers'").fetchone()
    assert "id INTEGER PRIMARY KEY AUTOINCREMENT" in timers
    assert stored_version(data) == str(SCHEMA_VERSION)


class Chronicle(callboard.Actor):
    """Virtual: ``note`` emits ``noted`` with the body; ``end`` stops the actor."""

    kind = "chronicle"
    virtual = True

    async def handle(self, ctx, message):
        if message.type == "end":
            ctx.stop()
        else:
            ctx.emit("noted", message.body)


def put_back_to_version_2(data: Path) -> None:
    """Give the directory the events table, actor columns and indexes version 2
    made, every event kept, without incremental auto-vacuum, and mark it version 2."""
    with database(data) as conn:
        conn.executescript(
            """
            BEGIN;
            DROP INDEX actors_events_held;
            DROP INDEX actors_stopped;
            DROP INDEX timers_address;
            DROP INDEX dead_letters_at;
            ALTER TABLE actors DROP COLUMN events_from;
            ALTER TABLE actors DROP COLUMN stopped_at;
            CREATE TABLE events_v2 (
                address TEXT NOT NULL,
                seq INTEGER NOT NULL,
                type TEXT NOT NULL,
                data BLOB NOT NULL,
                at REAL NOT NULL,
                PRIMARY KEY (address, seq)
            ) WITHOUT ROWID;
            INSERT INTO events_v2 SELECT address, seq, type, data, at FROM events;
            DROP TABLE events;
            ALTER TABLE events_v2 RENAME TO events;
            UPDATE meta SET value = '2' WHERE key = 'schema';
            COMMIT;
            PRAGMA auto_vacuum = NONE;
            VACUUM;
            """
        )


def stored_events(data: Path, order: str) -> list[tuple]:
    with database(data) as conn:
        return conn.execute(
            f"SELECT address, seq, type, data, at FROM events ORDER BY {order}"
        ).fetchall()


async def test_a_version_2_directory_is_migrated_keeping_every_event_in_its_order(data):
    clock = FakeWallClock()
    with trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=[Chronicle], clock=clock) as rt:
            for n in range(300):
                # Two actors, interleaved; events of 1 KB, as would spill in version 2.
                clock.now += 1
                ack = await rt.send(f"chronicle/c{n % 2}", "note", {"n": n, "pad": "x" * 1000})
                await rt.wait_handled(f"chronicle/c{n % 2}", ack.seq)
            clock.now += 1
            await rt.wait_handled("chronicle/c1", (await rt.send("chronicle/c1", "end")).seq)
        put_back_to_version_2(data)
        v2 = stored_events(data, "address, seq")
        async with callboard.open_runtime(data, kinds=[Chronicle], clock=clock) as rt:
            replayed = []
            async with rt.subscribe("chronicle/c0", after=0) as events:
                async for event in events:
                    replayed.append(event.seq)
                    if event.seq == await rt.head("chronicle/c0"):
                        break
            records = [await rt._store.actor(f"chronicle/c{n}") for n in range(2)]
    with database(data) as conn:
        auto_vacuum = conn.execute("PRAGMA auto_vacuum").fetchone()[0]
    assert stored_version(data) == str(SCHEMA_VERSION)
    # Rowid order is the order they were copied in: each actor's, by seq.
    assert stored_events(data, "rowid") == v2
    assert len(v2) == 2 * (1 + 150) + 1  # each one's actor.started and notes, c1's actor.stopped
    assert replayed == list(range(1, records[0].event_head + 1))
    assert [(r.events_from, r.stopped_at) for r in records] == [
        (1, None),
        (1, v2[-1][4]),  # when it went final: its last event, actor.stopped
    ]
    assert v2[-1][2] == "actor.stopped"
    assert auto_vacuum == 2  # INCREMENTAL: pages retention frees go back to the file system
