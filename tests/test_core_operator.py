"""What an operator asks of the embedded runtime, on both stores: `Runtime.delete`
removes an actor that has ended, `Runtime.wait_outcome` says how a message came
out once it was handled, `Runtime.requeue` names what it cannot find."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from test_core_retention import Diary, held, quiet, tell

import callboard

NOTHING = {"actors": 0, "events": 0, "logs": 0, "mailbox": 0, "keys": 0, "timers": 0}


async def test_deleting_an_ended_actor_removes_what_it_held_and_frees_its_name(store_url, data):
    with trio.fail_after(20):
        async with callboard.open_runtime(
            data, kinds=[Diary], config=quiet(), store=store_url
        ) as rt:
            for n in range(3):
                await tell(rt, "diary/d", "write", {"n": n}, key=f"k{n}")
            await tell(rt, "diary/d", "end")
            with pytest.raises(callboard.ActorStopped):
                await rt.send("diary/d", "write", {"n": 3})
            before = held(data, "diary/d", store_url)
            await rt.delete("diary/d")
            after = held(data, "diary/d", store_url)
            with pytest.raises(callboard.UnknownActor) as again:
                await rt.delete("diary/d")
            # The same key as before: forgotten with the actor, so it is a new message.
            ack = await rt.send("diary/d", "write", {"n": "anew"}, key="k0")
            await rt.wait_handled("diary/d", ack.seq)
            view = await rt.inspect("diary/d")
    assert before == {"actors": 1, "events": 5, "logs": 3, "mailbox": 0, "keys": 3, "timers": 1}
    assert after == NOTHING
    assert str(again.value) == "there is no actor at 'diary/d'"
    assert ack == callboard.Ack(1, False)
    assert (view.status, view.cursor) == ("active", 1)


async def test_an_actor_too_big_for_one_delete_op_goes_over_several_its_row_last(store_url, data):
    with trio.fail_after(20):
        async with callboard.open_runtime(
            data, kinds=[Diary], config=quiet(), store=store_url
        ) as rt:
            for n in range(3):
                await tell(rt, "diary/d", "write", {"n": n}, key=f"k{n}")
            await tell(rt, "diary/d", "end")
            steps = []
            while True:
                deletion = await rt._store.delete("diary/d", batch=4)
                steps.append((deletion.done, held(data, "diary/d", store_url)["actors"]))
                if deletion.done:
                    break
    assert steps[-1] == (True, 0)
    assert len(steps) >= 3 and all(row == 1 for done, row in steps[:-1])


async def test_a_live_actor_is_not_deleted_and_the_refusal_names_its_status(store_url, data):
    with trio.fail_after(20):
        async with callboard.open_runtime(
            data, kinds=[Diary], config=quiet(), store=store_url
        ) as rt:
            await tell(rt, "diary/d", "write", {"n": 0})
            with pytest.raises(callboard.BadRequest) as refused:
                await rt.delete("diary/d")
            kept = held(data, "diary/d", store_url)
    assert str(refused.value) == (
        "'diary/d' is active: only an actor that has ended (stopped, failed, or a task's or "
        "job's terminal) can be deleted; stop it first"
    )
    assert kept == {"actors": 1, "events": 2, "logs": 1, "mailbox": 0, "keys": 0, "timers": 1}


class Gate(callboard.Actor):
    """Virtual. ``hold`` waits in its handler until the test opens ``release``
    (``entered`` says it is there); anything else emits ``seen``."""

    kind = "gate"
    virtual = True
    entered: trio.Event
    release: trio.Event

    async def handle(self, ctx, message):
        if message.type == "hold":
            Gate.entered.set()
            await Gate.release.wait()
        else:
            ctx.emit("seen", {"seq": message.seq})


async def test_a_message_its_actor_ended_before_handling_is_told_not_handled(store_url, data):
    Gate.entered, Gate.release = trio.Event(), trio.Event()
    with trio.fail_after(20):
        async with callboard.open_runtime(
            data, kinds=[Gate], config=quiet(), store=store_url
        ) as rt:
            hold = await rt.send("gate/g", "hold")
            await Gate.entered.wait()
            head = await rt.head("gate/g")
            # Queued behind the batch being handled; the stop comes before it.
            later = await rt.send("gate/g", "later")
            rt._cells.cells["gate/g"].request_stop()
            outcomes: list[callboard.MessageOutcome] = []

            async def wait_for_later() -> None:
                outcomes.append(await rt.wait_outcome("gate/g", later.seq, head))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(wait_for_later)
                # Its wait is registered before its first read: the actor's end wakes it.
                await trio.testing.wait_all_tasks_blocked()
                Gate.release.set()
                status = await rt.stop("gate/g")
            (outcome,) = outcomes
            handled = await rt.wait_outcome("gate/g", hold.seq, head)
            with pytest.raises(callboard.ActorStopped) as stopped:
                await rt.wait_handled("gate/g", later.seq)
    assert status == "stopped"
    assert outcome == callboard.MessageOutcome(
        "not_handled", "gate/g ended (stopped) before it handled message 2"
    )
    assert handled == callboard.MessageOutcome("handled")
    assert str(stopped.value) == "gate/g ended (stopped) before it handled message 2"


async def test_requeueing_a_dead_letter_that_is_not_there_is_a_bad_request(store_url, data):
    with trio.fail_after(20):
        async with callboard.open_runtime(
            data, kinds=[Diary], config=quiet(), store=store_url
        ) as rt:
            with pytest.raises(callboard.BadRequest) as missing:
                await rt.requeue(41)
    assert str(missing.value) == "there is no dead letter with id 41; dead_letters lists them"
