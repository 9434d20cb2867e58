"""Where the SQLite writer makes a COMMIT: inline when nothing would run
meanwhile, in its own thread otherwise (`CommitPlace`)."""

from __future__ import annotations

import contextlib
import socket
import threading

import trio
import trio.testing

from callboard.store import open_sqlite_store
from callboard.store._commit_place import INLINE_OPS, INLINE_SECONDS, PROBE_EVERY, CommitPlace
from callboard.store._records import Enqueue


def _commits_by_thread(store: object) -> list[bool]:
    """From now on, for each COMMIT of ``store``'s writer: whether it ran on this thread."""
    here = threading.get_ident()
    seen: list[bool] = []

    def traced(sql: str) -> None:
        if sql == "COMMIT":
            seen.append(threading.get_ident() == here)

    store._writer.set_trace_callback(traced)  # type: ignore[attr-defined]
    return seen


async def _spawned(store: object, count: int) -> list[str]:
    addresses = [f"counter/c{i}" for i in range(count)]
    for address in addresses:
        await store.spawn(address, "counter", b"{}")  # type: ignore[attr-defined]
    return addresses


async def test_a_lone_small_write_commits_on_the_trio_thread(tmp_path):
    with trio.fail_after(20):
        async with open_sqlite_store(tmp_path) as store:
            (address,) = await _spawned(store, 1)
            inline = _commits_by_thread(store)
            for n in range(3):
                # A quick disk, whatever this machine's is: each inline commit is
                # timed, and a slow fsync would send the next one to the thread.
                store._commit_place._seconds = 0.0  # type: ignore[attr-defined]
                (ack,) = await store.enqueue([Enqueue(address, "add", b"1")])
                assert ack.seq == n + 1
            assert inline == [True, True, True]
            assert [r.seq for r in await store.pending(address, 0, 10)] == [1, 2, 3]


async def test_a_batch_of_many_writes_commits_in_the_writers_thread(tmp_path):
    with trio.fail_after(20):
        async with open_sqlite_store(tmp_path) as store:
            addresses = await _spawned(store, INLINE_OPS * 3)
            inline = _commits_by_thread(store)
            before = store.statistics().batches
            acks = []

            async def send(address: str) -> None:
                acks.extend(await store.enqueue([Enqueue(address, "add", b"1")]))

            # Started together, the sends all queue before the writer runs: one batch.
            async with trio.open_nursery() as nursery:
                for address in addresses:
                    nursery.start_soon(send, address)
            assert store.statistics().batches - before == 1
            assert inline == [False]
            assert len(acks) == len(addresses) and all(a.seq == 1 for a in acks)


async def test_the_place_is_inline_only_for_a_small_batch_with_nothing_to_run_on_a_quick_disk():
    place = CommitPlace()
    assert place.inline(1) and place.inline(INLINE_OPS)
    assert not place.inline(INLINE_OPS + 1)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.lowlevel.checkpoint)  # ready to run until it first runs
        assert not place.inline(1)
    assert place.inline(1)
    # A task waiting to write: its socket's buffer is full, and no one reads.
    left, right = socket.socketpair()
    with left, right:
        left.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            while True:
                left.send(b"x" * 65536)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.socket.from_stdlib_socket(left).send, b"more")
            await trio.testing.wait_all_tasks_blocked()
            assert not place.inline(1)
            nursery.cancel_scope.cancel()
    assert place.inline(1)
    # A slow disk: once the commits take longer than the bound, they leave the loop...
    for _ in range(20):
        place.took(INLINE_SECONDS * 4)
    assert not place.inline(1)
    # ...and come back once the disk is quick again.
    for _ in range(40):
        place.took(INLINE_SECONDS / 10)
    assert place.inline(1)


def test_while_the_disk_looks_slow_one_commit_in_so_many_is_made_inline_to_time_it_again():
    place = CommitPlace()
    for _ in range(50):
        place.took(INLINE_SECONDS * 10)  # inline commits that held the loop 10 ms

    async def decide() -> list[bool]:
        return [place.inline(1) for _ in range(3 * PROBE_EVERY)]

    decisions = trio.run(decide)
    assert [i for i, made in enumerate(decisions) if made] == [
        PROBE_EVERY - 1,
        2 * PROBE_EVERY - 1,
        3 * PROBE_EVERY - 1,
    ]
    # The probes find the disk quick again, and the commits come back inline.
    for _ in range(50):
        place.took(INLINE_SECONDS / 10)
    assert all(trio.run(decide))


async def test_commits_made_in_the_writers_thread_do_not_count_as_the_disks_time(tmp_path):
    # A commit handed to the thread comes back late when the loop is busy;
    # that lateness must not make the next lone write leave the loop.
    with trio.fail_after(20):
        async with open_sqlite_store(tmp_path) as store:
            addresses = await _spawned(store, INLINE_OPS + 1)
            inline = _commits_by_thread(store)
            place = store._commit_place  # type: ignore[attr-defined]
            # A quick disk, whatever this machine's is: the spawns' own inline
            # commits, timed, could otherwise already say "slow" (over 1 ms an
            # fsync), and the lone write below would be a probe's turn away.
            place._seconds = 0.0
            before = place._seconds

            async def send(address: str) -> None:
                await store.enqueue([Enqueue(address, "add", b"1")])

            async with trio.open_nursery() as nursery:
                for address in addresses:
                    nursery.start_soon(send, address)
            assert inline == [False]
            assert place._seconds == before  # the thread's commit was not timed
            await send(addresses[0])
            assert inline == [False, True]
            assert place._seconds != before  # the inline one was
