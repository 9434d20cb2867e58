"""Leases and the fence at the store: two stores (nodes) on one database, with
a lease made to lapse in the database itself, so that what the fence does is
seen apart from the watchdog that would stop a paused node first."""

from __future__ import annotations

import psycopg
import pytest
import trio
import trio.testing
from core_kinds import Counter
from store_backends import PostgresBackend
from test_store_writer import one_batch

import callboard
from callboard.errors import LeaseLost
from callboard.store import Commit, Enqueue, NewEvent
from callboard.store._postgres import open_postgres_store


def msg(address: str) -> Enqueue:
    return Enqueue(address, "note", b'"m"', create_kind="k")


def event() -> NewEvent:
    return NewEvent("noted", b"{}", 0.0)


def lapse(url: str, node: str) -> None:
    """Make ``node``'s lease expired, by the database's clock, as a pause would."""
    with psycopg.connect(url) as conn:
        conn.execute(
            "UPDATE callboard_nodes SET expires = clock_timestamp() - interval '1 second' "
            "WHERE node = %s",
            (node,),
        )


def rows(url: str, sql: str, *args: object) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return list(conn.execute(sql, args).fetchall())


async def test_no_node_takes_an_actor_whose_owner_is_live(pg_url, tmp_path):
    with trio.fail_after(20):
        async with (
            open_postgres_store(pg_url, tmp_path / "a", node="a") as a,
            open_postgres_store(pg_url, tmp_path / "b", node="b") as b,
        ):
            await a.enqueue([msg("k/x")])
            assert (await a.claim("k/x"), await b.claim("k/x")) == (True, False)
            assert (a.owns("k/x"), b.owns("k/x")) == (True, False)
            assert [(r.address, r.owner) for r in await b.actors()] == [("k/x", "a")]
    assert rows(pg_url, "SELECT node, epoch FROM callboard_ownership") == []  # both left


async def test_a_write_that_fails_its_fence_changes_nothing_and_the_rest_of_its_batch_commits(
    pg_url, tmp_path
):
    backend = PostgresBackend(pg_url, lambda: pg_url)
    with trio.fail_after(30):
        async with (
            backend.open(tmp_path / "a", node="a") as a,
            open_postgres_store(pg_url, tmp_path / "b", node="b") as b,
        ):
            await a.enqueue([msg("k/lost"), msg("k/kept")])
            assert await a.claim("k/lost") and await a.claim("k/kept")
            # a's lease lapses in the database (a is not told), and b takes one actor.
            lapse(pg_url, "a")
            assert await b.claim("k/lost")
            results = await one_batch(
                a,
                backend.hold_writes(tmp_path / "a"),
                lambda: a.commit(Commit("k/lost", cursor=1, events=(event(),), state=b'{"a":1}')),
                lambda: a.commit(Commit("k/kept", cursor=1, events=(event(),), state=b'{"a":1}')),
            )
            assert isinstance(results[0], LeaseLost)
            assert "no longer owns 'k/lost'" in str(results[0])
            assert results[1].events[0][0] == 1
            assert (a.owns("k/lost"), a.owns("k/kept")) == (False, True)
            # a's next write for it is refused at once, never reaching the database.
            with pytest.raises(LeaseLost):
                await a.mark_attempts("k/lost", 1, 1)
            table = rows(
                pg_url,
                "SELECT address, cursor, state, event_head FROM actors ORDER BY address",
            )
            events = rows(pg_url, "SELECT address, seq FROM events ORDER BY address, seq")
            attempts = rows(pg_url, "SELECT address, attempts FROM mailbox ORDER BY address")
    assert table == [("k/kept", 1, b'{"a":1}', 1), ("k/lost", 0, None, 0)]
    assert events == [("k/kept", 1)]
    assert attempts == [("k/lost", 0)]


async def test_a_write_in_flight_when_another_node_claims_lands_whole_or_not_at_all(
    pg_url, tmp_path
):
    backend = PostgresBackend(pg_url, lambda: pg_url)
    with trio.fail_after(30):
        async with (
            backend.open(tmp_path / "a", node="a") as a,
            open_postgres_store(pg_url, tmp_path / "b", node="b") as b,
        ):
            await a.enqueue([msg("k/x")])
            assert await a.claim("k/x")
            lapse(pg_url, "a")
            release = backend.hold_writes(tmp_path / "a")
            outcome: list[object] = []

            async def commit() -> None:
                try:
                    outcome.append(await a.commit(Commit("k/x", cursor=1, events=(event(),))))
                except LeaseLost as lost:
                    outcome.append(lost)

            async with trio.open_nursery() as nursery:
                # a's write is queued behind a batch that waits on a lock the test holds.
                nursery.start_soon(a.prune_keys, 1e9)
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(commit)
                await trio.testing.wait_all_tasks_blocked()
                release()
                # b takes the actor meanwhile: before a's write reads its fence, or
                # after a's write committed, never in between.
                assert await b.claim("k/x")
            (row,) = rows(pg_url, "SELECT cursor, event_head FROM actors WHERE address = 'k/x'")
    (result,) = outcome
    if isinstance(result, LeaseLost):
        assert row == (0, 0)  # nothing of it was written
    else:
        assert row == (1, 1)  # all of it was, before the claim


async def test_a_node_that_does_not_own_an_actor_follows_its_progress_and_its_events(
    pg_url, tmp_path
):
    config = callboard.RuntimeConfig(lease_ttl=5.0, lease_poll=0.5)
    with trio.fail_after(30):
        async with (
            callboard.open_runtime(
                tmp_path / "a", kinds=[Counter], store=pg_url, node="a", config=config
            ) as a,
            callboard.open_runtime(
                tmp_path / "b", kinds=[Counter], store=pg_url, node="b", config=config
            ) as b,
        ):
            first = await a.send("counter/c", "add", {"n": 1, "id": "m1"})
            await a.wait_handled("counter/c", first.seq)
            # Sent through b, handled by a; b hears of it from the database.
            second = await b.send("counter/c", "add", {"n": 2, "id": "m2"})
            await b.wait_handled("counter/c", second.seq)
            active = (a.is_active("counter/c"), b.is_active("counter/c"))
            seen = []
            async with b.subscribe("counter/c", after=0) as events:
                async for event in events:
                    seen.append((event.seq, event.type, event.data))
                    if event.type == "counted" and event.data["id"] == "m2":
                        break
            view = await b.inspect("counter/c")
    assert active == (True, False)
    assert seen == [
        (1, "actor.started", {}),
        (2, "counted", {"total": 1, "id": "m1"}),
        (3, "counted", {"total": 3, "id": "m2"}),
    ]
    assert (view.state, view.owner) == ({"total": 3, "seen": ["m1", "m2"]}, "a")


def test_the_lease_settings_are_checked_naming_the_field():
    with pytest.raises(ValueError, match=r"^RuntimeConfig.lease_ttl must be seconds > 0, got 0$"):
        callboard.RuntimeConfig(lease_ttl=0)
    with pytest.raises(
        ValueError, match=r"^RuntimeConfig.lease_poll must be less than lease_ttl \(2.0\), got 2.0$"
    ):
        callboard.RuntimeConfig(lease_ttl=2.0, lease_poll=2.0)
    assert callboard.RuntimeConfig(lease_ttl=2.0, lease_poll=0.5).lease_poll == 0.5


async def test_a_second_process_under_a_node_name_takes_it_over_and_the_first_takes_nothing(
    pg_url, tmp_path, caplog
):
    with trio.fail_after(20):
        async with open_postgres_store(pg_url, tmp_path / "one", node="n") as first:
            await first.enqueue([msg("k/x"), msg("k/y")])
            assert await first.claim("k/x")
            async with open_postgres_store(pg_url, tmp_path / "two", node="n") as second:
                # The first's life of "n" is over: what it owned is free, and it
                # can take nothing more, nor write for what it had.
                assert (await first.claim("k/y"), await second.claim("k/y")) == (False, True)
                assert await second.claim("k/x")
                with pytest.raises(LeaseLost):
                    await first.commit(Commit("k/x", cursor=1))
                (row,) = rows(pg_url, "SELECT node, COUNT(*) FROM callboard_nodes GROUP BY node")
    assert row == ("n", 1)
    assert "node 'n' was still live under an earlier life" in caplog.text


async def test_a_node_gone_for_ten_lease_periods_is_forgotten_and_one_just_lapsed_is_listed(
    pg_url, tmp_path
):
    with trio.fail_after(20):
        async with open_postgres_store(pg_url, tmp_path / "a", node="a"):
            pass  # makes the schema, and leaves
        with psycopg.connect(pg_url) as conn:
            # Two nodes that were killed: one an hour ago, one a second ago.
            for name, ago in (("killed", "1 hour"), ("lapsed", "1 second")):
                conn.execute(
                    "INSERT INTO callboard_nodes (node, life, started_at, heartbeat, expires) "
                    "VALUES (%(n)s, 1, clock_timestamp() - %(ago)s::interval, "
                    "clock_timestamp() - %(ago)s::interval, clock_timestamp() - %(ago)s::interval)",
                    {"n": name, "ago": ago},
                )
        # A node starting (as each heartbeat) forgets those gone ten lease_ttl (10 s) ago.
        async with open_postgres_store(pg_url, tmp_path / "b", node="b") as b:
            listed = [(n.node, n.live) for n in await b.nodes()]
    assert listed == [("b", True), ("lapsed", False)]


async def test_a_node_that_lost_an_actor_writes_nothing_for_it_until_it_claims_it_again(
    pg_url, tmp_path
):
    with trio.fail_after(30):
        async with open_postgres_store(pg_url, tmp_path / "a", node="a") as a:
            await a.enqueue([msg("k/x"), msg("k/x")])
            assert await a.claim("k/x")
            # a's lease lapses (a is not told); b takes the actor, commits, and leaves:
            # the actor has no owner at all now.
            lapse(pg_url, "a")
            async with open_postgres_store(pg_url, tmp_path / "b", node="b") as b:
                assert await b.claim("k/x")
                await b.commit(Commit("k/x", cursor=1, events=(event(),), state=b'{"b":1}'))
            # a's lease is live again (as after its heartbeat started a new life).
            with psycopg.connect(pg_url) as conn:
                conn.execute(
                    "UPDATE callboard_nodes SET expires = clock_timestamp() + interval '1 hour' "
                    "WHERE node = 'a'"
                )
            # a's writes from what it knew are refused: the first by the fence,
            # the next because a no longer owns it, rather than by taking it back.
            with pytest.raises(LeaseLost):
                await a.commit(Commit("k/x", cursor=2, events=(event(),), state=b'{"a":1}'))
            with pytest.raises(LeaseLost):
                await a.commit(Commit("k/x", cursor=2, events=(event(),), state=b'{"a":2}'))
            with pytest.raises(LeaseLost):
                await a.mark_attempts("k/x", 2, 2)
            table = rows(pg_url, "SELECT cursor, state, event_head FROM actors")
            attempts = rows(pg_url, "SELECT seq, attempts FROM mailbox ORDER BY seq")
    assert table == [(1, b'{"b":1}', 1)]
    assert attempts == [(2, 0)]
