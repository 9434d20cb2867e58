"""`GroupCommits`: when the writer's group commit in progress is done.

A cell with one message to handle waits for the group commit being written
(or queued) before it handles it: the messages of the same actor that
commit carries then join the batch, and one commit of the actor covers
them all. With many senders that halves the commits of an actor, the
costliest write of a message (about a sixth of its CPU), for one group
commit of delay in handling; the sender's ack does not wait for it.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

__all__ = ["GroupCommits"]


class GroupCommits:
    """Waiters for the end of the next group commit; set by the writer loop."""

    __slots__ = ("_done", "_then", "_writing")

    def __init__(self) -> None:
        self._done = trio.lowlevel.ParkingLot()
        self._then: list[Callable[[], None]] = []
        self._writing = False

    def started(self) -> None:
        self._writing = True

    def finished(self) -> None:
        """A batch is committed (or refused) and its writers were told: wake the rest."""
        self._writing = False
        self._done.unpark_all()
        if self._then:
            then, self._then = self._then, []
            for fn in then:
                fn()

    def call_after_next(self, fn: Callable[[], None], queued: bool) -> bool:
        """`after_next` without a task: ``fn`` is called (on the trio thread, by
        the writer) once that group commit is done. False, and ``fn`` is not
        kept, when the writer has nothing to do."""
        if self._writing or queued:
            self._then.append(fn)
            return True
        return False

    async def after_next(self, queued: bool) -> None:
        """Once the batch being written, or the next one when ``queued``, is done;
        at once (a cancel point only) when the writer has nothing to do."""
        if self._writing or queued:
            await self._done.park()
        else:
            await trio.lowlevel.checkpoint_if_cancelled()
