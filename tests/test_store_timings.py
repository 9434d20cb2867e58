"""Each store times its group commits (ack latency, commit latency, batch size) and
says whether it takes writes, the same way on SQLite and on PostgreSQL."""

from __future__ import annotations

import time

import trio
import trio.testing
from core_kinds import Counter

import callboard
from callboard.store import CommitHistograms, Enqueue, Histogram


def msg(address: str) -> Enqueue:
    return Enqueue(address, "note", b'"m"')


def minus(after: Histogram, before: Histogram) -> Histogram:
    counts = tuple(a - b for a, b in zip(after.counts, before.counts, strict=True))
    return Histogram(after.bounds, counts, after.sum - before.sum)


def between(after: CommitHistograms, before: CommitHistograms) -> CommitHistograms:
    return CommitHistograms(
        minus(after.ack_seconds, before.ack_seconds),
        minus(after.commit_seconds, before.commit_seconds),
        minus(after.batch_size, before.batch_size),
    )


async def test_a_held_writer_shows_one_batch_of_the_writes_that_queued_behind_it(
    tmp_path, store_backend
):
    with trio.fail_after(20):
        async with store_backend.open(tmp_path) as store:
            await store.spawn("a", "k", b"{}")
            before, stats_before = store.commit_histograms(), store.statistics()
            release = store_backend.hold_writes(tmp_path)
            try:
                async with trio.open_nursery() as nursery:
                    began = time.perf_counter()
                    nursery.start_soon(store.prune_keys, 1e9)  # the writer waits on it
                    await trio.testing.wait_all_tasks_blocked()
                    for _ in range(20):
                        nursery.start_soon(store.enqueue, [msg("a")])
                    await trio.testing.wait_all_tasks_blocked()
                    release()
            finally:
                release()
            ended = time.perf_counter()
            got = between(store.commit_histograms(), before)
            batches = store.statistics().batches - stats_before.batches
    assert batches == 2
    assert (got.ack_seconds.count, got.commit_seconds.count, got.batch_size.count) == (2, 2, 2)
    # The held write alone, then the twenty queued behind it in one transaction.
    sizes = dict(zip((*got.batch_size.bounds, float("inf")), got.batch_size.counts, strict=True))
    assert (sizes[1.0], sizes[32.0], got.batch_size.sum) == (1, 1, 21)
    # Each write was queued before the writer took it, and all within the test's span.
    assert got.commit_seconds.sum <= got.ack_seconds.sum <= 2 * (ended - began)


async def test_writes_left_behind_by_a_full_batch_are_timed_in_the_batches_that_take_them(
    tmp_path, store_backend
):
    with trio.fail_after(20):
        async with store_backend.open(tmp_path, max_batch=4) as store:
            await store.spawn("a", "k", b"{}")
            before = store.commit_histograms()
            release = store_backend.hold_writes(tmp_path)
            try:
                async with trio.open_nursery() as nursery:
                    began = time.perf_counter()
                    nursery.start_soon(store.prune_keys, 1e9)  # the writer waits on it
                    await trio.testing.wait_all_tasks_blocked()
                    for _ in range(10):
                        nursery.start_soon(store.enqueue, [msg("a")])
                    await trio.testing.wait_all_tasks_blocked()
                    release()
            finally:
                release()
            ended = time.perf_counter()
            got = between(store.commit_histograms(), before)
    sizes = dict(zip((*got.batch_size.bounds, float("inf")), got.batch_size.counts, strict=True))
    # The held write, then the ten behind it four at a time.
    assert (sizes[1.0], sizes[2.0], sizes[4.0], got.batch_size.count) == (1, 1, 2, 4)
    assert got.commit_seconds.sum <= got.ack_seconds.sum <= 4 * (ended - began)


async def test_a_store_that_takes_writes_says_so_and_a_closed_one_does_not(tmp_path, store_backend):
    with trio.fail_after(20):
        async with store_backend.open(tmp_path) as store:
            batches = store.statistics().batches
            assert await store.writable()
            # The probe went through the writer, as one (empty) write.
            assert store.statistics().batches == batches + 1
        assert not await store.writable()


def _admin(url: str, *statements: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


async def test_a_postgresql_store_whose_server_went_away_is_not_writable_until_it_is_back(
    tmp_path, pg_server, pg_url
):
    name = pg_url.rsplit("/", 1)[1]
    admin = pg_server.url()
    with trio.fail_after(30):
        async with callboard.open_runtime(tmp_path / "data", kinds=[Counter], store=pg_url) as rt:
            before = await rt.writable()
            await trio.to_thread.run_sync(
                _admin, admin, f"ALTER DATABASE {name} ALLOW_CONNECTIONS false",
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'",
            )  # fmt: skip
            lost = [await rt.writable(), await rt.writable()]  # found out, then cannot reconnect
            await trio.to_thread.run_sync(
                _admin, admin, f"ALTER DATABASE {name} ALLOW_CONNECTIONS true"
            )
            back = await rt.writable()
            ack = await rt.send("counter/a", "add", {"id": "m0"})
    assert (before, lost, back) == (True, [False, False], True)
    assert ack.seq == 1
