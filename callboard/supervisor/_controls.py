"""An operator's hold on a live actor: pause, resume, step, and a state edit.

Erlang's ``sys:suspend``, ``sys:resume`` and ``sys:replace_state`` for
callboard's actors. A request is a `Control` queued on the actor's cell; the
cell's own task runs it at the top of its mailbox loop, between two batches
(`Controls._run_controls`), so it never races a handler: a state edit is a
step of its own under the cell's `StepLock`, committed with its
``actor.state_replaced`` event, and refused while an activity runs (it
holds the state it drives). A resting cell is woken for a request, and a
paused one is still woken for requests and for ``stop``, never for a
message: while paused its mailbox fills (and persists) with no wake-up and
no task per message, and it may rest and passivate as an idle one does.

The pause is durable: a commit of its own sets ``paused`` on the actor's
row (announced as ``actor.paused``, and ``actor.resumed`` when cleared), and
each start of the actor reads it back, so a crash or a restart of the whole
process leaves it paused. While paused, activities already running go on
(and checkpoint); ``on_start`` still runs at each start. A step hands a
paused actor exactly one message, as a batch of one, and answers with its
seq once that is committed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import trio

from ..errors import (
    ActorCrashed,
    ActorStopped,
    BadRequest,
    CrashReason,
    RuntimeClosed,
    StoreUnavailable,
    UnknownOutcome,
)
from ._states import CellState

if TYPE_CHECKING:
    from ..actors import Actor, Context
    from ..mailbox import Message
    from ..store import CommitResult
    from ._inbox import Inbox
    from ._wakeup import StepLock

__all__ = ["Control", "Controls"]


@attrs.define
class Control:
    """One request and, once the cell has run it, its outcome."""

    what: str
    """``pause``, ``resume``, ``step`` or ``replace_state``."""
    state: Any = None
    """For ``replace_state``: the new state, already structured."""
    result: Any = None
    error: BaseException | None = None
    done: trio.Event = attrs.Factory(trio.Event)

    def finish(self, result: Any) -> None:
        self.result = result
        self.done.set()

    def fail(self, error: BaseException) -> None:
        if not self.done.is_set():
            self.error = error
            self.done.set()


class Controls:
    """The part of `ActorCell` that takes an operator's requests."""

    # Set by `ActorCell.__init__`: the requests queued (None: none yet), and
    # whether it is paused (read from its row at each start).
    __slots__ = ("_controls", "_paused")
    _controls: list[Control] | None
    _paused: bool

    if TYPE_CHECKING:
        address: str
        state: CellState
        final_status: str | None
        _lock: StepLock
        _inbox: Inbox
        _finished: bool

        _activities: trio.Nursery | None

        def _wake_task(self) -> None: ...
        def _lifecycle(self, type: str, data: dict[str, Any]) -> None: ...
        async def _commit(self, *, cursor: int | None = None, **lifecycle: Any) -> CommitResult: ...
        async def _handle(self, actor: Actor, ctx: Context, batch: list[Message]) -> None: ...

    @property
    def paused(self) -> bool:
        """Paused by an operator (as its last commit, or its row, says)."""
        return self._paused

    async def control(self, request: Control) -> Any:
        """Queue ``request`` for the cell's task and wait for its outcome.

        Queued at once, without a checkpoint before (the cell was just found
        in the directory, so it is not passivating); once queued it is run
        even if the caller stops waiting, as a send once queued is stored.
        """
        if self._finished:
            raise ActorStopped(f"{self.address} has ended; there is nothing to {request.what}")
        if self._controls is None:
            self._controls = []
        self._controls.append(request)
        self._wake_task()
        await request.done.wait()
        if request.error is not None:
            raise request.error
        return request.result

    def _end_controls(self) -> None:
        """The cell ends: requests it will not run hear why."""
        controls, self._controls = self._controls, None
        for request in controls or ():
            if self.final_status is not None:
                request.fail(
                    ActorStopped(
                        f"{self.address} ended ({self.final_status}) before its "
                        f"{request.what} could run"
                    )
                )
            else:
                request.fail(RuntimeClosed(f"the runtime closed before {self.address} could "
                                           f"{request.what}"))  # fmt: skip

    def _working(self) -> bool:
        """An activity of the actor is running."""
        return self._activities is not None and bool(self._activities.child_tasks)

    async def _run_controls(self, actor: Actor, ctx: Context) -> None:
        """Run the queued requests in order (the mailbox loop calls this)."""
        # Until the queue is empty, or a step ended the actor (it stopped
        # itself): what is left is answered by `_end_controls`.
        while self._controls and self.state is not CellState.ENDED:
            request = self._controls.pop(0)
            if request.what == "step" and not self._paused:
                request.fail(
                    BadRequest(
                        f"{self.address} is not paused, so it handles its mailbox by itself; "
                        "pause it first to step it one message at a time"
                    )
                )
                continue
            if request.what == "replace_state" and self._working():
                # An activity (a session's turn) holds the state's objects and
                # commits them as it goes: a state put in under it would be
                # lost at its next checkpoint, or leave it driving a stale one.
                request.fail(
                    BadRequest(
                        f"{self.address} has work running (an activity, such as a session's "
                        "turn), which holds its state: the new state would be lost under it. "
                        "Wait for the work to end (cancel a turn) and set the state then; "
                        "nothing was changed"
                    )
                )
                continue
            try:
                request.finish(await self._run_control(request, actor, ctx))
            except BaseException as exc:
                # The cell goes on as after any failed step (a crash restarts
                # it from its last commit); the caller hears what happened.
                stored = isinstance(exc, StoreUnavailable | UnknownOutcome)  # not the handler
                if isinstance(exc, Exception) and request.what == "step" and not stored:
                    reason = CrashReason.from_exception(exc).summary()
                    request.fail(
                        ActorCrashed(
                            f"the message stepped into {self.address} crashed its handler "
                            f"({reason}); its supervision decides what follows: restarted, "
                            "it stays paused and the next step tries the message again (or "
                            "dead-letters it once it used its attempts)"
                        )
                    )
                elif isinstance(exc, Exception):
                    request.fail(exc)
                else:
                    request.fail(RuntimeClosed(f"{self.address} was cancelled during its "
                                               f"{request.what}"))  # fmt: skip
                raise

    async def _run_control(self, request: Control, actor: Actor, ctx: Context) -> Any:
        if request.what == "step":
            return await self._step(actor, ctx)
        async with self._lock:
            if request.what == "replace_state":
                actor.state = request.state
                self._lifecycle("actor.state_replaced", {})
                result = await self._commit()
                return result.events[-1][0]
            pause = request.what == "pause"
            if self._paused != pause:
                self._lifecycle("actor.paused" if pause else "actor.resumed", {})
                await self._commit(paused=pause)
                self._paused = pause
            return "paused" if pause else "active"

    async def _step(self, actor: Actor, ctx: Context) -> int | None:
        if not self._inbox and self._inbox.stale:
            await self._inbox.reload()
        if not self._inbox:
            return None
        batch = self._inbox.take(1)
        await self._handle(actor, ctx, batch)
        return batch[0].seq
