"""One actor's life: activation, its mailbox loop, and restarts after crashes.

A cell is the supervisor's child for one address. It restores the actor
from its last commit, feeds it its mailbox in order, commits after each
handled batch, and on a crash restarts it with backoff (or dead-letters the
message, stops the actor as failed, or escalates, by the kind's policy).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from .._retry import RestartWindow
from ..actors import Actor, Context, Effects
from ..codec import loads
from ..errors import LeaseLost, StoreUnavailable, UnknownOutcome
from ..mailbox import Event, Message
from ._cell_commits import CellCommits
from ._controls import Controls
from ._inbox import Inbox
from ._lane import FastLane, never_suspends
from ._log_actor import current_actor
from ._rest import CellRest
from ._restore import restore
from ._services import CellServices
from ._states import CellState
from ._wakeup import StepLock, Wakeup

__all__ = ["ActorCell", "CellServices"]

log = logging.getLogger("callboard.supervisor")


def _unwrap(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


class ActorCell(Controls, FastLane, CellCommits, CellRest):
    """The supervised home of one actor while it is active (``Controls``: an
    operator's pause, resume, step and state edit, run between its batches;
    ``FastLane``: its plain steps run without its task, when its handler
    never suspends; ``CellCommits``: its commits and crash records;
    ``CellRest``: its rest and passivation when idle)."""

    # Slots: one of these per active actor, and a dict per instance is ~1 KB.
    __slots__ = (
        "_activities",
        "_actor",
        "_context",
        "_current",
        "_cursor",
        "_done",
        "_fast",
        "_finished",
        "_inbox",
        "_lane_busy",
        "_lane_crash",
        "_lane_ctx",
        "_lane_deferred",
        "_lane_handoff",
        "_lane_ok",
        "_lane_queued",
        "_last_error",
        "_last_error_seq",
        "_last_state",
        "_lock",
        "_passivation_requested",
        "_pending_attempts",
        "_pending_dead_letter",
        "_rest_requested",
        "_restart_window",
        "_slot_wait",
        "_stop_requested",
        "_svc",
        "_uncounted",
        "_wakeup",
        "address",
        "commit_failure",
        "effects",
        "final_status",
        "idle_since",
        "kind",
        "restarts",
        "state",
    )

    def __init__(
        self, address: str, kind: type[Actor], services: CellServices, *, stop: bool = False
    ) -> None:
        self.address = address
        self.kind = kind
        self.effects = Effects()
        self._done: trio.Event | None = None  # made when someone waits (see `done`)
        self._finished = False
        self.final_status: str | None = None
        self.restarts = 0
        self._svc = services
        self._inbox = Inbox(
            services.store, address, limit=services.inbox_limit, window=services.batch_max
        )
        self._wakeup = Wakeup()
        self._passivation_requested = False
        self._rest_requested = False
        self._slot_wait: trio.CancelScope | None = None
        self.idle_since: float | None = None
        self._lock = StepLock()
        self._actor: Actor | None = None
        self._activities: trio.Nursery | None = None
        self._stop_requested = stop
        self._paused = False  # read from its row at each start (a durable pause)
        self._controls = None  # an operator's requests, run between batches (`Controls`)
        self.state = CellState.LOADING
        """Where its life stands (`CellState`)."""
        self._cursor = 0
        self._last_state: bytes | None = None
        self._last_error_seq: int | None = None
        self._last_error: bytes | None = None
        self._current: Message | None = None
        self._pending_dead_letter: tuple[int, bytes] | None = None
        # A batch of first attempts being handled: nothing in the store says it
        # started, so a crash counts it (see `Inbox`).
        self._uncounted: tuple[int, int] | None = None
        self._pending_attempts: tuple[int, int, int] | None = None
        self._restart_window: RestartWindow | None = None  # made at the first crash
        self.commit_failure: str | None = None
        """Why its last commit failed (the store refused it), until a step commits."""
        self._lane_init()

    @property
    def done(self) -> trio.Event:
        """Set once the cell has ended for good (its successor waits for it)."""
        if self._done is None:
            # Most cells are never waited for: an Event each is 450 bytes.
            self._done = trio.Event()
            if self._finished:
                self._done.set()
        return self._done

    # -- the mailbox, in memory --------------------------------------------

    async def _fill(self) -> None:
        """Load unhandled messages from the store, from the committed cursor on
        (a delivery meanwhile is read from the store afterwards: `Inbox.load`)."""
        self.state = CellState.LOADING
        record = await self._svc.store.actor(self.address)
        await self._inbox.load(record.cursor if record is not None else 0)

    def deliver(self, message: Message) -> None:
        """A message just became durable; keep it in order, or read it from the store later."""
        self._inbox.deliver(message)
        if not self._paused:  # held: no wake-up (and no task) for each message
            self._work_arrived()

    def poke(self) -> None:
        """Something arrived that was not delivered in memory (a fired timer)."""
        self._inbox.poke()
        if not self._paused:
            self._work_arrived()

    def _work_arrived(self) -> None:
        if self.state is CellState.RESTING:
            self._wake_from_rest()
            return
        if self._lane_offer():
            return  # the lane steps it; its task stays parked
        self._wakeup.set()
        if self._slot_wait is not None:
            # Waiting for its turn to passivate: it has work now instead.
            self._slot_wait.cancel()

    def _rouse(self) -> None:
        """Wake the task for what only it does; the lane hands it nothing more."""
        self._lane_ok = False
        self._wakeup.set()

    def _wake_task(self) -> None:
        """A stop or an operator's request arrived: the task's work, never the lane's."""
        if self.state is CellState.RESTING:
            self._wake_from_rest()
            return
        self._rouse()
        if self._slot_wait is not None:
            self._slot_wait.cancel()

    def request_stop(self) -> None:
        self._stop_requested = True
        self._wake_task()

    @property
    def mailbox_size(self) -> int:
        return len(self._inbox)

    @property
    def waiting_for_approval(self) -> bool:
        """The live actor's work waits for a person's answer (``ls``: waiting)."""
        actor = self._actor
        return actor is not None and actor.waits_for_person()

    # -- what the context asks for ----------------------------------------

    def wall_time(self) -> float:
        return self._svc.wall_time()

    def create_kind(self, kind: str) -> str | None:
        return self._svc.create_kind(kind)

    @property
    def settings(self) -> Mapping[str, Any]:
        return self._svc.settings_for(self.kind.kind)

    def publish_ephemeral(self, type: str, data: Any) -> None:
        self._svc.publish(Event(self.address, None, type, data, self.wall_time()))

    async def read_log(self, log: str, start: int, limit: int) -> list[bytes]:
        return await self._svc.store.read_log(self.address, log, start, limit)

    async def log_length(self, log: str) -> int:
        return await self._svc.store.log_length(self.address, log)

    def start_activity(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str) -> None:
        if self._activities is None:
            raise RuntimeError(f"{self.address} is not active; activities start from handlers")
        self._activities.start_soon(self._activity, fn, args, name=f"{self.address}:{name}")

    async def _activity(self, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> None:
        try:
            await fn(*args)
        finally:
            # The mailbox loop may be waiting to passivate once activities end.
            self._rouse()

    async def checkpoint(self) -> None:
        if self._lock.owner is trio.lowlevel.current_task():
            await self._commit()
        else:
            async with self._lock:
                await self._commit()
        if self.state is CellState.ENDED:
            self._rouse()

    # -- the supervised life ------------------------------------------------

    async def run(self, *, resumed: bool = False) -> None:
        """Run the actor until it passivates, stops, fails or rests; restart it
        on crashes. ``resumed``: it rested, and goes on from memory."""
        # This task's own context (copied from whichever task activated it).
        current_actor.set(self.address)
        self._context = trio.lowlevel.current_task().context  # the lane's handlers run in it
        resting = False
        try:
            if not resumed:
                before = self._svc.predecessor(self)
                if before is not None:
                    await before.done.wait()
                await self._fill()
            restarted = False
            while True:
                try:
                    resting = await self._live(restarted, resumed=resumed)
                    return
                except Exception as exc:
                    if isinstance(_unwrap(exc), LeaseLost):
                        # Another node owns it now: stop here at once, recording
                        # nothing (the store would refuse it anyway).
                        log.warning("%s: %s", self.address, _unwrap(exc))
                        return
                    try:
                        restart = await self._crashed(_unwrap(exc))
                    except LeaseLost as lost:
                        log.warning("%s: %s", self.address, lost)
                        return
                    except (StoreUnavailable, UnknownOutcome) as refused:
                        # Not even the crash could be recorded: the store refuses
                        # writes. The last commit stands; try again after a pause
                        # rather than take the whole runtime down.
                        log.warning("%s: cannot record its crash (%s)", self.address, refused)
                        self.effects, self._pending_dead_letter = Effects(), None
                        await trio.sleep(self.kind.supervision.backoff_max)
                        restart = True
                    if not restart:
                        return
                    restarted, resumed = True, False
                    await self._fill()
        finally:
            self._context = None
            if resting:
                self._rested()
            else:
                self._finish()

    def _finish(self) -> None:
        self._end_controls()
        self.state = CellState.DONE
        self._svc.gone(self)
        self._finished = True
        if self._done is not None:
            self._done.set()

    async def _live(self, restarted: bool, *, resumed: bool = False) -> bool:
        """The actor's life from its last commit (or from where it rested);
        True when it rests."""
        if resumed:
            assert self._actor is not None
            return await self._run_mailbox(self._actor, Context(self), start=None)
        self.state = CellState.STARTING
        record = await self._svc.store.actor(self.address)
        if record is None or record.final:
            self.final_status = record.status if record else None
            self.state = CellState.ENDED
            return False
        actor = restore(self.kind, self.address, record)
        self._actor = actor
        self._fast = never_suspends(actor.handle)
        self._cursor = record.cursor
        self._last_state = record.state
        self._last_error = record.last_error
        self._last_error_seq = loads(record.last_error).get("seq") if record.last_error else None
        self._paused = record.paused
        del record  # this frame lives as long as the actor: keep no copy of its row
        self.effects = Effects()
        start = "actor.restarted" if restarted else "actor.started"
        return await self._run_mailbox(actor, Context(self), start=start)

    async def _run_mailbox(self, actor: Actor, ctx: Context, *, start: str | None) -> bool:
        """Its activities' nursery, ``on_start`` (announced as ``start``; None:
        resumed from rest), then the mailbox loop; True when it rests."""
        async with trio.open_nursery() as nursery:
            self._activities = nursery
            try:
                if start is not None:
                    async with self._lock:
                        self._lifecycle(start, {})
                        if not self._stop_requested:
                            await actor.on_start(ctx)
                        await self._commit()
                self.state = CellState.RUNNING
                return await self._mailbox_loop(actor, ctx)
            finally:
                self._activities = None
                self._lane_ctx = None
                nursery.cancel_scope.cancel()

    async def _mailbox_loop(self, actor: Actor, ctx: Context) -> bool:
        """Until it ends (False) or rests (True)."""
        self._lane_ctx = ctx
        while self.state is not CellState.ENDED:
            if self._controls:
                await self._run_controls(actor, ctx)
                continue
            if self._stop_requested:
                self.state = CellState.STOPPING
                async with self._lock:
                    await actor.on_stop(ctx)
                    if self.effects.final_status is None:
                        self.effects.final_status = "stopped"
                    await self._commit()
                return False
            if not self._inbox or self._paused:
                if self._inbox.stale and not self._paused:
                    # The store has everything after the last message taken.
                    await self._inbox.reload()
                    continue
                # Idle: the runtime's sweeper asks us to rest, then to
                # passivate, when this lasted long enough (one sweeper, not a
                # timer per message). A request already made (resumed from
                # rest for it) is not waited for.
                if not (self._passivation_requested or self._rest_requested):
                    self.idle_since = trio.current_time()
                    self.state = CellState.IDLE
                    await self._idle()  # the lane may step it meanwhile
                    if self.state is CellState.ENDED:
                        break  # it stopped itself in a step the lane ran
                idle_since, self.idle_since = self.idle_since, None
                requested, self._passivation_requested = self._passivation_requested, False
                rest, self._rest_requested = self._rest_requested, False
                if requested and self._can_passivate() and await self._passivation_turn():
                    try:
                        if self._can_passivate():
                            await self._passivate()
                            return False
                    finally:
                        self._svc.passivation_slots.release()
                elif rest and self._can_passivate():
                    self.idle_since = idle_since  # the passivation sweep goes on counting
                    return True
                continue
            if len(self._inbox) == 1 and not self._inbox.stale:
                # One message: let the group commit in flight bring more of
                # this actor's, so that one commit covers them (`GroupCommits`).
                await self._svc.store.after_next_commit()
            await self._handle(actor, ctx, self._inbox.take(self._svc.batch_max))
        return False

    async def _handle(self, actor: Actor, ctx: Context, batch: list[Message]) -> None:
        """Handle ``batch`` (or dead-letter its first message) and commit."""
        policy = self.kind.supervision
        first = batch[0]
        if first.attempt > policy.max_attempts:
            async with self._lock:
                self._dead_letter(first, self._died_handling(first))
                # Its last attempt may have been assumed rather than marked.
                self._pending_attempts = (first.seq, first.seq, first.attempt - 1)
                await self._commit(cursor=first.seq)
            return
        if first.attempt == 1:
            self._uncounted = (first.seq, batch[-1].seq)
        else:
            # A retry runs alone, counted before it starts: if it kills the
            # process, the next life knows.
            await self._svc.store.mark_attempts(self.address, first.seq, first.seq, first.attempt)
        # Taken without a schedule point when free (it almost always is):
        # the handler and the commit are the awaits that matter.
        if self._lock.locked():
            await self._lock.acquire()
        else:
            self._lock.acquire_nowait()
        try:
            for message in batch:
                self._current = message
                await actor.handle(ctx, message)
            self._current = None
            await self._commit(cursor=batch[-1].seq)
            self._uncounted = None
        finally:
            self._lock.release()
