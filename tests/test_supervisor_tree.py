"""Supervised groups: OTP's strategies, restart types and intensity, on trio's mock clock."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import callboard
from callboard.supervisor import Backoff, ChildSpec, supervise


class Worker:
    """A child that records each start and stop, and crashes or returns when told to."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log
        self._wake = trio.Event()
        self._action = ""

    def crash(self) -> None:
        self._action = "crash"
        self._wake.set()

    def finish(self) -> None:
        self._action = "finish"
        self._wake.set()

    async def run(self) -> None:
        self.log.append(f"start {self.name}")
        try:
            await self._wake.wait()
        except trio.Cancelled:
            self.log.append(f"stop {self.name}")
            raise
        self._wake = trio.Event()
        if self._action == "crash":
            raise RuntimeError(f"{self.name} crashed")


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    return [
        leaf
        for exc in group.exceptions
        for leaf in (_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    ]


async def _after_b_crashes(strategy: str) -> list[str]:
    """What the group did, in order, when child b of a, b, c crashed."""
    log: list[str] = []
    workers = {n: Worker(n, log) for n in "abc"}
    children = [ChildSpec(n, w.run) for n, w in workers.items()]
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: supervise(children, strategy=strategy, intensity=5))
            await trio.testing.wait_all_tasks_blocked()
            before = len(log)
            workers["b"].crash()
            await trio.testing.wait_all_tasks_blocked()
            after = log[before:]
            nursery.cancel_scope.cancel()
    return after


async def test_one_for_one_restarts_only_the_child_that_crashed(autojump_clock):
    assert await _after_b_crashes("one_for_one") == ["start b"]


async def test_one_for_all_stops_the_others_right_to_left_and_restarts_all_left_to_right(
    autojump_clock,
):
    assert await _after_b_crashes("one_for_all") == [
        "stop c", "stop a", "start a", "start b", "start c",
    ]  # fmt: skip


async def test_rest_for_one_restarts_the_crashed_child_and_those_started_after_it(autojump_clock):
    assert await _after_b_crashes("rest_for_one") == ["stop c", "start b", "start c"]


async def test_more_restarts_than_the_intensity_allows_escalates_to_the_parent(autojump_clock):
    log: list[str] = []
    worker = Worker("a", log)
    with trio.fail_after(60):
        with pytest.RaisesGroup(callboard.Escalation, flatten_subgroups=True) as caught:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    lambda: supervise([ChildSpec("a", worker.run)], intensity=2, period=10)
                )
                for _ in range(3):
                    await trio.testing.wait_all_tasks_blocked()
                    worker.crash()
                await trio.sleep_forever()
    [escalation] = _leaves(caught.value)
    assert str(escalation) == (
        "child 'a' restarted more than 2 times in 10s (one_for_one); "
        "giving up: RuntimeError: a crashed"
    )
    assert log == ["start a", "start a", "start a"]


async def test_restarts_spread_beyond_the_period_do_not_escalate(autojump_clock):
    log: list[str] = []
    worker = Worker("a", log)
    with trio.fail_after(600):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: supervise([ChildSpec("a", worker.run)], intensity=1, period=10)
            )
            for _ in range(4):
                await trio.testing.wait_all_tasks_blocked()
                worker.crash()
                await trio.testing.wait_all_tasks_blocked()
                await trio.sleep(11)
            nursery.cancel_scope.cancel()
    assert log.count("start a") == 5


async def test_restart_types_decide_whether_a_child_comes_back(autojump_clock):
    log: list[str] = []
    permanent, transient, temporary = (Worker(n, log) for n in ("perm", "trans", "temp"))
    children = [
        ChildSpec("perm", permanent.run, restart="permanent"),
        ChildSpec("trans", transient.run, restart="transient"),
        ChildSpec("temp", temporary.run, restart="temporary"),
    ]
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: supervise(children, intensity=10))
            await trio.testing.wait_all_tasks_blocked()
            for worker in (permanent, transient, temporary):
                worker.crash()
            await trio.testing.wait_all_tasks_blocked()
            transient.finish()  # a normal exit: a transient child stays down
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    starts = [line for line in log if line.startswith("start")]
    assert sorted(starts) == sorted(
        ["start perm", "start trans", "start temp", "start perm", "start trans"]
    )


@pytest.mark.parametrize(
    ("backoff", "starts"),
    [
        (Backoff(initial=1.0, max=3.0, jitter=0.0), [0.0, 1.0, 3.0, 6.0]),
        (lambda n: 0.5 * n, [0.0, 0.5, 1.5, 3.0]),
    ],
)
async def test_a_backoff_spaces_the_restarts_out(autojump_clock, backoff, starts):
    begin = trio.current_time()
    seen: list[float] = []

    async def crash_three_times() -> None:
        seen.append(trio.current_time() - begin)
        if len(seen) <= 3:
            raise RuntimeError("not yet")
        await trio.sleep_forever()

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: supervise(
                    [ChildSpec("a", crash_three_times)], intensity=10, period=100, backoff=backoff
                )
            )
            await trio.sleep(30)
            nursery.cancel_scope.cancel()
    assert seen == pytest.approx(starts)
