"""Live attach from the embedding API: an actor's state read and replaced, its
mailbox paused (durably), stepped one message at a time and resumed.

Every test runs on both stores; "a restart" is a new runtime on the same data
directory (and the same database)."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from core_kinds import Brittle, Counter, Tally

import callboard


class Gated(callboard.Actor):
    """``hold`` says it has begun, waits for the test's gate, then writes ``by_handler``."""

    kind = "gated"
    virtual = True
    begun: trio.Event | None = None
    gate: trio.Event | None = None

    async def handle(self, ctx: callboard.Context, message: callboard.Message) -> None:
        assert Gated.begun is not None and Gated.gate is not None
        entered = self.state.get("entered", 0) + 1
        Gated.begun.set()
        await Gated.gate.wait()
        self.state.update(entered=entered, by_handler=True)


KINDS = [Counter, Brittle, Gated]


async def _types_until(events: callboard.Subscription, last: str) -> list[str]:
    types = []
    async for event in events:
        types.append(event.type)
        if event.type == last:
            return types
    raise AssertionError(f"the stream ended before {last!r}: {types}")


async def test_a_replaced_state_is_committed_announced_and_handled_on_from(store_url, tmp_path):
    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            ack = await rt.send("counter/a", "add", {"n": 2, "id": "m1"})
            await rt.wait_handled("counter/a", ack.seq)
            assert await rt.get_state("counter/a") == {"total": 2, "seen": ["m1"]}
            async with rt.subscribe("counter/a", after=0) as events:
                seq = await rt.replace_state("counter/a", {"total": 40, "seen": ["edited"]})
                types = await _types_until(events, "actor.state_replaced")
            assert await rt.get_state("counter/a") == {"total": 40, "seen": ["edited"]}
            ack = await rt.send("counter/a", "add", {"n": 2, "id": "m2"})
            await rt.wait_handled("counter/a", ack.seq)
            # An instance of the state type is taken as well.
            await rt.replace_state("counter/a", Tally(total=7, seen=["typed"]))
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            after_restart = await rt.get_state("counter/a")
            head = await rt.head("counter/a")
    assert types == ["actor.started", "counted", "actor.state_replaced"]
    assert seq == 3
    assert after_restart == {"total": 7, "seen": ["typed"]}
    assert head == 5  # started, counted, replaced, counted, replaced


async def test_a_state_edit_waits_for_the_batch_being_handled_and_is_not_overwritten(
    tmp_path, store_url
):
    Gated.begun, Gated.gate = trio.Event(), trio.Event()
    replaced: list[int] = []
    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            ack = await rt.send("gated/g", "hold")
            await Gated.begun.wait()  # the handler waits at the gate
            async with trio.open_nursery() as nursery:

                async def replace() -> None:
                    replaced.append(await rt.replace_state("gated/g", {"edited": True}))

                nursery.start_soon(replace)
                await trio.testing.wait_all_tasks_blocked()
                during = list(replaced)
                Gated.gate.set()
            await rt.wait_handled("gated/g", ack.seq)
            state = await rt.get_state("gated/g")
            events = [e.type for e in await rt._store.events("gated/g", 0, 10)]
    assert during == []  # not beside the handler: after its commit
    assert replaced == [2]
    assert state == {"edited": True}  # the handler's commit came first; the edit stands
    assert events == ["actor.started", "actor.state_replaced"]


@pytest.mark.parametrize(
    ("state", "message"),
    [
        (
            {"total": "many", "seen": []},
            "the new state of 'counter/a': $.total is not valid (invalid literal for int() "
            "with base 10: 'many') (a Tally); nothing was changed",
        ),
        (
            {"total": "5", "seen": []},
            "the new state of 'counter/a': $.total would be stored as 5 (a number), not "
            '"5" (a string): give it as Tally holds it; nothing was changed',
        ),
        (
            {"total": 1, "seen": [], "totl": 2},
            "the new state of 'counter/a': $.totl is not a field of Tally; nothing was changed",
        ),
        (
            {"total": 1},
            "the new state of 'counter/a': $.seen is missing: a new state gives every field of "
            "Tally (`callboard state ADDRESS` prints them); nothing was changed",
        ),
        (
            [1, 2],
            "the new state of 'counter/a' must be a JSON object, got [1,2] (an array); "
            "nothing was changed",
        ),
    ],
)
async def test_a_state_its_kind_does_not_hold_is_refused_naming_the_field(tmp_path, state, message):
    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path, kinds=KINDS) as rt:
            ack = await rt.send("counter/a", "add", {"n": 2, "id": "m1"})
            await rt.wait_handled("counter/a", ack.seq)
            with pytest.raises(callboard.BadRequest) as refused:
                await rt.replace_state("counter/a", state)
            after = await rt.get_state("counter/a")
            head = await rt.head("counter/a")
    assert str(refused.value) == message
    assert after == {"total": 2, "seen": ["m1"]}
    assert head == 2  # no event: nothing was committed


async def test_a_paused_actor_stores_its_mailbox_handles_nothing_and_steps_one_by_one(
    store_url, tmp_path
):
    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            ack = await rt.send("counter/p", "add", {"n": 1, "id": "m1"})
            await rt.wait_handled("counter/p", ack.seq)
            async with rt.subscribe("counter/p", after=0) as events:
                assert await rt.pause("counter/p") == "paused"
                before = await _types_until(events, "actor.paused")
                acks = [await rt.send("counter/p", "add", {"n": 1, "id": f"m{i}"})
                        for i in (2, 3, 4)]  # fmt: skip
                listed = await rt.list("counter")
                only_paused = await rt.list(status="paused")
                view = await rt.inspect("counter/p")
                first = await rt.step("counter/p")
                stepped = await rt.get_state("counter/p")
                second = await rt.step("counter/p")
                assert await rt.resume("counter/p") == "active"
                await rt.wait_handled("counter/p", acks[-1].seq)
                after = await _types_until(events, "actor.resumed")
                after += await _types_until(events, "counted")
                resumed = await rt.get_state("counter/p")
                empty_mailbox_after_pause = await rt.pause("counter/p")
                nothing = await rt.step("counter/p")
    assert before == ["actor.started", "counted", "actor.paused"]
    assert [(a.actor, a.status, a.mailbox) for a in listed] == [("counter/p", "paused", 3)]
    assert only_paused == listed
    assert (view.status, view.mailbox, view.state) == ("paused", 3, {"total": 1, "seen": ["m1"]})
    assert (first, second) == (acks[0].seq, acks[1].seq)
    assert stepped == {"total": 2, "seen": ["m1", "m2"]}
    # Between the two steps and the resume: one message each, nothing more.
    assert after == ["counted", "counted", "actor.resumed", "counted"]
    assert resumed == {"total": 4, "seen": ["m1", "m2", "m3", "m4"]}
    assert (empty_mailbox_after_pause, nothing) == ("paused", None)


async def test_a_step_of_an_actor_that_is_not_paused_is_refused(tmp_path):
    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path, kinds=KINDS) as rt:
            await rt.send("counter/a", "add", {"n": 1, "id": "m1"})
            with pytest.raises(callboard.BadRequest) as refused:
                await rt.step("counter/a")
    assert str(refused.value) == (
        "counter/a is not paused, so it handles its mailbox by itself; pause it first to "
        "step it one message at a time"
    )


async def test_the_pause_survives_a_restart_and_its_mailbox_waits_for_the_resume(
    store_url, tmp_path
):
    with trio.fail_after(30):
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            await rt.wait_handled(
                "counter/d", (await rt.send("counter/d", "add", {"id": "m0"})).seq
            )
            await rt.pause("counter/d")
            for i in (1, 2):
                await rt.send("counter/d", "add", {"n": 1, "id": f"m{i}"})
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            # Recovery leaves it be (its messages wait for the resume): its row says paused.
            active = rt.active_count
            listed = await rt.list()
            ack = await rt.send("counter/d", "add", {"n": 1, "id": "m3"})
            held = await rt.inspect("counter/d")
            await rt.resume("counter/d")
            await rt.wait_handled("counter/d", ack.seq)
            resumed = await rt.get_state("counter/d")
    assert active == 0
    assert [(a.actor, a.status, a.mailbox) for a in listed] == [("counter/d", "paused", 2)]
    assert (held.status, held.mailbox, held.state) == ("paused", 3, {"total": 1, "seen": ["m0"]})
    assert resumed == {"total": 4, "seen": ["m0", "m1", "m2", "m3"]}


async def test_a_crash_while_stepping_keeps_the_actor_paused(tmp_path, store_url):
    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            await rt.wait_handled("brittle/b", (await rt.send("brittle/b", "ok", "w")).seq)
            await rt.pause("brittle/b")
            await rt.send("brittle/b", "boom", "x")
            await rt.send("brittle/b", "ok", "y")
            with pytest.raises(callboard.ActorCrashed) as crashed:
                await rt.step("brittle/b")
            # The message is tried again at the next step, alone.
            with pytest.raises(callboard.ActorCrashed):
                await rt.step("brittle/b")
            with pytest.raises(callboard.ActorCrashed):
                await rt.step("brittle/b")
            # Its attempts are spent: this step dead-letters it, the next one handles "ok".
            dead = await rt.step("brittle/b")
            view = await rt.inspect("brittle/b")  # each crash was recorded before the next step
            ok = await rt.step("brittle/b")
            state = await rt.get_state("brittle/b")
            letters = await rt.dead_letters("brittle/b")
    assert str(crashed.value) == (
        "the message stepped into brittle/b crashed its handler (RuntimeError: boom on "
        "attempt 1); its supervision decides what follows: restarted, it stays paused and "
        "the next step tries the message again (or dead-letters it once it used its attempts)"
    )
    assert (view.status, view.mailbox, view.restarts) == ("paused", 1, 3)
    assert (dead, ok) == (2, 3)
    assert state == {"handled": ["ok:w", "ok:y"]}
    assert [(d.seq, d.type) for d in letters] == [(2, "boom")]


async def test_a_paused_actor_stops_and_a_stopped_one_cannot_be_paused(tmp_path, store_url):
    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            await rt.send("counter/s", "add", {"n": 1, "id": "m0"})
            await rt.pause("counter/s")
            await rt.send("counter/s", "add", {"n": 1, "id": "m1"})
            status = await rt.stop("counter/s")
            with pytest.raises(callboard.ActorStopped) as refused:
                await rt.pause("counter/s")
    assert status == "stopped"
    assert str(refused.value) == "counter/s has ended (stopped); there is nothing to pause"


async def test_a_paused_actor_rests_and_messages_do_not_wake_it(tmp_path, store_url):
    config = callboard.RuntimeConfig(rest_after=0.01, passivate_after=3600.0)
    with trio.fail_after(20):
        async with callboard.open_runtime(
            tmp_path, kinds=KINDS, config=config, store=store_url
        ) as rt:
            await rt.wait_handled("counter/r", (await rt.send("counter/r", "add", {"id": "m"})).seq)
            await rt.pause("counter/r")
            while rt.statistics().resting != 1:  # noqa: ASYNC110 (resting announces nothing)
                await trio.sleep(0.005)
            rests = rt.statistics().rests
            acks = [await rt.send("counter/r", "add", {"n": 1, "id": f"m{i}"}) for i in range(5)]
            still = rt.statistics()
            seq = await rt.step("counter/r")
            await rt.resume("counter/r")
            await rt.wait_handled("counter/r", acks[-1].seq)
            state = await rt.get_state("counter/r")
    # Five messages left it resting, with no task started for them.
    assert (still.resting, still.rests) == (1, rests)
    assert seq == acks[0].seq
    assert state["seen"] == ["m", "m0", "m1", "m2", "m3", "m4"]
