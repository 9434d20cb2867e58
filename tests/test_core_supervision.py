"""Crashes, restarts with backoff, poison messages, dead letters and restart intensity."""

from __future__ import annotations

import random

import pytest
import trio
from core_kinds import Brittle, Counter

import callboard


class Flaky(callboard.Actor):
    """Fails every ``fail`` message while ``broken`` is set; records what it applied."""

    kind = "flaky"
    virtual = True
    broken = True
    supervision = callboard.Supervision(max_attempts=3, intensity=100, backoff_initial=0.001)

    async def handle(self, ctx, message):
        self.state.setdefault("applied", []).append(message.type)
        if message.type == "fail" and Flaky.broken:
            raise ValueError(f"cannot apply {message.body!r}")


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    return [
        leaf
        for exc in group.exceptions
        for leaf in (_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    ]


def _policy(on_intensity: str) -> callboard.Supervision:
    return callboard.Supervision(
        max_attempts=100, intensity=2, period=3600, on_intensity=on_intensity,
        backoff_initial=0.001,
    )  # fmt: skip


class StopsWhenHopeless(Flaky):
    kind = "hopeless"
    supervision = _policy("stop")


class DeadLettersWhenHopeless(Flaky):
    kind = "skipping"
    supervision = _policy("dead_letter")


class EscalatesWhenHopeless(Flaky):
    kind = "escalating"
    supervision = _policy("escalate")


KINDS = [Counter, Brittle, Flaky, StopsWhenHopeless, DeadLettersWhenHopeless, EscalatesWhenHopeless]


async def _events_until(rt, address: str, last_type: str, after: int = 0) -> list[callboard.Event]:
    out = []
    async with rt.subscribe(address, after=after) as events:
        async for event in events:
            out.append(event)
            if event.type == last_type:
                return out
    raise AssertionError("unreachable")


async def test_a_crashed_handler_restarts_from_the_last_snapshot_and_gets_the_message_again(
    store_url,
    tmp_path,
):
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            await rt.wait_handled("brittle/b", (await rt.send("brittle/b", "ok", 1)).seq)
            boom = await rt.send("brittle/b", "boom", 2)
            await rt.send("brittle/b", "ok", 3)
            await rt.wait_handled("brittle/b", 3)
            events = await _events_until(rt, "brittle/b", "message.dead_lettered")
            events += await _events_until(rt, "brittle/b", "handled", after=events[-1].seq)
            view = await rt.inspect("brittle/b")
    types = [e.type for e in events]
    assert types == [
        "actor.started", "handled",
        "actor.crashed", "actor.restarted",
        "actor.crashed", "actor.restarted",
        "actor.crashed", "actor.restarted",
        "message.dead_lettered", "handled",
    ]  # fmt: skip
    crashed = [e.data for e in events if e.type == "actor.crashed"]
    assert [c["error"] for c in crashed] == [
        f"RuntimeError: boom on attempt {n}" for n in (1, 2, 3)
    ]
    # The failed attempts' state changes are gone: only committed work remains.
    assert view.state["handled"] == ["ok:1", "ok:3"]
    assert events[-2].data["seq"] == boom.seq
    assert view.restarts == 3


def test_restart_backoff_grows_exponentially_is_capped_and_jittered():
    policy = callboard.Supervision(backoff_initial=0.1, backoff_max=1.0, backoff_jitter=0.2)
    rng = random.Random(7)
    delays = [policy.backoff(n, rng) for n in range(1, 8)]
    for n, delay in enumerate(delays, start=1):
        base = min(1.0, 0.1 * 2 ** (n - 1))
        assert base * 0.8 <= delay <= min(1.0, base * 1.2)
    assert delays[-1] <= 1.0 and delays[0] < delays[1] < delays[2] < delays[3]
    assert len({round(policy.backoff(3, random.Random(s)), 6) for s in range(10)}) > 1


async def test_a_poison_message_is_dead_lettered_with_its_traceback_and_can_be_requeued(
    store_url, tmp_path
):
    Flaky.broken = True
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            await rt.send("flaky/f", "fail", {"x": 1})
            after = await rt.send("flaky/f", "next")
            await rt.wait_handled("flaky/f", after.seq)
            [dead] = await rt.dead_letters()
            assert await rt.dead_letters("counter/none") == []
            Flaky.broken = False
            requeued = await rt.requeue(dead.id)
            await rt.wait_handled("flaky/f", requeued.seq)
            view = await rt.inspect("flaky/f")
            remaining = await rt.dead_letters()
    assert (dead.actor, dead.seq, dead.type, dead.body, dead.attempts) == (
        "flaky/f", 1, "fail", {"x": 1}, 3,
    )  # fmt: skip
    assert dead.error.type == "ValueError"
    assert dead.error.message == "cannot apply {'x': 1}"
    assert 'raise ValueError(f"cannot apply' in dead.error.traceback
    assert requeued == callboard.Ack(3)
    assert view.state["applied"] == ["next", "fail"]
    assert remaining == []


async def test_too_many_restarts_with_the_stop_policy_marks_the_actor_failed(store_url, tmp_path):
    Flaky.broken = True
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            await rt.send("hopeless/h", "fail")
            events = await _events_until(rt, "hopeless/h", "actor.failed")
            view = await rt.inspect("hopeless/h")
            with pytest.raises(callboard.ActorStopped):
                await rt.send("hopeless/h", "more")
    assert [e.type for e in events].count("actor.crashed") == 2
    assert events[-1].data == {"error": "ValueError: cannot apply None"}
    assert (view.status, view.mailbox, view.last_error["type"]) == ("failed", 1, "ValueError")


async def test_too_many_restarts_with_the_dead_letter_policy_sets_the_message_aside(
    store_url, tmp_path
):
    Flaky.broken = True
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            await rt.send("skipping/s", "fail")
            after = await rt.send("skipping/s", "next")
            await rt.wait_handled("skipping/s", after.seq)
            [dead] = await rt.dead_letters("skipping/s")
            view = await rt.inspect("skipping/s")
    assert (dead.seq, dead.attempts) == (1, 3)
    assert view.state == {"applied": ["next"]} and view.status == "active"


async def test_too_many_restarts_with_the_escalate_policy_raises_out_of_the_runtime(
    store_url, tmp_path
):
    Flaky.broken = True
    with trio.fail_after(10):
        with pytest.RaisesGroup(callboard.Escalation, flatten_subgroups=True) as caught:
            async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
                await rt.send("escalating/e", "fail")
                await trio.sleep_forever()
    [escalation] = _leaves(caught.value)
    assert str(escalation).startswith("escalating/e restarted more than 2 times in 3600")
    assert escalation.reason.type == "ValueError"
