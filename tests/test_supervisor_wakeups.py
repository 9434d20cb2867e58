"""The cell's small waits: `Wakeup` and `StepLock` behave as trio's Event-per-wait and Lock."""

from __future__ import annotations

import pytest
import trio
import trio.lowlevel
import trio.testing

from callboard.supervisor._wakeup import StepLock, Wakeup


async def test_the_lock_is_handed_to_waiters_in_the_order_they_asked():
    lock, order = StepLock(), []

    async def worker(name: str) -> None:
        async with lock:
            order.append(name)
            await trio.lowlevel.checkpoint()

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await lock.acquire()
            for name in "abc":
                nursery.start_soon(worker, name)
                await trio.testing.wait_all_tasks_blocked()
            assert order == []
            lock.release()
    assert order == ["a", "b", "c"]
    assert not lock.locked()


async def test_a_waiter_cancelled_before_its_turn_never_holds_the_lock():
    lock, got = StepLock(), []
    with trio.fail_after(5):
        await lock.acquire()
        async with trio.open_nursery() as nursery:

            async def waiter(name: str, scope: trio.CancelScope) -> None:
                with scope:
                    async with lock:
                        got.append(name)

            first, second = trio.CancelScope(), trio.CancelScope()
            nursery.start_soon(waiter, "first", first)
            nursery.start_soon(waiter, "second", second)
            await trio.testing.wait_all_tasks_blocked()
            first.cancel()
            await trio.testing.wait_all_tasks_blocked()
            lock.release()
    assert got == ["second"]
    assert not lock.locked()


async def test_acquire_is_a_cancel_point_and_the_lock_belongs_to_one_task():
    lock = StepLock()
    with trio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(trio.Cancelled):
            await lock.acquire()
    assert not lock.locked()
    lock.acquire_nowait()
    assert lock.owner is trio.lowlevel.current_task()
    with pytest.raises(trio.WouldBlock):
        lock.acquire_nowait()
    with pytest.raises(RuntimeError, match="already holds"):
        await lock.acquire()

    async def stranger() -> None:
        with pytest.raises(RuntimeError, match="released by the task that holds it"):
            lock.release()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(stranger)
    lock.release()
    assert lock.owner is None


async def test_a_wakeup_wakes_its_waiter_and_a_set_with_no_waiter_is_dropped():
    wakeup, woke = Wakeup(), []
    wakeup.set()  # nobody waits: dropped, as with a fresh Event per wait

    async def waiter() -> None:
        await wakeup.wait()
        woke.append(True)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            assert woke == []
            wakeup.set()
    assert woke == [True]
    with trio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(trio.Cancelled):
            await wakeup.wait()
    wakeup.set()  # the cancelled wait left no waiter behind
