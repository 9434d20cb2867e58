"""Attempts are counted exactly without a store write before each batch.

A message's first attempt is charged when it is stored; a retry is marked
before it starts; a crashed batch is counted in the crash's commit; and a
life that ended (a close or a death) leaves only the rows within one batch of
the cursor counted as maybe attempted (see `callboard.supervisor._inbox`).
"""

from __future__ import annotations

import attrs
import trio

import callboard

ONCE = callboard.Supervision(max_attempts=1, intensity=100, backoff_initial=0.001)


@attrs.define
class Seen:
    attempts: list[list[int]] = attrs.Factory(list)


class Once(callboard.Actor):
    """At most one attempt per message; ``hold`` blocks until the runtime closes."""

    kind = "once"
    virtual = True
    state_type = Seen
    supervision = ONCE
    held = trio.Event()
    gate = trio.Event()

    async def handle(self, ctx: callboard.Context, message: callboard.Message) -> None:
        self.state.attempts.append([message.body["n"], message.attempt])
        if message.type == "hold":
            Once.held.set()
            await trio.sleep_forever()
        if message.type == "wait":
            Once.held.set()
            await Once.gate.wait()
        if message.type == "boom":
            raise RuntimeError("boom")


def _config(batch_max: int) -> callboard.RuntimeConfig:
    return callboard.RuntimeConfig(batch_max=batch_max)


async def test_a_message_stored_in_this_life_is_a_first_attempt_after_a_restart(
    store_url, tmp_path
):
    data = tmp_path / "data"
    with trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=[Once], store=store_url) as rt:
            ack = await rt.send("once/a", "add", {"n": 1})
            await rt.wait_handled("once/a", ack.seq)
        async with callboard.open_runtime(data, kinds=[Once], store=store_url) as rt:
            ack = await rt.send("once/a", "add", {"n": 2})
            await rt.wait_handled("once/a", ack.seq)
            view = await rt.inspect("once/a")
            assert await rt.dead_letters() == []
    assert view.state["attempts"] == [[1, 1], [2, 1]]


async def test_a_life_that_ends_mid_batch_counts_only_the_batch_window(store_url, tmp_path):
    data = tmp_path / "data"
    Once.held = trio.Event()
    with trio.fail_after(30):
        async with callboard.open_runtime(
            data, kinds=[Once], config=_config(2), store=store_url
        ) as rt:
            await rt.send("once/a", "hold", {"n": 1})
            await Once.held.wait()
            for n in range(2, 6):
                await rt.send("once/a", "add", {"n": n})
        # The held message and the next one are within a batch of the cursor:
        # either may have been running when the life ended, so each counts as
        # attempted once, and with max_attempts=1 goes to the dead letters.
        # The three further on cannot have started: each is a first attempt.
        async with callboard.open_runtime(
            data, kinds=[Once], config=_config(2), store=store_url
        ) as rt:
            await rt.wait_handled("once/a", 5)
            view = await rt.inspect("once/a")
            dead = await rt.dead_letters("once/a")
    assert [(d.seq, d.attempts, d.error.type) for d in dead] == [
        (1, 1, "ProcessDied"),
        (2, 1, "ProcessDied"),
    ]
    assert view.state["attempts"] == [[3, 1], [4, 1], [5, 1]]


async def test_a_crashed_batch_counts_an_attempt_for_every_message_in_it(store_url, tmp_path):
    # Handled in one batch, a crash cannot tell which message caused it: each
    # has had its one attempt (as if the batch had been marked before it
    # started), and none runs again.
    data = tmp_path / "data"
    Once.held, Once.gate = trio.Event(), trio.Event()
    with trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=[Once], store=store_url) as rt:
            await rt.send("once/b", "wait", {"n": 0})
            await Once.held.wait()
            for n, type_ in ((1, "add"), (2, "boom"), (3, "add")):
                await rt.send("once/b", type_, {"n": n})
            Once.gate.set()  # the three wait in the inbox: one batch
            await rt.wait_handled("once/b", 4)
            dead = await rt.dead_letters("once/b")
            view = await rt.inspect("once/b")
    assert [(d.seq, d.attempts, d.error.type) for d in dead] == [
        (2, 1, "ProcessDied"),
        (3, 1, "RuntimeError"),
        (4, 1, "ProcessDied"),
    ]
    assert view.state["attempts"] == [[0, 1]]
