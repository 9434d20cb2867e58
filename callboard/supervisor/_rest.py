"""Rest and passivation of an `ActorCell`: what the runtime's sweeper asks of
an idle actor, and how the cell leaves memory.

An idle actor first rests (its task ends, its cell stays, so a message
needs no read to wake it), then passivates (the cell is forgotten once its
last commit is durable; a later message activates a new one). Kept apart
from the cell's life and mailbox loop (``_cell``), which decides when.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import trio

from ._states import CellState

if TYPE_CHECKING:
    from ..store import CommitResult
    from ._cell import ActorCell
    from ._controls import Control
    from ._inbox import Inbox
    from ._services import CellServices

__all__ = ["CellRest"]


class CellRest:
    """The part of `ActorCell` that rests and passivates it."""

    if not TYPE_CHECKING:
        __slots__ = ()  # its fields are ActorCell's slots

    if TYPE_CHECKING:
        state: CellState
        idle_since: float | None
        _svc: CellServices
        _inbox: Inbox
        _paused: bool
        _controls: list[Control] | None
        _stop_requested: bool
        _passivation_requested: bool
        _rest_requested: bool
        _slot_wait: trio.CancelScope | None
        _activities: trio.Nursery | None

        def _rouse(self) -> None: ...
        def _finish(self) -> None: ...
        def _lifecycle(self, type: str, data: dict[str, Any]) -> None: ...
        async def _commit(self, *, cursor: int | None = None, **lifecycle: Any) -> CommitResult: ...

    def _as_cell(self) -> ActorCell:
        # Only ever a base of ActorCell: the services take the whole cell.
        return cast("ActorCell", self)

    def request_passivation(self) -> None:
        """The runtime's sweeper found this actor idle for long enough."""
        self._passivation_requested = True
        if self.state is CellState.RESTING:
            self._wake_from_rest()
        else:
            self._rouse()

    def request_rest(self) -> None:
        """The runtime's sweeper found this actor idle for ``rest_after``."""
        if self.state is CellState.IDLE:
            self._rest_requested = True
            self._rouse()

    def runtime_closing(self) -> None:
        """The runtime closes: a resting cell ends here (its last commit holds
        all it has: it rests only with nothing unhandled and nothing running)."""
        if self.state is CellState.RESTING:
            self._finish()

    def _rested(self) -> None:
        """The task has let go: the cell rests, unless work came meanwhile.

        The task decided to rest, then took a schedule point (its
        activities' nursery closing) before it ended. A message, a stop or
        a request that came then found the cell not yet resting, so its
        wake-up was for a task that no longer waits, and was dropped. Such
        work is looked for here, once nothing can come between.
        """
        self.state = CellState.RESTING
        self._svc.counted("rests")
        if (
            self._stop_requested
            or self._passivation_requested
            or self._controls
            or (not self._paused and (self._inbox or self._inbox.stale))
        ):
            self._wake_from_rest()

    def _wake_from_rest(self) -> None:
        # RUNNING at once: a second delivery before the task starts must not
        # start another. The task finds the flags and the inbox as they are.
        self.state = CellState.RUNNING
        if not self._passivation_requested:
            self.idle_since = None  # it has work: no longer idle
        if not self._svc.resume(self._as_cell()):
            self._finish()  # the runtime is closing: nothing is running here

    @property
    def resting(self) -> bool:
        return self.state is CellState.RESTING

    async def _passivation_turn(self) -> bool:
        """Wait for one of the runtime's passivation slots; False if work came first.

        A bounded number passivate at once: when a sweep finds thousands
        idle, their commits would otherwise all be in memory together, and
        the heap keeps that peak. A message for a waiting actor must not
        wait for the others' commits, so its arrival ends the wait.
        """
        try:
            with trio.CancelScope() as self._slot_wait:
                await self._svc.passivation_slots.acquire()
                return True
            return False
        finally:
            self._slot_wait = None

    def _can_passivate(self) -> bool:
        # A paused actor may rest or passivate with messages waiting: the
        # store holds them, and its row the pause.
        return (
            (self._paused or (not self._inbox and not self._inbox.stale))
            and not self._controls
            and not self._stop_requested
            and self._activities is not None
            and not self._activities.child_tasks
        )

    async def _passivate(self) -> None:
        # Forget first: a message arriving from now on activates a new cell,
        # which waits for this one to be done before it loads.
        self._svc.forget(self._as_cell())
        self.state = CellState.PASSIVATING
        self._lifecycle("actor.passivated", {})
        await self._commit()
        self.state = CellState.ENDED
        self._svc.counted("passivations")
