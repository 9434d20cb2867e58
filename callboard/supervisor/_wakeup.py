"""`Wakeup`: one task's wait for "something changed", without an Event per wait.

A cell waits here whenever it is idle, and tens of thousands of idle cells
each held a `trio.Event` (its parking lot and ordered dict: about 500 bytes)
that was thrown away at the next wait. This parks the one waiting task
directly. As with a fresh Event per wait, a `set` while nobody waits is
dropped: the waiter looks at what changed before it waits again.
"""

from __future__ import annotations

import trio

__all__ = ["Wakeup"]


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
