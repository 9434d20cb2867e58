"""Retention: what a long-running runtime stops keeping, and that nobody is handed a gap.

Ages go by the runtime's clock seam, driven here by trio's mock clock: the
wall clock is ``START`` plus trio's time, so one ``jump`` ages everything,
and the retention service's own pass comes only when a test asks for it
(its interval is longer than every jump) unless the test is about the
service.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
import trio
import trio.testing
from store_backends import all_blocked, read_rows

import callboard
from callboard.codec import loads
from callboard.store import RetentionPolicy, RetentionStep

START = 1_800_000_000.0
DAY = 24 * 3600.0


def wall_clock() -> float:
    """The wall clock of these tests: it runs (and jumps) with trio's clock."""
    return START + trio.current_time()


def quiet(**retention: object) -> callboard.RuntimeConfig:
    """Nothing happens by itself within the tests' jumps but what a test names."""
    return callboard.RuntimeConfig(
        passivate_after=1e9, key_window=1e9, retention_interval=1e9, **retention
    )


class Diary(callboard.Actor):
    """Virtual. ``write`` appends the body to its ``conversation`` log, emits
    ``written`` and sets a far timer; ``notify`` sends ``x`` to ``to``; ``end`` stops it."""

    kind = "diary"
    virtual = True

    async def handle(self, ctx, message):
        if message.type == "write":
            ctx.append("conversation", message.body)
            ctx.emit("written", message.body)
            ctx.schedule(1e8, "remind", key="reminder")
        elif message.type == "notify":
            ctx.send(message.body["to"], "x")
        elif message.type == "burst":
            for i in range(message.body["n"]):
                ctx.emit("burst", {"i": i, "pad": "x" * message.body["size"]})
        elif message.type == "end":
            ctx.stop()


async def tell(rt: callboard.Runtime, to: str, type: str, body=None, *, key=None) -> None:
    """Send and wait until it was handled and committed."""
    ack = await rt.send(to, type, body, key=key)
    await rt.wait_handled(to, ack.seq)


async def conversation(rt: callboard.Runtime, address: str) -> list[object]:
    return [loads(item) for item in await rt._store.read_log(address, "conversation")]


def database(data: Path) -> closing[sqlite3.Connection]:
    return closing(sqlite3.connect(data / "callboard.sqlite3", isolation_level=None))


def held(data: Path, address: str, store_url: str | None) -> dict[str, int]:
    """How many rows of each table ``address`` still has (read from another connection)."""
    return {
        table: read_rows(
            data, store_url, f"SELECT COUNT(*) FROM {table} WHERE address = ?", (address,)
        )[0][0]
        for table in ("actors", "events", "logs", "mailbox", "keys", "timers")
    }


def event_seqs(data: Path, address: str, store_url: str | None) -> list[int]:
    rows = read_rows(
        data, store_url, "SELECT seq FROM events WHERE address = ? ORDER BY seq", (address,)
    )
    return [row[0] for row in rows]


async def test_events_beyond_the_count_kept_are_pruned_and_events_from_advances(store_url, data):
    with trio.fail_after(20):
        async with callboard.open_runtime(
            data, kinds=[Diary], config=quiet(event_retention=5), store=store_url
        ) as rt:
            for n in range(12):
                await tell(rt, "diary/d", "write", {"n": n})
            done = await rt.retention.run_pass()
            again = await rt.retention.run_pass()
            record = await rt._store.actor("diary/d")
            log = await conversation(rt, "diary/d")
    # actor.started and 12 written: the newest 5 stay.
    assert (done.events, again.events) == (8, 0)
    assert (record.events_from, record.event_head) == (9, 13)
    assert event_seqs(data, "diary/d", store_url) == [9, 10, 11, 12, 13]
    assert log == [{"n": n} for n in range(12)]  # the conversation of a live actor is never pruned


async def test_subscribing_after_a_pruned_seq_raises_pruned_naming_the_first_seq_held(
    store_url, data
):
    with trio.fail_after(20):
        async with callboard.open_runtime(
            data, kinds=[Diary], config=quiet(event_retention=5), store=store_url
        ) as rt:
            for n in range(12):
                await tell(rt, "diary/d", "write", {"n": n})
            await rt.retention.run_pass()
            with pytest.raises(callboard.Pruned) as pruned:
                async with rt.subscribe("diary/d", after=3):
                    pass
            seqs = []
            async with rt.subscribe("diary/d", after=pruned.value.first - 1) as events:
                async for event in events:
                    seqs.append(event.seq)
                    if event.seq == 13:
                        break
    assert (pruned.value.actor, pruned.value.first) == ("diary/d", 9)
    assert str(pruned.value) == (
        "the events of 'diary/d' before seq 9 were pruned by retention; subscribe with "
        "after=8 for the events still held (more are kept with a larger "
        "RuntimeConfig.event_retention or event_max_age)"
    )
    assert isinstance(pruned.value, callboard.CallboardError)
    assert pruned.value.code == "pruned"
    assert seqs == [9, 10, 11, 12, 13]


async def test_a_replay_that_retention_overtakes_raises_pruned_rather_than_skip_events(
    store_url, data
):
    with trio.fail_after(20):
        async with callboard.open_runtime(
            data, kinds=[Diary], config=quiet(event_retention=5), store=store_url
        ) as rt:
            for n in range(12):
                await tell(rt, "diary/d", "write", {"n": n})
            got = []
            with pytest.raises(callboard.Pruned) as pruned:
                async with rt.subscribe("diary/d", after=0) as events:
                    # Held when it subscribed; pruned before its first page was read.
                    await rt.retention.run_pass()
                    async for event in events:
                        got.append(event.seq)
    assert got == []
    assert pruned.value.first == 9


async def test_a_stopped_actor_past_its_retention_is_gone_and_a_live_conversation_stays(
    store_url, data, mock_clock
):
    mock_clock.rate = 1.0
    config = quiet(event_retention=2, stopped_retention=30 * DAY)
    with trio.fail_after(20 + 31 * DAY):
        async with callboard.open_runtime(
            data, kinds=[Diary], config=config, clock=wall_clock, store=store_url
        ) as rt:
            for address in ("diary/live", "diary/gone"):
                for n in range(3):
                    await tell(rt, address, "write", {"n": n}, key=f"{address}:{n}")
            await tell(rt, "diary/gone", "end")
            before = held(data, "diary/gone", store_url)
            mock_clock.jump(30 * DAY - 1)
            early = await rt.retention.run_pass()
            within = held(data, "diary/gone", store_url)
            mock_clock.jump(2)
            done = await rt.retention.run_pass()
            live = await conversation(rt, "diary/live")
            gone = await rt._store.actor("diary/gone")
            # Its address is free again: a message makes a new actor there.
            ack = await rt.send("diary/gone", "write", {"n": "anew"}, key="diary/gone:0")
    assert before == {"actors": 1, "events": 5, "logs": 3, "mailbox": 0, "keys": 3, "timers": 1}
    # Within its retention it keeps what it held, as any actor does (its newest 2 events).
    assert (early.actors, within) == (0, {**before, "events": 2})
    assert (done.actors, done.events, done.rows) == (1, 2, 3 + 3 + 1)
    assert gone is None
    assert held(data, "diary/live", store_url) == {
        "actors": 1, "events": 2, "logs": 3, "mailbox": 0, "keys": 3, "timers": 1,
    }  # fmt: skip
    assert live == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert ack == callboard.Ack(1, False)


async def test_dead_letters_expire_after_their_retention(store_url, data, mock_clock):
    mock_clock.rate = 1.0
    config = quiet(dead_letter_retention=30 * DAY, stopped_retention=None)
    with trio.fail_after(20 + 32 * DAY):
        async with callboard.open_runtime(
            data, kinds=[Diary], config=config, clock=wall_clock, store=store_url
        ) as rt:
            await tell(rt, "diary/closed", "end")
            # Sent to an actor that takes no more messages: to the dead letters.
            await tell(rt, "diary/sender", "notify", {"to": "diary/closed"})
            mock_clock.jump(DAY)
            await tell(rt, "diary/sender", "notify", {"to": "diary/closed"})
            letters = [letter.at - START for letter in await rt.dead_letters()]
            mock_clock.jump(30 * DAY - 10)
            first = await rt.retention.run_pass()
            kept = [letter.at - START for letter in await rt.dead_letters()]
            mock_clock.jump(DAY)
            second = await rt.retention.run_pass()
            left = await rt.dead_letters()
    assert len(letters) == 2
    assert (first.dead_letters, kept) == (1, letters[1:])
    assert (second.dead_letters, left) == (1, [])


async def test_ages_go_by_the_steady_clock_so_a_wall_clock_jump_alone_prunes_nothing(
    store_url, data, mock_clock
):
    mock_clock.rate = 1.0
    wall = [START]
    config = quiet(event_retention=None, event_max_age=3600.0)
    with trio.fail_after(20 + 2 * 3600):
        async with callboard.open_runtime(
            data, kinds=[Diary], config=config, clock=lambda: wall[0], store=store_url
        ) as rt:
            await tell(rt, "diary/d", "write", {"n": 0})
            wall[0] += 2 * 3600
            await tell(rt, "diary/d", "write", {"n": 1})
            jumped = await rt.retention.run_pass()
            mock_clock.jump(2 * 3600)
            aged = await rt.retention.run_pass()
            record = await rt._store.actor("diary/d")
    assert jumped.events == 0
    # actor.started and the first write are two hours old; the second is new.
    assert aged.events == 2
    assert record.events_from == 3
    assert event_seqs(data, "diary/d", store_url) == [3]


async def test_events_older_than_the_max_age_go_from_the_oldest_up_to_the_first_younger(
    store_url, data, mock_clock
):
    mock_clock.rate = 1.0
    config = quiet(event_retention=None, event_max_age=3600.0)
    with trio.fail_after(20 + 3 * 3600):
        async with callboard.open_runtime(
            data, kinds=[Diary], config=config, clock=wall_clock, store=store_url
        ) as rt:
            for address in ("diary/a", "diary/b"):
                await tell(rt, address, "write", {"n": 0})
            mock_clock.jump(2 * 3600)
            await tell(rt, "diary/a", "write", {"n": 1})
            mock_clock.jump(1800)
            done = await rt.retention.run_pass()
    assert done.events == 2 + 2
    assert (event_seqs(data, "diary/a", store_url), event_seqs(data, "diary/b", store_url)) == (
        [3],
        [],
    )


async def test_one_retention_write_deletes_at_most_its_batch_of_rows(store_url, data):
    with trio.fail_after(20):
        async with callboard.open_runtime(
            data, kinds=[Diary], config=quiet(), store=store_url
        ) as rt:
            await tell(rt, "diary/d", "burst", {"n": 300, "size": 10})
            policy = RetentionPolicy(keep_events=10, batch=100)
            steps = [await rt._store.retain(policy, RetentionStep())]
            while not steps[-1].done:
                steps.append(await rt._store.retain(policy, steps[-1]))
            record = await rt._store.actor("diary/d")
    # actor.started and 300 bursts: 291 go, 100 a write.
    assert [(s.phase, s.events) for s in steps] == [
        ("events", 100), ("events", 100), ("done", 91),
    ]  # fmt: skip
    assert (record.events_from, record.event_head) == (292, 301)


async def test_a_stopped_actor_too_big_for_one_write_is_removed_over_several_row_last(
    store_url, data
):
    with trio.fail_after(20):
        async with callboard.open_runtime(
            data, kinds=[Diary], config=quiet(), store=store_url
        ) as rt:
            for n in range(3):
                await tell(rt, "diary/gone", "write", {"n": n}, key=f"k{n}")
            await tell(rt, "diary/gone", "end")
            # Every actor that went final before now + 1 goes, four rows a write.
            policy = RetentionPolicy(stopped_before=rt.wall_time() + 1, batch=4)
            steps = [await rt._store.retain(policy, RetentionStep())]
            while not steps[-1].done:
                held_now = held(data, "diary/gone", store_url)
                assert held_now["actors"] == 1, "the row goes last"
                steps.append(await rt._store.retain(policy, steps[-1]))
    # 5 events, 3 log items, 3 keys, 1 timer, then the row: 13 rows, 4 a write.
    assert [(s.events, s.rows, s.actors) for s in steps] == [
        (4, 0, 0), (1, 3, 0), (0, 4, 0), (0, 0, 1),
    ]  # fmt: skip
    assert steps[-1].phase == "done"
    assert held(data, "diary/gone", store_url) == dict.fromkeys(
        ("actors", "events", "logs", "mailbox", "keys", "timers"), 0
    )


async def test_a_big_prune_gives_its_pages_back_to_the_file_system(data):
    # SQLite only: PostgreSQL's autovacuum gives the space back, not retention.
    with trio.fail_after(30):
        async with callboard.open_runtime(
            data, kinds=[Diary], config=quiet(event_retention=10)
        ) as rt:
            for _ in range(4):
                await tell(rt, "diary/d", "burst", {"n": 500, "size": 1000})
            with database(data) as conn:
                (before,) = conn.execute("PRAGMA page_count").fetchone()
            done = await rt.retention.run_pass()
            with database(data) as conn:
                (after,) = conn.execute("PRAGMA page_count").fetchone()
                (free,) = conn.execute("PRAGMA freelist_count").fetchone()
                (mode,) = conn.execute("PRAGMA auto_vacuum").fetchone()
    assert mode == 2  # INCREMENTAL, from the database's first table
    assert done.events == 1 + 2000 - 10
    # Three 1 KB events fill a page: the pruned ones held at least 663.
    assert done.pages >= 663
    assert (before - after, free) == (done.pages, 0)


async def test_the_retention_service_runs_a_pass_every_interval_by_itself(
    store_url, data, mock_clock
):
    mock_clock.rate = 1.0
    config = callboard.RuntimeConfig(
        passivate_after=1e9, event_retention=5, retention_interval=600.0
    )
    with trio.fail_after(20 + 600):
        async with callboard.open_runtime(
            data, kinds=[Diary], config=config, clock=wall_clock, store=store_url
        ) as rt:
            for n in range(12):
                await tell(rt, "diary/d", "write", {"n": n})
            mock_clock.jump(600)
            # The service has woken and queued its first write.
            await all_blocked(rt._store)
            after_it = await rt.retention.run_pass()  # waits for the service's pass
            stats = rt.statistics()
    assert after_it.events == 0
    assert (stats.retention_passes, stats.events_pruned) == (2, 8)
    assert event_seqs(data, "diary/d", store_url) == [9, 10, 11, 12, 13]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "event_retention",
            0,
            "RuntimeConfig.event_retention must be an integer >= 1, or None to keep every one, "
            "got 0",
        ),
        (
            "event_max_age",
            "1h",
            "RuntimeConfig.event_max_age must be seconds > 0, or None to keep for good, got '1h'",
        ),
        (
            "stopped_retention",
            -1,
            "RuntimeConfig.stopped_retention must be seconds > 0, or None to keep for good, got -1",
        ),
        (
            "dead_letter_retention",
            True,
            "RuntimeConfig.dead_letter_retention must be seconds > 0, or None to keep for good, "
            "got True",
        ),
        ("retention_interval", 0, "RuntimeConfig.retention_interval must be seconds > 0, got 0"),
        ("retention_batch", 0.5, "RuntimeConfig.retention_batch must be an integer >= 1, got 0.5"),
    ],
)
def test_a_retention_setting_that_makes_no_sense_is_refused_naming_it(field, value, message):
    with pytest.raises(ValueError) as refused:
        callboard.RuntimeConfig(**{field: value})
    assert str(refused.value) == message


def test_the_retention_defaults_bound_disk_and_keep_a_month_of_what_stopped():
    config = callboard.RuntimeConfig()
    assert (
        config.event_retention,
        config.event_max_age,
        config.stopped_retention,
        config.dead_letter_retention,
        config.retention_interval,
        config.retention_batch,
    ) == (10_000, None, 30 * DAY, 30 * DAY, 60.0, 2000)
