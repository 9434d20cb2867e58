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

import trio

__all__ = ["StepLock", "Wakeup"]


class Wakeup:
    __slots__ = ("_task",)

    def __init__(self) -> None:
        self._task: trio.lowlevel.Task | None = None

    def set(self) -> None:
        """Wake the task that waits, if one does."""
        task, self._task = self._task, None
        if task is not None:
            trio.lowlevel.reschedule(task)

    async def wait(self) -> None:
        """Until the next `set` (a cancel point: cancelling the wait is safe)."""
        if self._task is not None:
            raise RuntimeError("another task already waits on this Wakeup")
        self._task = trio.lowlevel.current_task()
        await trio.lowlevel.wait_task_rescheduled(self._abort)

    def _abort(self, _: object) -> trio.lowlevel.Abort:
        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED


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
        self._owner: trio.lowlevel.Task | None = None
        self._waiters: deque[trio.lowlevel.Task] | None = None  # made when contended

    @property
    def owner(self) -> trio.lowlevel.Task | None:
        return self._owner

    def locked(self) -> bool:
        return self._owner is not None

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
        if self._waiters:
            self._owner = self._waiters.popleft()
            trio.lowlevel.reschedule(self._owner)
        else:
            self._owner = None

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()
