"""The fast lane: actors whose handler never suspends are stepped without their task.

What it must keep is what the task's own steps keep: every message handled
once and in order, committed before anyone hears of it; an activity's
checkpoint never interleaved with a step; a crash in a handler supervised
as ever; and a restart on the same data finding all of it.
"""

from __future__ import annotations

import collections
import functools

import attrs
import trio
import trio.lowlevel

import callboard
from callboard.supervisor._lane import never_suspends


class _Steps(trio.abc.Instrument):
    def __init__(self) -> None:
        self.by_name: collections.Counter[str] = collections.Counter()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.by_name[task.name] += 1


@attrs.define
class Tally:
    total: int = 0
    seen: list[int] = attrs.Factory(list)
    ticks: int = 0
    ticks_to: int = 0  # what the activity was asked for: resumed after a restart


class Adder(callboard.Actor):
    """No await in ``handle``: the lane's kind. ``tick`` starts an activity that
    checkpoints its own changes, while messages keep coming."""

    kind = "adder"
    state_type = Tally
    virtual = True

    async def on_start(self, ctx: callboard.Context) -> None:
        # As an activity must: a restart after its first checkpoint replays no
        # ``tick`` (the checkpoint committed it), so what it left undone resumes here.
        if self.state.ticks < self.state.ticks_to:
            ctx.start_activity(self._ticks, ctx, self.state.ticks_to, name="ticks")

    async def handle(self, ctx: callboard.Context, message: callboard.Message) -> None:
        if message.type == "tick":
            self.state.ticks_to = max(self.state.ticks_to, message.body["n"])
            ctx.start_activity(self._ticks, ctx, self.state.ticks_to, name="ticks")
            return
        if message.type == "boom" and message.attempt == 1:
            raise RuntimeError("boom on its first attempt")
        self.state.total += message.body["n"]
        self.state.seen.append(message.seq)
        ctx.emit("added", {"total": self.state.total})

    async def _ticks(self, ctx: callboard.Context, n: int) -> None:
        while self.state.ticks < n:
            self.state.ticks += 1
            await ctx.checkpoint()
        ctx.emit("ticked", {"ticks": self.state.ticks})
        await ctx.checkpoint()


class Waiter(Adder):
    """The same, with an await in ``handle``: its task steps it, as before."""

    kind = "waiter"

    async def handle(self, ctx: callboard.Context, message: callboard.Message) -> None:
        await trio.lowlevel.checkpoint()
        await super().handle(ctx, message)


def test_a_handler_is_in_the_lane_only_when_its_code_has_no_await():
    async def plain(self, ctx, message):
        return None

    async def awaits(self, ctx, message):
        await trio.lowlevel.checkpoint()

    async def iterates(self, ctx, message):
        async for _ in message.body:
            pass

    async def enters(self, ctx, message):
        async with message.body:
            pass

    def not_a_coroutine(self, ctx, message):
        return message.body  # an awaitable, made elsewhere

    assert never_suspends(plain)
    assert never_suspends(Adder.handle)
    for suspending in (awaits, iterates, enters, not_a_coroutine, Waiter.handle):
        assert not never_suspends(suspending), suspending
    # A wrapper that awaits what it wraps suspends, whatever the wrapped one does.
    assert not never_suspends(functools.wraps(plain)(awaits))


async def test_the_lane_steps_the_actor_and_its_task_sleeps_through_the_messages(tmp_path):
    steps = _Steps()
    trio.lowlevel.add_instrument(steps)
    grew = {}
    try:
        with trio.fail_after(30):
            async with callboard.open_runtime(tmp_path, kinds=[Adder, Waiter]) as rt:
                for kind in ("adder", "waiter"):
                    address = f"{kind}/a"
                    # Started and idle first: what its start costs varies.
                    await rt.wait_handled(address, (await rt.send(address, "add", {"n": 1})).seq)
                    before = steps.by_name[f"actor {address}"]
                    for _ in range(100):
                        ack = await rt.send(address, "add", {"n": 1})
                    await rt.wait_handled(address, ack.seq)
                    grew[kind] = steps.by_name[f"actor {address}"] - before
                    assert (await rt.inspect(address)).state["total"] == 101
    finally:
        trio.lowlevel.remove_instrument(steps)
    # The lane's actor: its task slept through the 100 messages; the other's
    # task was stepped for every one of them.
    assert grew["adder"] <= 2, (grew, steps.by_name)
    assert grew["waiter"] >= 100, (grew, steps.by_name)
    assert steps.by_name["lane"] >= 100


async def test_many_senders_an_activity_that_checkpoints_and_a_crash_lose_nothing(tmp_path):
    senders, each = 16, 40
    with trio.fail_after(60):
        async with callboard.open_runtime(tmp_path, kinds=[Adder]) as rt:
            await rt.send("adder/x", "tick", {"n": 30})
            boom = await rt.send("adder/x", "boom", {"n": 1000})

            async def sender() -> None:
                for _ in range(each):
                    await rt.send("adder/x", "add", {"n": 1})

            async with trio.open_nursery() as nursery:
                for _ in range(senders):
                    nursery.start_soon(sender)
            last = await rt.send("adder/x", "add", {"n": 1})
            await rt.wait_handled("adder/x", last.seq)
            async with rt.subscribe("adder/x", after=0) as events:
                types, total = [], 0
                async for event in events:
                    types.append(event.type)
                    if event.type == "added":
                        total = event.data["total"]
                    # Until every message is handled and the activity is done.
                    if total == 1000 + senders * each + 1 and "ticked" in types:
                        break
            view = await rt.inspect("adder/x")
        async with callboard.open_runtime(tmp_path, kinds=[Adder]) as rt:
            again = await rt.inspect("adder/x")
    state = view.state
    # Every message once, in seq order; the crash retried the boom message.
    assert state["total"] == 1000 + senders * each + 1
    assert state["seen"] == sorted(state["seen"])
    assert len(state["seen"]) == len(set(state["seen"])) == senders * each + 2
    assert boom.seq in state["seen"]
    assert "actor.restarted" in types
    assert state["ticks"] >= 30  # the activity ran to its end after the restart
    assert again.state == state
    assert view.restarts == 1


async def test_a_close_while_the_lane_commits_loses_no_acknowledged_message(tmp_path):
    acked: dict[str, list[int]] = collections.defaultdict(list)
    enough = trio.Event()
    with trio.fail_after(60):
        async with callboard.open_runtime(tmp_path, kinds=[Adder]) as rt:

            async def sender(address: str) -> None:
                while True:
                    ack = await rt.send(address, "add", {"n": 1})
                    acked[address].append(ack.seq)
                    if sum(map(len, acked.values())) >= 400:
                        enough.set()

            async with trio.open_nursery() as nursery:
                for i in range(8):
                    nursery.start_soon(sender, f"adder/c{i}")
                await enough.wait()
                nursery.cancel_scope.cancel()
        # Closed with handling in flight: the next start handles what was left.
        async with callboard.open_runtime(tmp_path, kinds=[Adder]) as rt:
            for address, seqs in acked.items():
                await rt.wait_handled(address, max(seqs))
                state = (await rt.inspect(address)).state
                # A send once queued completes, so what was stored is what was acked.
                assert state["seen"] == sorted(seqs), address
                assert state["total"] == len(seqs)


async def test_the_reply_to_a_send_leaves_before_the_lane_handles_it(tmp_path):
    """A server answers a send (`send_nowait`) from its commit's callback by
    waking its connection's writer, whose websocket send takes a pass of the
    scheduler of its own (trio-websocket's send lock). The lane waits two
    passes before it handles what that commit delivered, so the reply goes
    out first: the client waits for it, and no one waits for the handling."""
    order: list[tuple[str, int]] = []

    class Recorder(callboard.Actor):
        kind = "recorder"
        virtual = True

        async def handle(self, ctx: callboard.Context, message: callboard.Message) -> None:
            order.append(("handled", message.seq))

    steps = _Steps()
    with trio.fail_after(30):
        async with callboard.open_runtime(tmp_path, kinds=[Recorder]) as rt:
            address = "recorder/one"
            await rt.wait_handled(address, (await rt.send(address, "ping")).seq)
            trio.lowlevel.add_instrument(steps)
            try:
                for _ in range(30):
                    told, hear = trio.open_memory_channel[callboard.Ack | Exception](1)
                    assert rt.send_nowait(address, "ping", then=told.send_nowait)
                    ack = await hear.receive()  # woken by the commit's callback
                    assert isinstance(ack, callboard.Ack)
                    await trio.lowlevel.cancel_shielded_checkpoint()  # the send lock's pass
                    order.append(("replied", ack.seq))
                    await rt.wait_handled(address, ack.seq)
            finally:
                trio.lowlevel.remove_instrument(steps)
    replies = [seq for what, seq in order if what == "replied"]
    assert len(replies) == 30
    for seq in replies:
        assert order.index(("replied", seq)) < order.index(("handled", seq)), order
    # What the order costs: the wake-up and its two passes, three lane steps a message.
    assert 30 <= steps.by_name["lane"] <= 3 * 30 + 5, steps.by_name


async def test_a_hot_actors_messages_from_many_senders_are_stepped_in_batches(tmp_path):
    """The lane steps a cell as soon as a delivery asks it to now; the
    messages that come meanwhile from other senders still make batches."""
    senders = 32
    with trio.fail_after(60):
        async with callboard.open_runtime(tmp_path, kinds=[Adder]) as rt:
            address = "adder/hot"
            await rt.wait_handled(address, (await rt.send(address, "add", {"n": 1})).seq)
            steps = _Steps()
            trio.lowlevel.add_instrument(steps)
            try:

                async def sender() -> None:
                    for _ in range(20):
                        await rt.send(address, "add", {"n": 1})

                async with trio.open_nursery() as nursery:
                    for _ in range(senders):
                        nursery.start_soon(sender)
                last = await rt.send(address, "add", {"n": 1})
                await rt.wait_handled(address, last.seq)
            finally:
                trio.lowlevel.remove_instrument(steps)
            state = (await rt.inspect(address)).state
    assert state["total"] == 1 + senders * 20 + 1
    assert state["seen"] == sorted(state["seen"])
    # 641 messages in far fewer lane steps: they were taken in batches.
    assert steps.by_name["lane"] * 4 <= senders * 20, steps.by_name
