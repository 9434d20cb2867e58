"""A group commit of actor steps only waits for company (`Company`): a write
that comes meanwhile shares its COMMIT; waits that nothing joins come less often.
Any other batch waits up to two scheduler passes while tasks are ready to run."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import callboard
from callboard.store import open_sqlite_store
from callboard.store._company import MAX_SKIP, Company
from callboard.store._op_queue import OpQueue, _Op
from callboard.store._records import Commit, CommitResult, Enqueue
from callboard.store._rhythm import GroupCommits

_LONG = 1.0  # seconds, the longest delay: waited only where the clock jumps


def _commits(store: object) -> list[str]:
    """From now on, one entry per COMMIT of ``store``'s writer."""
    seen: list[str] = []

    def traced(sql: str) -> None:
        if sql == "COMMIT":
            seen.append(sql)

    store._writer.set_trace_callback(traced)  # type: ignore[attr-defined]
    return seen


def test_waits_again_after_company_came_and_ever_less_often_after_none_did() -> None:
    company = Company(0.001)
    assert company.due() and company.due()  # no wait has missed yet
    company.waited(joined=False)
    assert [company.due() for _ in range(2)] == [False, True]
    company.waited(joined=False)
    assert [company.due() for _ in range(3)] == [False, False, True]
    for _ in range(20):
        company.waited(joined=False)
    pattern = [company.due() for _ in range(MAX_SKIP + 1)]
    assert pattern == [False] * MAX_SKIP + [True]  # a chain pays one wait in MAX_SKIP + 1
    company.waited(joined=True)
    assert company.due() and company.due()


def test_no_delay_never_waits_and_a_bad_one_is_refused_by_name() -> None:
    assert not Company(0.0).due()
    with pytest.raises(ValueError, match="commit delay must be seconds from 0 to 1"):
        Company(-0.001)
    with pytest.raises(ValueError, match=r"RuntimeConfig.commit_delay must be seconds from 0"):
        callboard.RuntimeConfig(commit_delay=2)
    with pytest.raises(ValueError, match=r"RuntimeConfig.commit_delay"):
        callboard.RuntimeConfig(commit_delay=True)
    assert callboard.RuntimeConfig(commit_delay=0).commit_delay == 0


async def test_a_message_sent_during_the_wait_shares_the_steps_commit(
    tmp_path, store_backend
) -> None:
    with trio.fail_after(20):
        async with store_backend.open(tmp_path, commit_delay=_LONG) as store:
            await store.spawn("counter/c", "counter", b"{}")
            (first,) = await store.enqueue([Enqueue("counter/c", "add", b"1")])
            batches = store.statistics().batches
            stepped: list[CommitResult | Exception] = []
            assert store.commit_soon(Commit("counter/c", state=b"1", cursor=1), stepped.append)
            # The writer has taken the step, and waits for company: nothing is written yet.
            await trio.testing.wait_all_tasks_blocked()
            assert stepped == [] and store.statistics().batches == batches
            (second,) = await store.enqueue([Enqueue("counter/c", "add", b"2")])
            assert (first.seq, second.seq) == (1, 2)
            assert len(stepped) == 1 and isinstance(stepped[0], CommitResult)
            assert store.statistics().batches - batches == 1  # one COMMIT for both
            assert [r.seq for r in await store.pending("counter/c", 0, 10)] == [2]
            record = await store.actor("counter/c")
            assert record is not None and record.state == b"1" and record.cursor == 1


async def test_a_batch_with_a_message_in_it_is_written_at_once(tmp_path, autojump_clock) -> None:
    async with open_sqlite_store(tmp_path, commit_delay=_LONG) as store:
        await store.spawn("counter/c", "counter", b"{}")
        commits = _commits(store)
        for n in range(3):
            start = trio.current_time()
            (ack,) = await store.enqueue([Enqueue("counter/c", "add", b"1")])
            assert ack.seq == n + 1 and trio.current_time() - start == 0
        # A step and a message queued together: no wait either.
        stepped: list[CommitResult | Exception] = []
        start = trio.current_time()
        assert store.commit_soon(Commit("counter/c", cursor=1), stepped.append)
        (ack,) = await store.enqueue([Enqueue("counter/c", "add", b"1")])
        assert trio.current_time() - start == 0 and len(stepped) == 1
        assert commits == ["COMMIT"] * 4


async def test_a_wait_nothing_joins_ends_after_the_delay_and_the_next_step_does_not_wait(
    tmp_path, autojump_clock
) -> None:
    async with open_sqlite_store(tmp_path, commit_delay=_LONG) as store:
        await store.spawn("counter/c", "counter", b"{}")
        await store.enqueue([Enqueue("counter/c", "add", b"1"), Enqueue("counter/c", "add", b"2")])
        commits = _commits(store)
        waited = []
        for cursor in (1, 2):
            start = trio.current_time()
            await store.commit(Commit("counter/c", cursor=cursor))
            waited.append(trio.current_time() - start)
        assert waited[0] >= _LONG and waited[1] < _LONG
        assert commits == ["COMMIT", "COMMIT"]
        assert await store.pending("counter/c", 0, 10) == []


async def test_no_commit_delay_writes_a_lone_step_at_once(tmp_path, autojump_clock) -> None:
    async with open_sqlite_store(tmp_path, commit_delay=0) as store:
        await store.spawn("counter/c", "counter", b"{}")
        await store.enqueue([Enqueue("counter/c", "add", b"1")])
        start = trio.current_time()
        await store.commit(Commit("counter/c", cursor=1))
        assert trio.current_time() - start == 0


def _queue(max_batch: int = 8) -> OpQueue:
    """An `OpQueue` with no writer: the test plays the writer's part."""
    queue = OpQueue()
    queue._max_batch = max_batch
    queue._send, queue._receive = trio.open_memory_channel(64)
    queue._company = Company(_LONG)
    queue._group_commits = GroupCommits()
    return queue


def _write(name: str) -> _Op:
    return _Op(lambda conn, now: name)


async def test_a_write_queued_by_a_task_ready_to_run_joins_the_batch_just_taken(
    autojump_clock,
) -> None:
    # As over sockets: one task's wake-up (trio-websocket's reader) makes
    # another ready to run (the connection's), and that one queues the write.
    queue, go = _queue(), trio.Event()

    async def connection() -> None:
        await go.wait()
        queue._send.send_nowait(_write("second"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(connection)
        await trio.testing.wait_all_tasks_blocked()
        batch = queue._take_batch(_write("first"))
        go.set()  # ready to run, not yet run
        start = trio.current_time()
        with trio.CancelScope() as scope:
            scope.cancel()  # shielded: what the batch took stays in it
            await queue._gather(batch)
        assert [op.fn(None, 0.0) for op in batch] == ["first", "second"]
        assert trio.current_time() == start and queue._waiting_since is None


async def test_with_no_task_ready_to_run_a_batch_is_written_without_a_yield() -> None:
    queue = _queue()
    batch = queue._take_batch(_write("first"))
    with trio.testing.assert_no_checkpoints():
        await queue._gather(batch)
    assert len(batch) == 1


async def test_a_full_batch_takes_nothing_more_and_notes_who_still_waits() -> None:
    queue, go = _queue(max_batch=2), trio.Event()

    async def connection() -> None:
        await go.wait()
        for name in ("third", "fourth"):
            queue._send.send_nowait(_write(name))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(connection)
        await trio.testing.wait_all_tasks_blocked()
        batch = queue._take_batch(_write("first"))
        go.set()
        await queue._gather(batch)
        assert [op.fn(None, 0.0) for op in batch] == ["first", "third"]
        assert queue._waiting_since is not None  # "fourth" waits for the next batch
