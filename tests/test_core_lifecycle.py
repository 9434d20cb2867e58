"""Passivation, whole-process recovery, the data-directory lock, timers, events, migration."""

from __future__ import annotations

import attrs
import pytest
import trio
import trio.testing
from child import Child
from core_kinds import Alarm, Brittle, Counter
from store_backends import all_blocked

import callboard


class Busy(callboard.Actor):
    """Records unfinished work in its state, as a running turn or job would."""

    kind = "busy"
    virtual = True

    def is_busy(self) -> bool:
        return self.state.get("working", False)

    async def handle(self, ctx, message):
        self.state["working"] = message.type == "start"


class Held(callboard.Actor):
    """Never finishes handling: its messages stay unhandled."""

    kind = "held"
    virtual = True

    async def handle(self, ctx, message):
        await trio.sleep_forever()


KINDS = [Counter, Brittle, Alarm, Busy, Held]


class FakeWallClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_an_idle_actor_is_passivated_and_the_next_message_brings_back_its_state(
    store_url, tmp_path
):
    config = callboard.RuntimeConfig(passivate_after=0.01)
    with trio.fail_after(10):
        async with callboard.open_runtime(
            tmp_path, kinds=KINDS, config=config, store=store_url
        ) as rt:
            async with rt.subscribe("counter/c", after=0) as events:
                await rt.send("counter/c", "add", {"n": 5, "id": "m1"})
                async for event in events:
                    if event.type == "actor.passivated":
                        break
                idle = [(i.actor, i.status) for i in await rt.list()]
                active_when_idle = rt.active_count
                await rt.send("counter/c", "add", {"n": 1, "id": "m2"})
                types = []
                async for event in events:
                    types.append(event.type)
                    if event.type == "counted":
                        break
    assert idle == [("counter/c", "idle")] and active_when_idle == 0
    assert types == ["actor.started", "counted"]
    assert event.data == {"total": 6, "id": "m2"}


async def test_more_idle_actors_than_passivating_at_once_all_passivate(store_url, tmp_path):
    # Passivations are bounded in number at a time; the rest wait their turn.
    config = callboard.RuntimeConfig(passivate_after=0.01, passivating_at_once=16)
    addresses = [f"counter/p{n:03}" for n in range(200)]
    passivated: set[str] = set()
    with trio.fail_after(60):
        async with callboard.open_runtime(
            tmp_path, kinds=KINDS, config=config, store=store_url
        ) as rt:
            async with rt.subscribe("counter/*", buffer=10_000) as events:
                for address in addresses:
                    await rt.send(address, "add", {"n": 1, "id": address})
                async for event in events:
                    if event.type == "actor.passivated":
                        passivated.add(event.actor)
                        if len(passivated) == len(addresses):
                            break
            listed = {(i.actor, i.status) for i in await rt.list("counter")}
            active = rt.active_count
    assert active == 0
    assert listed == {(address, "idle") for address in addresses}


class _HeldSlots:
    """The runtime's passivation slots, all taken by the test, telling when
    an actor starts to wait for one."""

    def __init__(self) -> None:
        self._slots = trio.Semaphore(1)
        self._slots.acquire_nowait()  # the test holds the only slot
        self.waiting = trio.Event()

    async def acquire(self) -> None:
        self.waiting.set()
        await self._slots.acquire()

    def release(self) -> None:
        self._slots.release()


async def test_a_message_for_an_actor_waiting_its_turn_to_passivate_is_handled_at_once(
    store_url, tmp_path
):
    config = callboard.RuntimeConfig(passivate_after=0.01, passivating_at_once=1)
    with trio.fail_after(20):
        async with callboard.open_runtime(
            tmp_path, kinds=KINDS, config=config, store=store_url
        ) as rt:
            slots = rt._cells.passivation_slots = _HeldSlots()
            first = await rt.send("counter/w", "add", {"n": 1, "id": "m1"})
            await rt.wait_handled("counter/w", first.seq)
            await slots.waiting.wait()  # idle, asked to passivate, no slot free
            second = await rt.send("counter/w", "add", {"n": 2, "id": "m2"})
            await rt.wait_handled("counter/w", second.seq)
            status = {i.actor: i.status for i in await rt.list("counter")}["counter/w"]
            slots.release()
            view = await rt.inspect("counter/w")
    assert status == "active"
    assert view.state["seen"] == ["m1", "m2"]


async def test_a_restart_activates_only_actors_with_unhandled_messages_due_timers_or_work(
    store_url,
    tmp_path,
):
    clock = FakeWallClock()
    with trio.fail_after(10):
        async with callboard.open_runtime(
            tmp_path, kinds=KINDS, clock=clock, store=store_url
        ) as rt:
            await rt.wait_handled(
                "counter/done", (await rt.send("counter/done", "add", {"id": "x"})).seq
            )
            await rt.send("held/pending", "work")
            await rt.wait_handled("busy/working", (await rt.send("busy/working", "start")).seq)
            await rt.wait_handled("busy/resting", (await rt.send("busy/resting", "stop")).seq)
            alarm = await rt.send("alarm/due", "set", {"delay": 60, "label": "a"})
            await rt.wait_handled("alarm/due", alarm.seq)
            await rt.wait_handled(
                "alarm/later",
                (await rt.send("alarm/later", "set", {"delay": 7200, "label": "b"})).seq,
            )
        clock.now += 120
        async with callboard.open_runtime(
            tmp_path, kinds=KINDS, clock=clock, store=store_url
        ) as rt:
            active = sorted(i.actor for i in await rt.list(status="active"))
    assert active == ["alarm/due", "busy/working", "held/pending"]


async def test_a_second_runtime_on_a_live_data_directory_is_refused_until_the_owner_dies(tmp_path):
    data = str(tmp_path / "data")
    with trio.fail_after(20):
        child = await Child.start(["send", data, "c0", "1", "1"])
        try:
            await child.wait_for_line("ready")
            assert (await child.readline() or "").startswith("ack c0-s0 0 ")
            with pytest.raises(callboard.DataDirectoryLocked) as refused:
                async with callboard.open_runtime(data, kinds=KINDS):
                    pass
        finally:
            await child.kill()
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            assert [i.actor for i in await rt.list()] == ["counter/a0"]
    assert str(refused.value) == (
        f"the data directory {data!r} is in use by another runtime (pid {child.process.pid}); "
        "stop that process or use another directory"
    )


async def test_a_timer_that_fell_due_while_no_runtime_ran_fires_on_the_next_start(
    store_url, tmp_path
):
    clock = FakeWallClock()
    with trio.fail_after(10):
        async with callboard.open_runtime(
            tmp_path, kinds=KINDS, clock=clock, store=store_url
        ) as rt:
            ack = await rt.send("alarm/a", "set", {"delay": 3600, "label": "wake"})
            await rt.wait_handled("alarm/a", ack.seq)
        clock.now += 7200
        async with callboard.open_runtime(
            tmp_path, kinds=KINDS, clock=clock, store=store_url
        ) as rt:
            await rt.wait_handled("alarm/a", ack.seq + 1)
            view = await rt.inspect("alarm/a")
    assert view.state == {"rang": ["wake"]}


async def test_a_timer_fires_while_the_runtime_runs(store_url, tmp_path):
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            async with rt.subscribe("alarm/b") as events:
                await rt.send("alarm/b", "set", {"delay": 0.01, "label": "soon"})
                async for event in events:
                    if event.type == "rang":
                        break
    assert event.data == {"label": "soon"}


async def test_subscribe_after_replays_stored_events_then_live_ones_across_a_restart(
    store_url, tmp_path
):
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            for n in range(3):
                await rt.send("counter/e", "add", {"id": f"m{n}"})
            await rt.wait_handled("counter/e", 3)
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            got = []
            async with rt.subscribe("counter/e", after=2) as events:
                await rt.send("counter/e", "add", {"id": "m3"})
                async for event in events:
                    got.append((event.seq, event.type, (event.data or {}).get("id")))
                    if event.type == "counted" and event.data["id"] == "m3":
                        break
    assert got == [
        (3, "counted", "m1"),
        (4, "counted", "m2"),
        (5, "actor.started", None),
        (6, "counted", "m3"),
    ]


async def test_a_subscriber_that_falls_behind_its_buffer_reads_the_rest_from_the_store(
    store_url, tmp_path
):
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            async with rt.subscribe("counter/l", after=0, buffer=2) as events:
                for n in range(20):
                    await rt.send("counter/l", "add", {"id": f"m{n}"})
                await rt.wait_handled("counter/l", 20)
                seqs = []
                async for event in events:
                    seqs.append(event.seq)
                    if event.type == "counted" and event.data["id"] == "m19":
                        break
            delivered: list[int] = []
            with pytest.raises(
                callboard.Lagged, match=r"subscribe again with after=23 to get the rest$"
            ):
                async with rt.subscribe("counter/l", buffer=2, on_lag="raise") as live:
                    for n in range(20, 30):
                        await rt.send("counter/l", "add", {"id": f"m{n}"})
                    await rt.wait_handled("counter/l", 30)
                    async for event in live:
                        delivered.append(event.seq)
    assert delivered == [22, 23]
    assert seqs == list(range(1, seqs[-1] + 1))


@attrs.define
class TallyV2:
    total: int = 0
    ids: list[str] = attrs.Factory(list)
    note: str = "new field"


class CounterV2(callboard.Actor):
    kind = "counter"
    state_type = TallyV2
    state_version = 2
    virtual = True

    @classmethod
    def migrate(cls, data, version):
        if version < 2:
            data = {**data, "ids": data.pop("seen", [])}
        return data

    async def handle(self, ctx, message):
        self.state.total += 1
        self.state.ids.append(message.body["id"])


async def test_a_snapshot_from_an_older_state_class_loads_into_the_new_one(store_url, tmp_path):
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path, kinds=[Counter], store=store_url) as rt:
            await rt.wait_handled(
                "counter/v", (await rt.send("counter/v", "add", {"n": 4, "id": "a"})).seq
            )
        async with callboard.open_runtime(tmp_path, kinds=[CounterV2], store=store_url) as rt:
            await rt.wait_handled("counter/v", (await rt.send("counter/v", "add", {"id": "b"})).seq)
            view = await rt.inspect("counter/v")
    assert view.state == {"total": 5, "ids": ["a", "b"], "note": "new field"}


async def test_closing_the_runtime_ends_waits_and_subscriptions_with_runtime_closed(
    store_url, tmp_path
):
    outcomes: list[str] = []

    async def wait_for_never(rt) -> None:
        try:
            await rt.wait_handled("held/h", 2)
        except callboard.RuntimeClosed as exc:
            outcomes.append(f"wait: {exc}")

    async def read_events(rt) -> None:
        async with rt.subscribe("held/h") as events:
            try:
                async for _ in events:
                    pass
            except callboard.RuntimeClosed as exc:
                outcomes.append(f"subscription: {exc}")

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
                await rt.send("held/h", "work")
                nursery.start_soon(wait_for_never, rt)
                nursery.start_soon(read_events, rt)
                await all_blocked(rt._store)
    assert sorted(outcomes) == [
        "subscription: the runtime closed; the subscription to 'held/h' ended",
        "wait: the runtime closed before held/h handled message 2",
    ]
