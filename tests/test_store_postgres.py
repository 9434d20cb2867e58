"""What only the PostgreSQL store does: its schema version and its migration,
several stores on one database, errors that name the URL without its
password, and reconnecting after a lost connection."""

from __future__ import annotations

import logging
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import trio
import trio.testing

import callboard
from callboard.errors import DataDirectoryIncompatible, StoreUnavailable, UnknownOutcome
from callboard.store import Enqueue, StoredAck, open_store
from callboard.store._pg_connect import redact
from callboard.store._pg_schema import SCHEMA_VERSION
from callboard.store._postgres import open_postgres_store


def stored_version(url: str) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT value FROM callboard_meta WHERE key = 'schema'").fetchone()
    assert row is not None
    return str(row[0])


def with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    netloc = f"{parts.username}:{password}@{parts.hostname}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def msg(address: str, key: str | None = None) -> Enqueue:
    return Enqueue(address, "note", b'"m"', key=key, create_kind="k")


def node_names(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT node FROM callboard_nodes ORDER BY node")]


async def test_a_new_database_records_the_schema_version_and_each_live_node(pg_url, tmp_path):
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path, store=pg_url, node="n1"):
            while_open = node_names(pg_url)
        # A node that closes gives its lease up at once.
        after = node_names(pg_url)
    assert stored_version(pg_url) == str(SCHEMA_VERSION)
    assert (while_open, after) == (["n1"], [])


async def test_a_database_of_version_1_is_migrated_to_leases_in_place(pg_url, tmp_path):
    with trio.fail_after(10):
        async with open_postgres_store(pg_url, tmp_path, node="n1") as store:
            assert await store.enqueue([msg("a")]) == [StoredAck("a", 1, False)]
        # As version 1 left it: a store-wide owner row, no lease tables, no pause.
        with psycopg.connect(pg_url) as conn:
            conn.execute("ALTER TABLE actors DROP COLUMN paused")
            conn.execute("DROP TABLE callboard_nodes, callboard_ownership")
            conn.execute(
                "CREATE TABLE callboard_owner (id INTEGER PRIMARY KEY, epoch BIGINT NOT NULL, "
                "node TEXT, opened_at DOUBLE PRECISION NOT NULL)"
            )
            conn.execute("INSERT INTO callboard_owner VALUES (1, 3, 'n1', 0)")
            conn.execute("UPDATE callboard_meta SET value = '1' WHERE key = 'schema'")
        async with open_postgres_store(pg_url, tmp_path, node="n1") as store:
            assert await store.enqueue([msg("a")]) == [StoredAck("a", 2, False)]
    with psycopg.connect(pg_url) as conn:
        owner_left = conn.execute("SELECT to_regclass('callboard_owner')").fetchone()
    assert stored_version(pg_url) == "3"
    assert owner_left == (None,)


async def test_a_database_of_a_newer_schema_version_is_refused_and_left_as_it_was(pg_url, tmp_path):
    newer = str(SCHEMA_VERSION + 1)
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path, store=pg_url):
            pass
        with psycopg.connect(pg_url) as conn:
            conn.execute("UPDATE callboard_meta SET value = %s WHERE key = 'schema'", (newer,))
        refusals = []
        # Twice: the first refusal let go of the database and the directory.
        for _ in range(2):
            with pytest.raises(DataDirectoryIncompatible) as refused:
                async with callboard.open_runtime(tmp_path, store=pg_url):
                    pass  # pragma: no cover
            refusals.append(str(refused.value))
    assert refusals == [
        f"the database at {pg_url} has schema version {newer}, newer than version "
        f"{SCHEMA_VERSION} that this callboard supports; open it with the newer callboard "
        "that wrote it, or use another database"
    ] * 2  # fmt: skip
    assert stored_version(pg_url) == newer


async def test_a_database_with_tables_of_its_own_is_not_taken_over(pg_url, tmp_path):
    with psycopg.connect(pg_url) as conn:
        conn.execute("CREATE TABLE actors (name TEXT)")
    with trio.fail_after(10), pytest.raises(DataDirectoryIncompatible) as refused:
        async with callboard.open_runtime(tmp_path, store=pg_url):
            pass  # pragma: no cover
    assert "has tables of its own but no callboard schema version" in str(refused.value)


async def test_two_stores_on_one_database_number_one_mailbox_with_no_gap(pg_url, tmp_path):
    with trio.fail_after(20):
        async with (
            open_postgres_store(pg_url, tmp_path / "one", node="n1") as first,
            open_postgres_store(pg_url, tmp_path / "two", node="n2") as second,
        ):
            acks: list[object] = []

            async def send(store, n):
                for _ in range(n):
                    acks.extend(await store.enqueue([msg("a")]))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(send, first, 20)
                nursery.start_soon(send, second, 20)
            stored = [r.seq for r in await first.pending("a", 0, 100)]
    assert sorted(ack.seq for ack in acks) == list(range(1, 41))
    assert stored == list(range(1, 41))


async def test_an_unreachable_server_is_named_without_the_password(pg_server, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    # Port 1: nothing listens there.
    url = with_password(pg_server.url("nowhere"), "hunter2-secret")
    url = url.replace(f":{pg_server.port}/", ":1/")
    with trio.fail_after(20), pytest.raises(StoreUnavailable) as refused:
        async with callboard.open_runtime(tmp_path, store=url):
            pass  # pragma: no cover
    text = str(refused.value)
    assert text.startswith(f"cannot reach the PostgreSQL store at {redact(url)}: ")
    assert "postgresql://callboard:***@127.0.0.1:1/nowhere" in text
    assert "hunter2-secret" not in text + repr(refused.value) + caplog.text
    assert refused.value.__cause__ is None and refused.value.__suppress_context__


async def test_a_password_in_the_url_reaches_no_error_log_or_repr(pg_url, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    # The test server trusts every local connection, so a password is accepted
    # and ignored: what matters is where it shows up.
    url = with_password(pg_url, "hunter2-secret")
    with psycopg.connect(pg_url) as conn:
        conn.execute("CREATE TABLE callboard_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO callboard_meta VALUES ('schema', '99')")
    with trio.fail_after(10), pytest.raises(DataDirectoryIncompatible) as refused:
        async with open_store(tmp_path, url=url):
            pass  # pragma: no cover
    assert "callboard:***@" in str(refused.value)
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE callboard_meta SET value = %s", (str(SCHEMA_VERSION),))
        conn.execute("DROP TABLE callboard_meta")
    async with open_postgres_store(url, tmp_path) as store:
        assert "callboard:***@" in repr(store)
        shown = repr(store) + repr(vars(store)) + str(vars(store))
    assert "hunter2-secret" not in str(refused.value) + shown + caplog.text


def test_redact_hides_passwords_in_the_userinfo_and_the_query():
    assert redact("postgresql://u:pw@h:5/db") == "postgresql://u:***@h:5/db"
    assert redact("postgresql://u@h/db?password=pw&sslmode=off") == (
        "postgresql://u@h/db?password=***&sslmode=off"
    )
    assert redact("postgresql://u@h:notaport/db") == "postgresql://***"


async def test_a_store_that_is_not_a_postgresql_url_is_refused_naming_only_its_scheme(tmp_path):
    with pytest.raises(StoreUnavailable) as refused:
        open_store(tmp_path, url="mysql://u:secret@h/db")
    assert "secret" not in str(refused.value)
    assert "'mysql'" in str(refused.value)


def terminate_writer(url: str) -> None:
    """End every connection of the store to its database, from outside."""
    database = urlsplit(url).path.lstrip("/")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        )


async def test_a_lost_connection_is_refused_then_reconnected_and_the_runtime_told(pg_url, tmp_path):
    recovered = trio.Event()
    with trio.fail_after(20):
        async with open_postgres_store(pg_url, tmp_path) as store:
            store.on_recovered = recovered.set
            assert await store.enqueue([msg("a", key="k1")]) == [StoredAck("a", 1, False)]
            assert [r.seq for r in await store.pending("a", 0, 10)] == [1]  # a reader is idle
            terminate_writer(pg_url)
            # The next write meets the dead connection: either while it runs
            # (nothing accepted) or at its COMMIT (outcome unknown).
            try:
                outcome: object = await store.enqueue([msg("a", key="k2")])
            except (StoreUnavailable, UnknownOutcome) as exc:
                outcome = exc
            assert isinstance(outcome, StoreUnavailable | UnknownOutcome)
            assert not store.healthy
            # The write after it reconnects first, and tells the runtime.
            (retried,) = await store.enqueue([msg("a", key="k2")])
            assert recovered.is_set() and store.healthy
            assert retried == StoredAck("a", 2, False)
            assert store.statistics().recoveries == 1
            assert [r.seq for r in await store.pending("a", 0, 10)] == [1, 2]


async def test_every_connection_commits_synchronously_and_bounds_its_statements(pg_url, tmp_path):
    # Whatever the database's own default: an ack must mean the WAL is flushed.
    database = urlsplit(pg_url).path.lstrip("/")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {database} SET synchronous_commit = off")
        conn.execute(f"ALTER DATABASE {database} SET statement_timeout = 0")
    with trio.fail_after(10):
        async with open_postgres_store(pg_url, tmp_path) as store:
            await store.enqueue([msg("a")])
            await store.pending("a", 0, 1)
            # Asked on the writer's own connection, between two of its batches.
            writer = store._writer.conn
            async with store._writer_thread:
                shown = [
                    writer.execute("SHOW synchronous_commit").fetchone(),
                    writer.execute("SHOW statement_timeout").fetchone(),
                ]
                writer.rollback()
            connections = await trio.to_thread.run_sync(count_connections, pg_url, database)
    assert shown == [("on",), ("30s",)]
    assert connections >= 2  # the writer and a reader


def count_connections(url: str, database: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT COUNT(*) FROM pg_stat_activity "
            "WHERE application_name = 'callboard' AND datname = %s",
            (database,),
        ).fetchone()
    assert row is not None
    return int(row[0])


async def test_a_user_who_may_not_create_the_tables_is_told_so_without_the_password(
    pg_url, tmp_path
):
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS reader_only")
        conn.execute("CREATE ROLE reader_only LOGIN")
    parts = urlsplit(pg_url)
    url = f"postgresql://reader_only:hunter2-secret@{parts.hostname}:{parts.port}{parts.path}"
    try:
        with trio.fail_after(10), pytest.raises(StoreUnavailable) as refused:
            async with open_postgres_store(url, tmp_path):
                pass  # pragma: no cover
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DROP ROLE reader_only")
    text = str(refused.value)
    assert text.startswith(
        f"cannot prepare the PostgreSQL store at {redact(url)}: permission denied for schema public"
    )
    assert "hunter2-secret" not in text and refused.value.__cause__ is None
