"""An idle actor rests (in memory with no task) and goes on from memory.

After ``rest_after`` idle it lets its task go; a message, a stop, the
passivation sweep or a crash then behave as for an actor that never rested,
and nothing is read back from the store for the message that wakes it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import trio
import trio.testing
from core_kinds import Brittle, Counter

import callboard
from callboard.supervisor._states import CellState


class Tidy(callboard.Actor):
    """Counts, and says so when it is stopped."""

    kind = "tidy"
    virtual = True

    async def handle(self, ctx: callboard.Context, message: callboard.Message) -> None:
        self.state["n"] = self.state.get("n", 0) + 1

    async def on_stop(self, ctx: callboard.Context) -> None:
        ctx.emit("tidied", {"n": self.state.get("n", 0)})


KINDS = [Counter, Brittle, Tidy]
RESTFUL = callboard.RuntimeConfig(rest_after=0.01, passivate_after=3600.0)


async def _until(condition: Callable[[], bool]) -> None:
    # Resting commits nothing and announces nothing, so there is no event to
    # wait on: the test looks again until it holds (its fail_after bounds it).
    # Nothing here depends on how long that takes.
    while not condition():  # noqa: ASYNC110
        await trio.sleep(0.005)


async def _types_until(events: callboard.Subscription, last: str) -> list[str]:
    types = []
    async for event in events:
        types.append(event.type)
        if event.type == last:
            return types
    raise AssertionError(f"the stream ended before {last!r}: {types}")


async def test_an_idle_actor_rests_and_its_next_message_goes_on_from_memory(tmp_path, store_url):
    with trio.fail_after(20):
        async with callboard.open_runtime(
            tmp_path, kinds=KINDS, config=RESTFUL, store=store_url
        ) as rt:
            async with rt.subscribe("counter/r", after=0) as events:
                await rt.send("counter/r", "add", {"n": 5, "id": "m1"})
                first = await _types_until(events, "counted")
                await _until(lambda: rt.statistics().resting == 1)
                resting = rt.statistics()
                await rt.send("counter/r", "add", {"n": 1, "id": "m2"})
                after = await _types_until(events, "counted")
                view = await rt.inspect("counter/r")
                awake = rt.statistics()
    assert first == ["actor.started", "counted"]
    assert (resting.active, resting.rests, resting.activations) == (1, 1, 1)
    # Woken from memory: no new activation, no actor.started, the state goes on.
    assert after == ["counted"]
    assert (awake.resting, awake.activations) == (0, 1)
    assert view.state["total"] == 6 and view.state["seen"] == ["m1", "m2"]


async def test_a_resting_actor_passivates_when_its_time_comes(tmp_path, store_url):
    config = callboard.RuntimeConfig(rest_after=0.01, passivate_after=0.2)
    with trio.fail_after(20):
        async with callboard.open_runtime(
            tmp_path, kinds=KINDS, config=config, store=store_url
        ) as rt:
            async with rt.subscribe("counter/p", after=0) as events:
                await rt.send("counter/p", "add", {"n": 2, "id": "m1"})
                types = await _types_until(events, "actor.passivated")
                stats = rt.statistics()
            await rt.send("counter/p", "add", {"n": 3, "id": "m2"})
            await rt.wait_handled("counter/p", 2)
            view = await rt.inspect("counter/p")
    assert types == ["actor.started", "counted", "actor.passivated"]
    assert stats.rests >= 1 and stats.passivations == 1 and stats.active == 0
    assert view.state["total"] == 5


async def test_a_resting_actor_is_stopped_with_its_on_stop(tmp_path, store_url):
    with trio.fail_after(20):
        async with callboard.open_runtime(
            tmp_path, kinds=KINDS, config=RESTFUL, store=store_url
        ) as rt:
            async with rt.subscribe("tidy/t", after=0) as events:
                await rt.send("tidy/t", "add")
                await rt.wait_handled("tidy/t", 1)
                await _until(lambda: rt.statistics().resting == 1)
                status = await rt.stop("tidy/t")
                types = await _types_until(events, "actor.stopped")
    assert status == "stopped"
    assert types == ["actor.started", "tidied", "actor.stopped"]


async def test_a_crash_after_resting_restarts_from_the_last_commit(tmp_path, store_url):
    with trio.fail_after(20):
        async with callboard.open_runtime(
            tmp_path, kinds=KINDS, config=RESTFUL, store=store_url
        ) as rt:
            async with rt.subscribe("brittle/b", after=0) as events:
                await rt.send("brittle/b", "ok", {"n": 1})
                first = await _types_until(events, "handled")
                await _until(lambda: rt.statistics().resting == 1)
                await rt.send("brittle/b", "boom", {"n": 2})
                await rt.send("brittle/b", "ok", {"n": 3})
                later = await _types_until(events, "actor.restarted")
                await rt.wait_handled("brittle/b", 3)
                view = await rt.inspect("brittle/b")
                dead = await rt.dead_letters("brittle/b")
    assert first == ["actor.started", "handled"]
    assert later == ["actor.crashed", "actor.restarted"]
    # Each attempt of boom started from the committed state and lost what it
    # did; after its last it went to the dead letters, and the next was handled.
    assert view.state["handled"] == ["ok:{'n': 1}", "ok:{'n': 3}"]
    assert [(d.seq, d.type, d.attempts) for d in dead] == [(2, "boom", 3)]


async def test_closing_with_resting_actors_keeps_everything_they_committed(tmp_path, store_url):
    with trio.fail_after(20):
        async with callboard.open_runtime(
            tmp_path, kinds=KINDS, config=RESTFUL, store=store_url
        ) as rt:
            for n in range(5):
                await rt.send(f"counter/c{n}", "add", {"n": n, "id": f"m{n}"})
            for n in range(5):
                await rt.wait_handled(f"counter/c{n}", 1)
            await _until(lambda: rt.statistics().resting == 5)
        async with callboard.open_runtime(
            tmp_path, kinds=KINDS, config=RESTFUL, store=store_url
        ) as rt:
            totals = [(await rt.inspect(f"counter/c{n}")).state["total"] for n in range(5)]
            await rt.send("counter/c0", "add", {"n": 10, "id": "again"})
            await rt.wait_handled("counter/c0", 2)
            again = (await rt.inspect("counter/c0")).state["total"]
    assert totals == [0, 1, 2, 3, 4]
    assert again == 10


async def _idle_cell(rt: callboard.Runtime, address: str):
    """``address`` active and idle, its task parked (the cell is the runtime's own)."""
    await rt.send(address, "add", {"n": 1, "id": "first"})
    await rt.wait_handled(address, 1)
    await trio.testing.wait_all_tasks_blocked()
    cell = rt._cells.cells[address]
    assert cell.state is CellState.IDLE
    return cell


async def _rest_as_work_comes(cell, arrive: Callable[[], None]) -> None:
    """The sweeper asks ``cell`` to rest and ``arrive`` comes in the next pass of
    the scheduler: in about half the passes the task has by then decided to
    rest and taken its last schedule point, so the wake-up finds no one."""
    cell.request_rest()
    await trio.lowlevel.checkpoint()
    arrive()
    await trio.testing.wait_all_tasks_blocked()
    assert cell.state is not CellState.RESTING, "the work was left with a resting cell"


async def test_work_that_comes_as_the_task_lets_go_is_not_left_with_the_resting_cell(
    tmp_path, store_url
):
    # Each kind of work 16 times: both orders of the scheduler's pass come up.
    config = callboard.RuntimeConfig(rest_after=3600.0, passivate_after=7200.0)
    with trio.fail_after(30):
        async with callboard.open_runtime(
            tmp_path, kinds=KINDS, config=config, store=store_url
        ) as rt:
            for n in range(16):
                # A message: made durable, then handed to the cell as a send does.
                address = f"counter/m{n}"
                cell = await _idle_cell(rt, address)
                item = rt._message(Counter, address, "add", {"n": 2, "id": "second"}, None, None)
                (stored,) = await rt._store.enqueue([item])
                await _rest_as_work_comes(cell, functools.partial(rt._accepted, item, stored))
                await rt.wait_handled(address, stored.seq)
                assert (await rt.inspect(address)).state["total"] == 3
                # A stop: its on_stop runs and the actor ends.
                cell = await _idle_cell(rt, f"tidy/s{n}")
                await _rest_as_work_comes(cell, cell.request_stop)
                await cell.done.wait()
                assert cell.final_status == "stopped"
                # The passivation sweep's request: the cell is forgotten.
                address = f"counter/p{n}"
                cell = await _idle_cell(rt, address)
                await _rest_as_work_comes(cell, cell.request_passivation)
                await cell.done.wait()
                assert address not in rt._cells.cells
            stats = rt.statistics()
    assert stats.passivations == 16 and stats.resting == 0
