"""The fast lane: a cell whose handler never suspends is stepped without its task.

A cell's task parks while the actor is idle. When a message arrives for an
actor whose ``handle`` has no ``await`` in it (so it runs to its end the
moment it is called), the task stays parked: the runtime's one `Lane` task
takes the batch, runs the handlers, builds the commit and queues it to the
writer without waiting (`Store.commit_soon`); the writer's callback, once
the commit is durable, does what the task would do after its commit and
takes the next batch. So the steady state of such an actor costs no task
step and no park per message: one lane pass per group commit serves every
cell that has work, where each cell's task used to be scheduled two or
three times per commit.

The lane does only the plain step: messages on their first attempt, no
operator request, no pause, no stop, no passivation or rest asked for, the
inbox in memory complete, the cell's lock free. Anything else rouses the
task, which does it as it always has, after the lane's commit in flight is
done. A handler's exception, or a commit the store refused, is handed to
the task too, which raises it where its own step would have: the crash is
recorded and supervised in exactly one place. While the lane has a commit
in flight the task cannot be cancelled past it (its wait holds the cancel
until the commit is told), so a cell never ends with a write of its own
still pending, as `_Op.wait` ensures for the task's own commits.
"""

from __future__ import annotations

import contextvars
import dis
import functools
import inspect
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import trio

from ..errors import StoreUnavailable, UnknownOutcome
from ._states import CellState

if TYPE_CHECKING:
    from ..actors import Actor, Context
    from ..store import Commit, CommitResult
    from ._inbox import Inbox
    from ._services import CellServices
    from ._wakeup import StepLock, Wakeup

__all__ = ["FastLane", "Lane", "never_suspends"]

log = logging.getLogger("callboard.supervisor")

# What a coroutine's own code runs to suspend (``await``, ``async for``,
# ``async with``); a handler whose code has none of these returns on its
# first step, whatever it calls, since a plain function cannot suspend it.
_SUSPENDING = frozenset(
    {
        "GET_AWAITABLE",
        "SEND",
        "YIELD_VALUE",
        "BEFORE_ASYNC_WITH",
        "GET_AITER",
        "GET_ANEXT",
        "END_ASYNC_FOR",
    }
)


@functools.lru_cache(maxsize=1024)
def _code_never_suspends(code: Any) -> bool:
    return not any(i.opname in _SUSPENDING for i in dis.get_instructions(code))


def never_suspends(handler: Callable[..., Any]) -> bool:
    """Whether calling ``handler`` gives a coroutine that ends at its first step."""
    fn = getattr(handler, "__func__", handler)
    code = getattr(fn, "__code__", None)
    # The flag, not `inspect.iscoroutinefunction`: a function only marked as
    # one may return any awaitable.
    return (
        code is not None
        and bool(code.co_flags & inspect.CO_COROUTINE)
        and _code_never_suspends(code)
    )


def _run_to_end(coro: Coroutine[Any, Any, Any]) -> None:
    try:
        coro.send(None)
    except StopIteration:
        return
    coro.close()
    raise RuntimeError("a handler with no await in its code suspended; it cannot run in the lane")


class Lane:
    """The one task that steps the cells of the fast lane (see the module)."""

    __slots__ = ("_ready", "_running", "_task")

    def __init__(self) -> None:
        self._ready: list[FastLane] = []
        self._task: trio.lowlevel.Task | None = None
        self._running = False

    def schedule(self, cell: FastLane) -> bool:
        """Step ``cell`` soon; False if the lane is not running (the cell's task does it)."""
        if not self._running:
            return False
        self._ready.append(cell)
        task, self._task = self._task, None
        if task is not None:
            trio.lowlevel.reschedule(task)
        return True

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self._running = True
        task_status.started()
        try:
            while True:
                if not self._ready:
                    self._task = trio.lowlevel.current_task()
                    await trio.lowlevel.wait_task_rescheduled(self._abort)
                    # Woken by what a group commit made durable: two passes of
                    # the scheduler first, for the other tasks that commit woke
                    # (trio runs a pass's tasks in either order, so one may
                    # not do). Senders told of it deliver, and a cell takes
                    # their messages in one batch; a server's replies leave
                    # through its connections' writers, whose websocket send
                    # takes a pass of its own. Clients wait for those; no one
                    # waits for the handlers and the commits they queue. With
                    # one gateway client the reply used to leave after the
                    # handling: the passes took 5-10% more sends a second.
                    await trio.lowlevel.cancel_shielded_checkpoint()
                    await trio.lowlevel.cancel_shielded_checkpoint()
                else:
                    await trio.lowlevel.checkpoint()  # cells came while it stepped
                ready, self._ready = self._ready, []
                for cell in ready:
                    cell.lane_step()
        finally:
            self._running = False
            self._task = None
            # Their tasks take the work the lane will not.
            ready, self._ready = self._ready, []
            for cell in ready:
                cell.lane_dropped()

    def _abort(self, _: object) -> trio.lowlevel.Abort:
        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED


class FastLane:
    """The part of `ActorCell` that the `Lane` steps (see the module)."""

    if not TYPE_CHECKING:
        # Its fields are ActorCell's slots (two bases with slots of their own
        # cannot be combined); the checker is told of them below.
        __slots__ = ()

    if TYPE_CHECKING:
        address: str
        kind: type[Actor]
        state: CellState
        idle_since: float | None
        commit_failure: str | None
        _svc: CellServices
        _inbox: Inbox
        _wakeup: Wakeup
        _lock: StepLock
        _actor: Actor | None
        _controls: list[Any] | None
        _paused: bool
        _stop_requested: bool
        _passivation_requested: bool
        _rest_requested: bool
        _pending_attempts: tuple[int, int, int] | None
        _pending_dead_letter: tuple[int, bytes] | None
        _uncounted: tuple[int, int] | None
        _current: Any
        _slot_wait: trio.CancelScope | None
        # The lane's own (set by ActorCell.__init__):
        _fast: bool  # its handler never suspends (checked at each start)
        _lane_ok: bool  # its task waits idle and lets the lane step it
        _lane_busy: bool  # a lane step's commit is in flight
        _lane_queued: bool  # the lane will step it (or waits for a group commit to)
        _lane_deferred: bool  # its last step waited a group commit for more messages
        _lane_crash: BaseException | None  # for the task to raise
        _lane_handoff: tuple[Commit, bytes | None] | None  # for the task to commit
        _lane_ctx: Context | None
        _context: contextvars.Context | None  # its task's, for the handlers

        def _rouse(self) -> None: ...
        def _prepare_commit(
            self, cursor: int | None, lifecycle: dict[str, Any]
        ) -> tuple[Commit, bytes | None]: ...
        def _committed(
            self, commit: Commit, result: CommitResult, state: bytes | None, bookkeeping: bool
        ) -> None: ...
        async def _commit_prepared(
            self, commit: Commit, state: bytes | None, bookkeeping: bool
        ) -> CommitResult: ...

    def _lane_init(self) -> None:
        self._fast = False
        self._lane_ok = False
        self._lane_busy = False
        self._lane_queued = False
        self._lane_deferred = False
        self._lane_crash = None
        self._lane_handoff = None
        self._lane_ctx = None
        self._context = None

    # -- the task's side ---------------------------------------------------------

    def _lane_offer(self) -> bool:
        """A message arrived: True if the lane takes it (the task stays parked)."""
        if not (self._lane_ok and self._wakeup.waiting):
            return False
        if self._lane_busy or self._lane_queued:
            return True  # its step in flight, or one to come, takes it
        if self._svc.lane.schedule(self):
            self._lane_queued = True
            return True
        return False

    async def _idle(self) -> None:
        """The task's wait while the actor is idle; the lane steps it meanwhile.

        Returns when something needs the task, once the lane's commit in
        flight (if any) is done; raises what the lane handed it to raise.
        """
        self._lane_ok = self._fast and self._context is not None
        try:
            await self._wakeup.wait(self._hold_cancel)
            while self._lane_busy:
                await self._wakeup.wait(self._hold_cancel)
        finally:
            self._lane_ok = False
            if self.state is CellState.IDLE:
                self.state = CellState.RUNNING
        handoff, self._lane_handoff = self._lane_handoff, None
        if handoff is not None:
            await self._commit_handoff(*handoff)
        crash, self._lane_crash = self._lane_crash, None
        if crash is not None:
            # The failed step's lock, released as its exception leaves (as a
            # step of the task's own would), so the activities are cancelled
            # before one of them could commit what the step left in memory.
            self._lock.take_held()
            try:
                raise crash
            finally:
                self._lock.release()

    def _hold_cancel(self) -> bool:
        if self._lane_busy:
            self._lane_ok = False  # the lane stops after this commit, and wakes the task
            return True
        return False

    async def _commit_handoff(self, commit: Commit, state: bytes | None) -> None:
        """The lane ran a step but could not queue its commit: the task commits it."""
        self._lock.take_held()
        try:
            await self._commit_prepared(commit, state, False)
            self._uncounted = None
        finally:
            self._lock.release()

    # -- the lane's side -----------------------------------------------------------

    def lane_step(self) -> None:
        """Called by the `Lane`: take and handle a batch if the plain step applies."""
        self._lane_queued = False
        context = self._context
        if context is None:
            self._rouse()
            return
        context.run(self._lane_run)

    def lane_dropped(self) -> None:
        """The lane stopped before stepping this cell: its task takes the work."""
        self._lane_queued = False
        self._rouse()

    def _lane_run(self) -> None:
        if not (self._lane_ok and self._wakeup.waiting) or self._lane_busy:
            return  # the task is up and takes the inbox itself, or a step is in flight
        inbox = self._inbox
        if not inbox and not inbox.stale:
            return
        actor, ctx = self._actor, self._lane_ctx
        if (
            actor is None
            or ctx is None
            or self._controls
            or self._paused
            or self._stop_requested
            or self._passivation_requested
            or self._rest_requested
            or inbox.stale  # (empty, it is stale: see above)
            or self._lock.locked()
            or self._pending_attempts is not None
            or self._pending_dead_letter is not None
            or inbox.next_attempt != 1
            or self.kind.supervision.max_attempts < 1
            or self.state is CellState.ENDED
        ):
            self._rouse()  # not the plain step: the task's to do
            return
        deferred, self._lane_deferred = self._lane_deferred, False
        if (
            len(inbox) == 1
            and not deferred
            and self._svc.store.call_after_next_commit(self._lane_again)
        ):
            # One message: let the group commit in flight bring more of this
            # actor's, as the task does (`GroupCommits`).
            self._lane_queued = self._lane_deferred = True
            return
        batch = inbox.take(self._svc.batch_max)
        self.state = CellState.RUNNING
        self.idle_since = None
        self._lock.hold()
        self._lane_busy = True
        self._uncounted = (batch[0].seq, batch[-1].seq)
        try:
            for message in batch:
                self._current = message
                _run_to_end(actor.handle(ctx, message))
            self._current = None
            commit, state = self._prepare_commit(batch[-1].seq, {})
        except Exception as exc:
            self._lane_failed(exc)
            return
        if not self._svc.store.commit_soon(
            commit, functools.partial(self._lane_committed, commit, state)
        ):
            # The write queue is full (or closed): the task waits for room.
            self._lane_handoff = (commit, state)
            self._lane_busy = False
            self._rouse()

    def _lane_again(self) -> None:
        """Have the lane step it again, or its task if the lane has stopped (also
        the writer's callback once the group commit a deferred step waited for is done)."""
        if self._svc.lane.schedule(self):
            self._lane_queued = True
        else:
            self.lane_dropped()

    def _lane_committed(
        self, commit: Commit, state: bytes | None, outcome: CommitResult | Exception
    ) -> None:
        """The writer's callback: the lane's commit is durable, or was refused."""
        context = self._context
        if context is None:  # the cell has ended meanwhile (its task was told first)
            self._lane_done(commit, state, outcome)
        else:
            context.run(self._lane_done, commit, state, outcome)

    def _lane_done(
        self, commit: Commit, state: bytes | None, outcome: CommitResult | Exception
    ) -> None:
        try:
            if isinstance(outcome, BaseException):
                if isinstance(outcome, StoreUnavailable | UnknownOutcome):
                    self.commit_failure = str(outcome)
                raise outcome
            self._committed(commit, outcome, state, False)
            self._uncounted = None
        except Exception as exc:
            self._lane_failed(exc)
            return
        self._lock.release_held()
        self._lane_busy = False
        if not (self._lane_ok and self._wakeup.waiting) or self.state is CellState.ENDED:
            self._rouse()  # the task waits for this commit, or the actor ended in it
        elif self._inbox or self._inbox.stale:
            self._lane_again()  # (a request for the task has roused it: the branch above)
        else:
            self.state = CellState.IDLE
            self.idle_since = trio.current_time()

    def _lane_failed(self, exc: BaseException) -> None:
        """A handler raised, or the commit failed: the task raises it (a crash),
        holding the lock until then, so that no activity's checkpoint commits
        what the failed step left in memory."""
        self._lane_crash = exc
        self._lane_busy = False
        self._rouse()
