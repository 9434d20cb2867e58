"""The store's writer, driven directly: counters kept in memory, rows deferred
to the end of a batch, and what a failure or a reopen does to them."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing

import callboard
from callboard.errors import ActorStopped, StoreUnavailable, UnknownActor
from callboard.store import Store, open_sqlite_store
from callboard.store._records import Commit, Enqueue, NewEvent, StoredAck


def msg(address: str, text: str = "m", **kw: Any) -> Enqueue:
    return Enqueue(address, "note", f'"{text}"'.encode(), **kw)


def event(type_: str = "happened") -> NewEvent:
    return NewEvent(type_, b"{}", 0.0)


async def send(store: Store, address: str, text: str = "m") -> StoredAck | Exception:
    (result,) = await store.enqueue([msg(address, text)])
    return result


async def one_batch(
    store: Store, release: Callable[[], None], *calls: Callable[[], Awaitable[Any]]
) -> list[Any]:
    """Run the calls' writes in this order, all in one batch of the writer,
    which waits for what ``release`` lets go of (`Backend.hold_writes`);
    each call's result, or the exception it raised."""
    results: list[Any] = [None] * len(calls)

    async def run(index: int, call: Callable[[], Awaitable[Any]]) -> None:
        try:
            results[index] = await call()
        except Exception as exc:  # returned to the test
            results[index] = exc

    # Someone else holds a lock: the writer waits for it on a first write
    # while the calls queue up behind it, in order.
    before = store.statistics().batches
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.prune_keys, 1e9)
            await trio.testing.wait_all_tasks_blocked()
            for index, call in enumerate(calls):
                nursery.start_soon(run, index, call)
                await trio.testing.wait_all_tasks_blocked()
            release()
    finally:
        release()
    # The waiting write's batch, then one batch of all the calls.
    assert store.statistics().batches - before == 2
    return results


async def mailbox_seqs(store: Store, address: str) -> list[int]:
    return [r.seq for r in await store.pending(address, 0, 10_000)]


async def event_seqs(store: Store, address: str) -> list[int]:
    return [e.seq for e in await store.events(address, 0, 100_000)]


async def test_a_failing_operation_leaves_the_others_applied_and_the_counters_right(
    tmp_path, store_backend
):
    with trio.fail_after(20):
        async with store_backend.open(tmp_path) as store:
            await store.spawn("a", "k", b"{}")
            await store.spawn("b", "k", b"{}")
            assert await send(store, "a") == StoredAck("a", 1, False)
            await store.commit(Commit("a", events=(event(),)))

            results = await one_batch(
                store,
                store_backend.hold_writes(tmp_path),
                lambda: send(store, "a"),
                lambda: store.commit(Commit("a", events=(event(), event()))),
                lambda: store.commit(Commit("nobody", events=(event(),))),
                lambda: send(store, "a"),
                lambda: send(store, "b"),
            )
            assert results[0] == StoredAck("a", 2, False)
            assert [seq for seq, _ in results[1].events] == [2, 3]
            assert isinstance(results[2], UnknownActor)
            assert results[3] == StoredAck("a", 3, False)
            assert results[4] == StoredAck("b", 1, False)

            # The next writes continue from what was committed, not from the
            # counters the failed batch had advanced.
            assert await send(store, "a") == StoredAck("a", 4, False)
            assert await send(store, "b") == StoredAck("b", 2, False)
            result = await store.commit(Commit("a", events=(event(),)))
            assert [seq for seq, _ in result.events] == [4]

            # A failure only the deferred rows meet (at the flush before COMMIT).
            store_backend.refuse_poison(tmp_path, "events", "type")
            results = await one_batch(
                store,
                store_backend.hold_writes(tmp_path),
                lambda: send(store, "a"),
                lambda: store.commit(Commit("a", events=(event("poison"),), state=b"1")),
                lambda: store.commit(Commit("a", events=(event(),))),
                lambda: send(store, "b"),
            )
            assert results[0] == StoredAck("a", 5, False)
            assert isinstance(results[1], StoreUnavailable)
            assert [seq for seq, _ in results[2].events] == [5]
            assert results[3] == StoredAck("b", 3, False)
            assert await send(store, "a") == StoredAck("a", 6, False)
            result = await store.commit(Commit("a", events=(event(),)))
            assert [seq for seq, _ in result.events] == [6]

            a = await store.actor("a")
            assert a is not None and a.state is None
            assert (a.mailbox_head, a.event_head) == (6, 6)
            assert await mailbox_seqs(store, "a") == [1, 2, 3, 4, 5, 6]
            assert await event_seqs(store, "a") == [1, 2, 3, 4, 5, 6]
            assert await mailbox_seqs(store, "b") == [1, 2, 3]


async def test_seqs_continue_from_the_database_after_a_reopen(tmp_path, store_backend):
    with trio.fail_after(20):
        async with store_backend.open(tmp_path) as store:
            await store.spawn("a", "k", b"{}")
            for _ in range(3):
                await send(store, "a")
            await store.commit(Commit("a", cursor=2, events=(event(), event())))
            (virtual,) = await store.enqueue([msg("v", create_kind="k")])
            assert virtual == StoredAck("v", 1, False)
            await send(store, "v")
        async with store_backend.open(tmp_path) as store:
            assert await send(store, "a") == StoredAck("a", 4, False)
            assert await send(store, "v") == StoredAck("v", 3, False)
            result = await store.commit(Commit("a", events=(event(),)))
            assert [seq for seq, _ in result.events] == [3]
            assert await mailbox_seqs(store, "a") == [3, 4]
            assert await mailbox_seqs(store, "v") == [1, 2, 3]
            assert await event_seqs(store, "a") == [1, 2, 3]


async def test_seqs_are_gap_free_across_batches_mixing_sends_and_commits(tmp_path, store_backend):
    rng = random.Random(7)
    addresses = [f"a{i}" for i in range(6)]
    sent = dict.fromkeys(addresses, 0)
    handled = dict.fromkeys(addresses, 0)
    emitted = dict.fromkeys(addresses, 0)
    with trio.fail_after(60):
        async with store_backend.open(tmp_path, max_cached_actors=3) as store:
            for address in addresses:
                await store.spawn(address, "k", b"{}")
            for _ in range(40):
                stored = dict(sent)  # what earlier batches committed
                calls: list[Callable[[], Awaitable[Any]]] = []
                for _ in range(rng.randrange(2, 12)):
                    address = rng.choice(addresses)
                    if rng.random() < 0.5:
                        calls.append(lambda a=address: send(store, a))
                        sent[address] += 1
                        continue
                    sends = tuple(msg(rng.choice(addresses)) for _ in range(rng.randrange(3)))
                    for s in sends:
                        sent[s.address] += 1
                    events = tuple(event() for _ in range(rng.randrange(4)))
                    emitted[address] += len(events)
                    cursor = None
                    if handled[address] < stored[address] and rng.random() < 0.5:
                        # Only what an earlier batch stored, as the runtime does.
                        cursor = handled[address] = rng.randrange(
                            handled[address] + 1, stored[address] + 1
                        )
                    commit = Commit(address, events=events, sends=sends, cursor=cursor)
                    calls.append(lambda c=commit: store.commit(c))
                results = await one_batch(store, store_backend.hold_writes(tmp_path), *calls)
                assert not [r for r in results if isinstance(r, Exception)]
        async with store_backend.open(tmp_path) as store:
            for address in addresses:
                record = await store.actor(address)
                assert record is not None
                assert record.mailbox_head == sent[address]
                assert record.event_head == emitted[address]
                assert await event_seqs(store, address) == list(range(1, emitted[address] + 1))
                assert await mailbox_seqs(store, address) == list(
                    range(record.cursor + 1, sent[address] + 1)
                )


async def test_an_actor_gone_final_refuses_sends_though_its_counters_were_cached(
    tmp_path, store_backend
):
    with trio.fail_after(20):
        async with store_backend.open(tmp_path) as store:
            await store.spawn("a", "k", b"{}")
            assert await send(store, "a") == StoredAck("a", 1, False)
            await store.commit(Commit("a", events=(event(),)))  # counters cached now
            results = await one_batch(
                store,
                store_backend.hold_writes(tmp_path),
                lambda: send(store, "a"),
                lambda: store.commit(Commit("a", events=(event(),), status="stopped", final=True)),
                lambda: send(store, "a"),
            )
            assert results[0] == StoredAck("a", 2, False)
            assert [seq for seq, _ in results[1].events] == [2]
            assert isinstance(results[2], ActorStopped)
            # A later commit of the stopped actor (its own events) does not let
            # it take messages again.
            result = await store.commit(Commit("a", events=(event(),), busy=False))
            assert [seq for seq, _ in result.events] == [3]
            assert isinstance(await send(store, "a"), ActorStopped)
            (refused,) = (await store.commit(Commit("a", sends=(msg("a"),)))).acks
            assert isinstance(refused, ActorStopped)
            record = await store.actor("a")
            assert record is not None and record.final
            assert (record.mailbox_head, record.event_head) == (2, 3)
            assert await mailbox_seqs(store, "a") == [1, 2]


async def test_a_dead_letter_for_a_message_stored_in_the_same_batch_keeps_the_message(
    tmp_path, store_backend
):
    # The one read that could see a row deferred in its own batch: the
    # dead letter copies the message from the mailbox.
    with trio.fail_after(20):
        async with store_backend.open(tmp_path) as store:
            await store.spawn("a", "k", b"{}")
            results = await one_batch(
                store,
                store_backend.hold_writes(tmp_path),
                lambda: send(store, "a", "poison"),
                lambda: store.commit(Commit("a", dead_letter=(1, b'{"type": "E"}'), cursor=1)),
                lambda: store.mark_attempts("a", 2, 2),
                lambda: send(store, "a", "next"),
                lambda: store.mark_attempts("a", 2, 2),
            )
            assert results[0] == StoredAck("a", 1, False)
            assert results[3] == StoredAck("a", 2, False)
            (dead,) = await store.dead_letters("a")
            assert (dead.seq, dead.body) == (1, b'"poison"')
            (left,) = await store.pending("a", 0, 10)
            assert (left.seq, left.body, left.attempts) == (2, b'"next"', 1)
            assert (await store.actor("a")).cursor == 1


async def test_each_store_keeps_its_own_bounded_counters(tmp_path, store_backend):
    with trio.fail_after(20):
        async with (
            store_backend.open(tmp_path / "one", max_cached_actors=4) as one,
            store_backend.open(tmp_path / "two", max_cached_actors=4) as two,
        ):
            for store in (one, two):
                for i in range(10):
                    await store.spawn(f"a{i}", "k", b"{}")
            for round_ in range(1, 4):
                for i in range(10):
                    assert await send(one, f"a{i}") == StoredAck(f"a{i}", round_, False)
                assert await send(two, "a0") == StoredAck("a0", round_, False)
                # Trimmed between batches: never more than the bound and one batch.
                assert len(one._state.heads) <= 4 + 1
            assert [(await store.actor("a0")).mailbox_head for store in (one, two)] == [3, 3]


async def actor_row(store: Store, address: str) -> tuple[Any, ...]:
    a = await store.actor(address)
    assert a is not None
    return (a.state, a.state_version, a.cursor, a.busy, a.mailbox_head, a.event_head)


async def test_two_commits_of_one_actor_in_one_batch_merge_with_the_later_winning(
    tmp_path, store_backend
):
    with trio.fail_after(20):
        async with store_backend.open(tmp_path) as store:
            await store.spawn("a", "k", b"{}")
            for _ in range(3):
                await send(store, "a")
            results = await one_batch(
                store,
                store_backend.hold_writes(tmp_path),
                lambda: store.commit(
                    Commit("a", state=b"1", state_version=1, cursor=3, events=(event(),), busy=True)
                ),
                lambda: send(store, "a"),
                # An older cursor does not move it back; no busy leaves it as it is.
                lambda: store.commit(Commit("a", state=b"2", cursor=2, events=(event(),))),
                lambda: store.commit(Commit("a", state_version=2, busy=False)),
            )
            assert [seq for seq, _ in results[0].events] == [1]
            assert results[1] == StoredAck("a", 4, False)
            assert [seq for seq, _ in results[2].events] == [2]
            assert await actor_row(store, "a") == (b"2", 2, 3, False, 4, 2)
            assert await mailbox_seqs(store, "a") == [4]
            assert await event_seqs(store, "a") == [1, 2]


async def test_a_commit_then_a_final_stop_in_one_batch_keeps_both_in_order(tmp_path, store_backend):
    with trio.fail_after(20):
        async with store_backend.open(tmp_path) as store:
            for address in ("a", "b"):
                await store.spawn(address, "k", b"{}")
                await send(store, address)
                await send(store, address)
            results = await one_batch(
                store,
                store_backend.hold_writes(tmp_path),
                lambda: store.commit(Commit("a", state=b"1", cursor=1, busy=True)),
                lambda: store.commit(Commit("b", state=b"1", cursor=2, busy=True)),
                lambda: store.commit(
                    Commit(
                        "a", cursor=2, events=(event(),), status="stopped", final=True, busy=False
                    )
                ),
                lambda: store.commit(Commit("b", state=b"2", status="stopped", final=True)),
                lambda: send(store, "a"),
            )
            assert [seq for seq, _ in results[2].events] == [1]
            assert isinstance(results[4], ActorStopped)
            assert await actor_row(store, "a") == (b"1", 0, 2, False, 2, 1)
            assert await actor_row(store, "b") == (b"2", 0, 2, True, 2, 0)
            assert [(r.status, r.final) for r in await store.actors()] == [("stopped", True)] * 2
            assert await mailbox_seqs(store, "a") == []
            assert await mailbox_seqs(store, "b") == []


async def test_a_crash_commit_between_two_ordinary_ones_keeps_the_batch_order(
    tmp_path, store_backend
):
    with trio.fail_after(20):
        async with store_backend.open(tmp_path) as store:
            await store.spawn("a", "k", b"{}")
            await send(store, "a")
            await one_batch(
                store,
                store_backend.hold_writes(tmp_path),
                lambda: store.commit(Commit("a", state=b"1", busy=True)),
                lambda: store.commit(Commit("a", restarts=1, last_error=b'{"e": 1}', busy=False)),
                lambda: store.commit(Commit("a", cursor=1)),
            )
            a = await store.actor("a")
            assert a is not None
            assert (a.state, a.cursor, a.busy, a.restarts, a.last_error) == (
                b"1",
                1,
                False,
                1,
                b'{"e": 1}',
            )


async def test_a_failed_batch_drops_the_steps_it_deferred(tmp_path, store_backend):
    with trio.fail_after(20):
        async with store_backend.open(tmp_path) as store:
            await store.spawn("a", "k", b"{}")
            await send(store, "a")
            await store.commit(Commit("a", state=b"1", busy=False))
            store_backend.refuse_poison(tmp_path, "events", "type")
            store_backend.refuse_poison(tmp_path, "logs", "log")
            results = await one_batch(
                store,
                store_backend.hold_writes(tmp_path),
                # Fails after its step was deferred: at once (logs), or at the flush (events).
                lambda: store.commit(
                    Commit("a", state=b"lost", cursor=1, busy=True, appends=(("poison", b"x"),))
                ),
                lambda: store.commit(Commit("a", events=(event(),))),
                lambda: store.commit(
                    Commit("a", state=b"lost", cursor=1, busy=True, events=(event("poison"),))
                ),
                lambda: store.commit(Commit("a", events=(event(),))),
            )
            assert isinstance(results[0], StoreUnavailable)
            assert [seq for seq, _ in results[1].events] == [1]
            assert isinstance(results[2], StoreUnavailable)
            assert [seq for seq, _ in results[3].events] == [2]
            assert await actor_row(store, "a") == (b"1", 0, 0, False, 1, 2)
            assert not store._state.steps


async def test_a_store_that_cannot_open_its_files_says_so_in_one_sentence(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "callboard.sqlite3").write_bytes(b"this is not a database" * 100)
    with trio.fail_after(10), pytest.raises(StoreUnavailable) as refused:
        async with open_sqlite_store(data):
            pass  # pragma: no cover
    assert str(refused.value).startswith(f"cannot open the store in {str(data)!r}: ")
    assert "(SQLITE_NOTADB)" in str(refused.value)


async def test_an_actor_whose_commits_the_store_refuses_is_inspected_as_failing(tmp_path):
    from gateway_kinds import Counter

    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path / "data", kinds=[Counter]) as rt:
            ack = await rt.send("counter/a", "add")
            await rt.wait_handled("counter/a", ack.seq)
            writer = rt._store._writer
            assert writer is not None
            pages = writer.execute("PRAGMA page_count").fetchone()[0]
            # SQLite's own limit makes the disk "full" for what needs new pages.
            writer.execute(f"PRAGMA max_page_count = {pages + 4}")
            await rt.send("counter/a", "grow", {"size": 400_000})
            # The step's commit fails, the crash is recorded, the cell waits out its
            # backoff and fails again: whenever everything waits, look.
            while (view := await rt.inspect("counter/a")).status != "failing":
                await trio.testing.wait_all_tasks_blocked(cushion=0.05)
            writer.execute("PRAGMA max_page_count = 1073741823")
    assert view.status == "failing"
    assert view.last_error is not None
    assert view.last_error["during"] == "commit"
    assert "full" in view.last_error["error"]
