"""`Wakeup` and `StepLock`: a cell's two waits, made small.

`Wakeup` is one task's wait for "something changed", without an Event per wait.

A cell waits here whenever it is idle, and tens of thousands of idle cells
each held a `trio.Event` (its parking lot and ordered dict: about 500 bytes)
that was thrown away at the next wait. This parks the one waiting task
directly. As with a fresh Event per wait, a `set` while nobody waits is
dropped: the waiter looks at what changed before it waits again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import trio

__all__ = ["StepLock", "Wakeup"]

_HELD: Any = object()


class Wakeup:
    __slots__ = ("_task",)

    def __init__(self) -> None:
        self._task: trio.lowlevel.Task | None = None

    def set(self) -> None:
        """Wake the task that waits, if one does."""
        task, self._task = self._task, None
        if task is not None:
            trio.lowlevel.reschedule(task)

    @property
    def waiting(self) -> bool:
        """A task waits here (and no `set` has woken it yet)."""
        return self._task is not None

    async def wait(self, held: Callable[[], bool] | None = None) -> None:
        """Until the next `set`: a cancel point, unless ``held`` says True when
        the cancel comes; then the wait goes on until a `set`, and the cancel
        is delivered at the task's next cancel point (work done on the task's
        behalf, a commit in flight, must be told to it first)."""
        if self._task is not None:
            raise RuntimeError("another task already waits on this Wakeup")
        self._task = trio.lowlevel.current_task()

        def abort(_: object) -> trio.lowlevel.Abort:
            if held is not None and held():
                return trio.lowlevel.Abort.FAILED
            self._task = None
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)


class StepLock:
    """The cell's lock: a step (handlers, then their commit) and an activity's
    checkpoint commit one at a time, in the order they asked.

    It is `trio.Lock`'s behaviour (a cancel point, and a schedule point, on
    `acquire`; ownership handed to the first waiter on `release`) without its
    parking lot and ordered dict, which cost about 350 bytes per active actor
    for a lock that is contended only while an activity checkpoints.
    """

    __slots__ = ("_owner", "_waiters")

    def __init__(self) -> None:
        self._owner: trio.lowlevel.Task | None = None  # or _HELD
        self._waiters: deque[trio.lowlevel.Task] | None = None  # made when contended

    @property
    def owner(self) -> trio.lowlevel.Task | None:
        return self._owner

    def locked(self) -> bool:
        return self._owner is not None

    @property
    def held(self) -> bool:
        """Held by a step that no task runs (see `hold`)."""
        return self._owner is _HELD

    def acquire_nowait(self) -> None:
        if self._owner is not None or self._waiters:
            raise trio.WouldBlock
        self._owner = trio.lowlevel.current_task()

    async def acquire(self) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            self.acquire_nowait()
        except trio.WouldBlock:
            task = trio.lowlevel.current_task()
            if task is self._owner:
                raise RuntimeError("this task already holds the StepLock") from None
            if self._waiters is None:
                self._waiters = deque()
            waiters = self._waiters
            waiters.append(task)

            def abort(_: object) -> trio.lowlevel.Abort:
                waiters.remove(task)
                return trio.lowlevel.Abort.SUCCEEDED

            await trio.lowlevel.wait_task_rescheduled(abort)  # `release` made us the owner
        else:
            await trio.lowlevel.cancel_shielded_checkpoint()

    def release(self) -> None:
        if self._owner is not trio.lowlevel.current_task():
            raise RuntimeError("a StepLock is released by the task that holds it")
        self._hand_on()

    def _hand_on(self) -> None:
        if self._waiters:
            self._owner = self._waiters.popleft()
            trio.lowlevel.reschedule(self._owner)
        else:
            self._owner = None

    # A step run by no task (a cell's fast lane: see `_lane`) holds the lock
    # under this owner, so a checkpoint waits for it as for a task's step.
    def hold(self) -> None:
        """Take the free lock for a step that no task runs."""
        if self._owner is not None or self._waiters:
            raise RuntimeError("a StepLock is held only when free")
        self._owner = _HELD

    def release_held(self) -> None:
        """End the step that `hold` began: the first waiter owns the lock now."""
        if self._owner is not _HELD:
            raise RuntimeError("the StepLock is not held by a step without a task")
        self._hand_on()

    def take_held(self) -> None:
        """The current task goes on with the step that `hold` began (it releases it)."""
        if self._owner is not _HELD:
            raise RuntimeError("the StepLock is not held by a step without a task")
        self._owner = trio.lowlevel.current_task()

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()
