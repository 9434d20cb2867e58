"""The `Store` protocol's contract, held by every store alike: the writes the
runtime relies on beyond a plain send and commit, driven directly."""

from __future__ import annotations

import subprocess
import sys

import trio
import trio.testing

from callboard.errors import ActorStopped, UnknownActor
from callboard.store import Commit, Enqueue, NewTimer, StoredAck


def msg(address: str, text: str = "m", **kw: object) -> Enqueue:
    return Enqueue(address, "note", f'"{text}"'.encode(), **kw)  # type: ignore[arg-type]


async def test_enqueue_soon_tells_its_callback_on_the_trio_thread_after_the_commit(
    tmp_path, store_backend
):
    heard: list[object] = []
    done = trio.Event()
    with trio.fail_after(10):
        async with store_backend.open(tmp_path) as store:
            await store.spawn("a", "k", b"{}")

            def then(outcome: object) -> None:
                trio.lowlevel.current_task()  # raises off the trio thread
                heard.append(outcome)
                if len(heard) == 2:
                    done.set()

            assert store.enqueue_soon(msg("a", key="k1"), then)
            assert store.enqueue_soon(msg("nobody"), then)
            await done.wait()
            # Durable by then: a read sees it.
            (row,) = await store.pending("a", 0, 10)
    assert heard[0] == StoredAck("a", 1, False)
    assert isinstance(heard[1], UnknownActor)
    assert (row.seq, row.key) == (1, "k1")


async def test_enqueue_soon_queues_nothing_when_the_queue_is_full(tmp_path, store_backend):
    with trio.fail_after(10):
        async with store_backend.open(tmp_path, queue_size=1) as store:
            await store.spawn("a", "k", b"{}")
            release = store_backend.hold_writes(tmp_path)
            heard: list[object] = []
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(store.prune_keys, 1e9)  # the writer waits on it
                    await trio.testing.wait_all_tasks_blocked()
                    assert store.enqueue_soon(msg("a"), heard.append)
                    assert not store.enqueue_soon(msg("a"), heard.append)
                    release()
            finally:
                release()
            await store.enqueue([msg("a")])  # after the queued one
    assert heard == [StoredAck("a", 1, False)]


async def test_a_virtual_actor_is_created_by_its_first_message_and_a_key_makes_a_duplicate(
    tmp_path, store_backend
):
    with trio.fail_after(10):
        async with store_backend.open(tmp_path) as store:
            acks = await store.enqueue(
                [msg("v", create_kind="kind", key="k"), msg("v", create_kind="kind", key="k")]
            )
            record = await store.actor("v")
            assert await store.spawn("v", "other", b"{}") == (True, None)
            assert await store.spawn("s", "kind", b'{"x":1}') == (False, b'{"x":1}')
            assert await store.spawn("s", "kind", b"{}") == (True, b'{"x":1}')
    assert acks == [StoredAck("v", 1, False), StoredAck("v", 1, True)]
    assert record is not None and (record.kind, record.mailbox_head) == ("kind", 1)


async def test_rows_carry_the_life_of_the_store_that_stored_them(tmp_path, store_backend):
    with trio.fail_after(10):
        async with store_backend.open(tmp_path) as first:
            await first.enqueue([msg("v", create_kind="k")])
            life = first.life
        async with store_backend.open(tmp_path) as second:
            await second.enqueue([msg("v", create_kind="k")])
            rows = await second.pending("v", 0, 10)
            other = second.life
    assert 0 <= life < 2**62 and life != other
    assert [r.life for r in rows] == [life, other]


async def test_attempts_count_up_and_at_least_the_number_asked(tmp_path, store_backend):
    with trio.fail_after(10):
        async with store_backend.open(tmp_path) as store:
            await store.spawn("a", "k", b"{}")
            for _ in range(3):
                await store.enqueue([msg("a")])
            await store.mark_attempts("a", 1, 2)
            await store.mark_attempts("a", 1, 1, attempts=5)
            await store.mark_attempts("a", 2, 3, attempts=1)
            # A crashed batch's commit: at least 4 for 2..3, in the same transaction.
            await store.commit(Commit("a", attempts=(2, 3, 4)))
            rows = await store.pending("a", 0, 10)
    assert [r.attempts for r in rows] == [5, 4, 4]


async def test_a_dead_letter_goes_back_to_its_mailbox_once(tmp_path, store_backend):
    with trio.fail_after(10):
        async with store_backend.open(tmp_path) as store:
            await store.spawn("a", "k", b"{}")
            await store.enqueue([msg("a", "poison", key="p")])
            await store.commit(Commit("a", dead_letter=(1, b'{"type":"E"}'), cursor=1))
            (dead,) = await store.dead_letters()
            assert await store.dead_letter_count() == 1
            assert await store.requeue(dead.id) == StoredAck("a", 2, False)
            assert isinstance(await store.requeue(dead.id), LookupError)
            (row,) = await store.pending("a", 0, 10)
            assert await store.dead_letters("a") == []
    assert (dead.seq, dead.body, dead.key, dead.error) == (1, b'"poison"', "p", b'{"type":"E"}')
    assert (row.seq, row.body, row.key) == (2, b'"poison"', None)


async def test_a_send_to_a_stopped_actor_is_dead_lettered_unless_asked_to_drop_it(
    tmp_path, store_backend
):
    with trio.fail_after(10):
        async with store_backend.open(tmp_path) as store:
            for address in ("a", "b"):
                await store.spawn(address, "k", b"{}")
            await store.commit(Commit("a", status="stopped", final=True))
            result = await store.commit(
                Commit("b", sends=(msg("a", "kept"), msg("a", "dropped", drop_if_stopped=True)))
            )
            letters = await store.dead_letters("a")
    assert [type(ack) for ack in result.acks] == [ActorStopped, ActorStopped]
    assert [(d.seq, d.body) for d in letters] == [(0, b'"kept"')]


async def test_timers_fire_once_in_due_order_and_a_key_replaces_its_timer(tmp_path, store_backend):
    now = [1000.0]
    with trio.fail_after(10):
        async with store_backend.open(tmp_path, clock=lambda: now[0]) as store:
            await store.spawn("a", "k", b"{}")
            await store.commit(
                Commit("a", timers=(NewTimer(1010, "late", b"1", "k"), NewTimer(1005, "x", b"2")))
            )
            # The same key again: the first is gone, and the new one fires
            # after timers set before it with the same due time.
            await store.commit(Commit("a", timers=(NewTimer(1005, "again", b"3", "k"),)))
            assert await store.next_timer_due() == 1005
            assert await store.fire_timers() == []
            assert await store.addresses_with_work(now[0]) == []
            now[0] = 1006
            assert await store.addresses_with_work(now[0]) == ["a"]
            fired = await store.fire_timers()
            assert await store.fire_timers() == []
            rows = await store.pending("a", 0, 10)
            assert await store.next_timer_due() is None
    assert fired == [StoredAck("a", 1, False), StoredAck("a", 2, False)]
    assert [(r.type, r.body, r.sender, r.at) for r in rows] == [
        ("x", b"2", "a", 1006.0),
        ("again", b"3", "a", 1006.0),
    ]


async def test_keys_are_forgotten_by_the_key_clock_after_the_window(tmp_path, store_backend):
    with trio.fail_after(10):
        async with store_backend.open(tmp_path) as store:
            store.key_clock = lambda: 100.0
            await store.enqueue([msg("v", create_kind="k", key="old")])
            store.key_clock = lambda: 200.0
            await store.enqueue([msg("v", create_kind="k", key="new")])
            assert await store.prune_keys(50, now=210.0) == 1
            again = await store.enqueue(
                [msg("v", create_kind="k", key="old"), msg("v", create_kind="k", key="new")]
            )
    assert again == [StoredAck("v", 3, False), StoredAck("v", 2, True)]


async def test_logs_append_in_order_and_read_in_pages(tmp_path, store_backend):
    with trio.fail_after(10):
        async with store_backend.open(tmp_path) as store:
            await store.spawn("a", "k", b"{}")
            await store.commit(Commit("a", appends=(("c", b"1"), ("c", b"2"), ("d", b"x"))))
            await store.commit(Commit("a", appends=(("c", b"3"),)))
            assert await store.log_length("a", "c") == 3
            assert await store.read_log("a", "c", 1, 10) == [b"2", b"3"]
            assert await store.log_length("a", "none") == 0
            counts = await store.status_counts()
            page = await store.actors("k", after="", limit=1)
    assert counts == {"idle": 1}
    assert [a.address for a in page] == ["a"]


async def test_concurrent_writes_share_one_commit_and_the_statistics_say_so(
    tmp_path, store_backend
):
    with trio.fail_after(10):
        async with store_backend.open(tmp_path) as store:
            await store.spawn("a", "k", b"{}")
            before = store.statistics()
            release = store_backend.hold_writes(tmp_path)
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(store.prune_keys, 1e9)
                    await trio.testing.wait_all_tasks_blocked()
                    for _ in range(20):
                        nursery.start_soon(store.enqueue, [msg("a")])
                    await trio.testing.wait_all_tasks_blocked()
                    release()
            finally:
                release()
            after = store.statistics()
            assert store.healthy
    assert (after.batches - before.batches, after.operations - before.operations) == (2, 21)
    assert after.largest_batch >= 20


def test_the_embedded_store_needs_no_postgresql_driver(tmp_path):
    # SQLite is the default: opening it, or the CLI, imports no psycopg.
    script = (
        "import sys, trio, callboard, callboard.cli._serve\n"
        "async def main():\n"
        "    async with callboard.open_runtime(sys.argv[1]):\n"
        "        pass\n"
        "trio.run(main)\n"
        "print('psycopg' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "data")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"
