"""One actor's life: activation, its mailbox loop, commits, crashes and restarts.

A cell is the supervisor's child for one address. It restores the actor
from its last commit, feeds it its mailbox in order, commits after each
handled batch, and on a crash restarts it with backoff (or dead-letters the
message, stops the actor as failed, or escalates, by the kind's policy).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import trio

from .._retry import RestartWindow
from ..actors import Actor, Context, Effects
from ..codec import converter, dumps, loads, structure_error
from ..errors import CrashReason, Escalation, StateError, StoreUnavailable, UnknownOutcome
from ..mailbox import Event, Message
from ..store import ActorRecord, Commit, CommitResult, Enqueue, NewEvent, Store
from ._states import CellState

__all__ = ["ActorCell", "CellServices"]

log = logging.getLogger("callboard.supervisor")


class CellServices(Protocol):
    """What the runtime provides to the cells it supervises."""

    store: Store
    inbox_limit: int
    batch_max: int
    passivate_after: float
    passivation_slots: trio.Semaphore

    def settings_for(self, kind: str) -> Mapping[str, Any]: ...
    def wall_time(self) -> float: ...
    def create_kind(self, kind: str) -> str | None: ...
    def publish(self, event: Event) -> None: ...
    def listening(self, address: str) -> bool: ...
    def route(self, sends: tuple[Enqueue, ...], result: CommitResult) -> None: ...
    def timers_changed(self) -> None: ...
    def forget(self, cell: ActorCell) -> None: ...
    def gone(self, cell: ActorCell) -> None: ...
    def cursor_advanced(self, address: str, cursor: int) -> None: ...
    def counted(self, what: str, n: int = 1) -> None: ...
    def predecessor(self, cell: ActorCell) -> ActorCell | None: ...


def _unwrap(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


class ActorCell:
    """The supervised home of one actor while it is active."""

    def __init__(
        self, address: str, kind: type[Actor], services: CellServices, *, stop: bool = False
    ) -> None:
        self.address = address
        self.kind = kind
        self.effects = Effects()
        self.done = trio.Event()
        self.final_status: str | None = None
        self.restarts = 0
        self._svc = services
        self._inbox: deque[Message] = deque()
        self._loaded_upto = 0
        self._taken = 0
        self._overflow = False
        # Messages that became durable before the one they follow: acks wake
        # their senders in any order, and each sender delivers its own.
        self._ahead: dict[int, Message] = {}
        self._wakeup = trio.Event()
        self._passivation_requested = False
        self._slot_wait: trio.CancelScope | None = None
        self.idle_since: float | None = None
        self._lock = trio.Lock()
        self._actor: Actor | None = None
        self._activities: trio.Nursery | None = None
        self._stop_requested = stop
        self.state = CellState.LOADING
        """Where its life stands (`CellState`)."""
        self._cursor = 0
        self._last_state: bytes | None = None
        self._last_error_seq: int | None = None
        self._last_error: bytes | None = None
        self._current: Message | None = None
        self._pending_dead_letter: tuple[int, bytes] | None = None
        self._restart_window = RestartWindow(kind.supervision.intensity, kind.supervision.period)
        self.commit_failure: str | None = None
        """Why its last commit failed (the store refused it), until a step commits."""

    # -- the mailbox, in memory --------------------------------------------

    async def _fill(self) -> None:
        """Load unhandled messages from the store, from the committed cursor on.

        Deliveries that arrive while it reads are not kept in memory: the
        cell is ``LOADING`` and marks them to be read from the store, which
        holds every message acked before they were delivered.
        """
        self.state = CellState.LOADING
        record = await self._svc.store.actor(self.address)
        self._taken = record.cursor if record is not None else 0
        self._inbox.clear()
        await self._reload()

    async def _reload(self) -> None:
        self._ahead.clear()
        self._overflow = False
        rows = await self._svc.store.pending(self.address, self._taken, self._svc.inbox_limit)
        self._inbox.extend(Message.from_record(r) for r in rows)
        self._loaded_upto = rows[-1].seq if rows else self._taken
        # A delivery during the read (overflow set meanwhile) is read next time.
        self._overflow = self._overflow or len(rows) >= self._svc.inbox_limit

    def deliver(self, message: Message) -> None:
        """A message just became durable; keep it in order, or read it from the store later."""
        seq = message.seq
        if self.state is CellState.LOADING:
            self._overflow = True  # the store has it; read once the load is done
            self._work_arrived()
            return
        if seq <= self._loaded_upto:
            return
        if self._overflow or len(self._inbox) + len(self._ahead) >= self._svc.inbox_limit:
            # Past the window kept in memory: it will be read from the store.
            self._overflow = True
        elif seq == self._loaded_upto + 1:
            self._inbox.append(message)
            ahead = self._ahead
            while ahead:
                following = ahead.pop(seq + 1, None)
                if following is None:
                    break
                self._inbox.append(following)
                seq += 1
            self._loaded_upto = seq
        else:
            # Its predecessor comes next, or the store has it (see the mailbox loop).
            self._ahead[seq] = message
        self._work_arrived()

    def poke(self) -> None:
        """Something arrived that was not delivered in memory (a fired timer)."""
        self._overflow = True
        self._work_arrived()

    def _work_arrived(self) -> None:
        self._wakeup.set()
        if self._slot_wait is not None:
            # Waiting for its turn to passivate: it has work now instead.
            self._slot_wait.cancel()

    def request_passivation(self) -> None:
        """The runtime's sweeper found this actor idle for long enough."""
        self._passivation_requested = True
        self._wakeup.set()

    def request_stop(self) -> None:
        self._stop_requested = True
        self._work_arrived()

    @property
    def mailbox_size(self) -> int:
        return len(self._inbox)

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
            self._wakeup.set()

    async def checkpoint(self) -> None:
        if self._lock.statistics().owner is trio.lowlevel.current_task():
            await self._commit()
        else:
            async with self._lock:
                await self._commit()
        if self.state is CellState.ENDED:
            self._wakeup.set()

    # -- the supervised life ------------------------------------------------

    async def run(self) -> None:
        """Run the actor until it passivates, stops or fails; restart it on crashes."""
        try:
            before = self._svc.predecessor(self)
            if before is not None:
                await before.done.wait()
            restarted = False
            await self._fill()
            while True:
                try:
                    await self._live(restarted)
                    return
                except Exception as exc:
                    try:
                        restart = await self._crashed(_unwrap(exc))
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
                    restarted = True
                    await self._fill()
        finally:
            self.state = CellState.DONE
            self._svc.gone(self)
            self.done.set()

    async def _live(self, restarted: bool) -> None:
        self.state = CellState.STARTING
        record = await self._svc.store.actor(self.address)
        if record is None or record.final:
            self.final_status = record.status if record else None
            self.state = CellState.ENDED
            return
        actor = self._instantiate(record)
        self._actor = actor
        self._cursor = record.cursor
        self._last_state = record.state
        self._last_error = record.last_error
        self._last_error_seq = loads(record.last_error).get("seq") if record.last_error else None
        self.effects = Effects()
        ctx = Context(self)
        async with trio.open_nursery() as nursery:
            self._activities = nursery
            try:
                async with self._lock:
                    self._lifecycle("actor.restarted" if restarted else "actor.started", {})
                    if not self._stop_requested:
                        await actor.on_start(ctx)
                    await self._commit()
                self.state = CellState.RUNNING
                await self._mailbox_loop(actor, ctx)
            finally:
                self._activities = None
                nursery.cancel_scope.cancel()

    async def _mailbox_loop(self, actor: Actor, ctx: Context) -> None:
        policy = self.kind.supervision
        while self.state is not CellState.ENDED:
            if self._stop_requested:
                self.state = CellState.STOPPING
                async with self._lock:
                    await actor.on_stop(ctx)
                    if self.effects.final_status is None:
                        self.effects.final_status = "stopped"
                    await self._commit()
                return
            if not self._inbox:
                if self._overflow or self._ahead:
                    # The store has everything after the last message taken.
                    await self._reload()
                    continue
                # Idle: the runtime's sweeper asks us to passivate when this
                # lasted long enough (one sweeper, not a timer per message).
                self._wakeup = trio.Event()
                self.idle_since = trio.current_time()
                self.state = CellState.IDLE
                try:
                    await self._wakeup.wait()
                finally:
                    self.idle_since = None
                    self.state = CellState.RUNNING
                requested, self._passivation_requested = self._passivation_requested, False
                if requested and self._can_passivate() and await self._passivation_turn():
                    try:
                        if self._can_passivate():
                            await self._passivate()
                            return
                    finally:
                        self._svc.passivation_slots.release()
                continue
            batch = self._take_batch()
            first = batch[0]
            if first.attempt > policy.max_attempts:
                async with self._lock:
                    self._dead_letter(first, self._died_handling(first))
                    await self._commit(cursor=first.seq)
                continue
            await self._svc.store.mark_attempts(self.address, first.seq, batch[-1].seq)
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
            finally:
                self._lock.release()

    def _take_batch(self) -> list[Message]:
        # A message that was attempted before runs alone, so that a poison
        # message is told apart from the innocent ones batched with it.
        first = self._inbox.popleft()
        batch = [first]
        if first.attempt == 1:
            while self._inbox and len(batch) < self._svc.batch_max and self._inbox[0].attempt == 1:
                batch.append(self._inbox.popleft())
        self._taken = batch[-1].seq
        return batch

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
        return (
            not self._inbox
            and not self._overflow
            and not self._ahead
            and not self._stop_requested
            and self._activities is not None
            and not self._activities.child_tasks
        )

    async def _passivate(self) -> None:
        # Forget first: a message arriving from now on activates a new cell,
        # which waits for this one to be done before it loads.
        self._svc.forget(self)
        self.state = CellState.PASSIVATING
        self._lifecycle("actor.passivated", {})
        await self._commit()
        self.state = CellState.ENDED
        self._svc.counted("passivations")

    # -- commits --------------------------------------------------------------

    def _lifecycle(self, type: str, data: dict[str, Any]) -> None:
        self.effects.events.append(NewEvent(type, dumps(data), self.wall_time()))

    def _snapshot(self) -> bytes:
        assert self._actor is not None
        try:
            return dumps(converter.unstructure(self._actor.state))
        except TypeError as exc:
            raise StateError(
                f"the state of {self.address!r} does not serialize to JSON: {exc}"
            ) from None

    async def _commit(self, *, cursor: int | None = None, **lifecycle: Any) -> None:
        bookkeeping = bool(lifecycle)  # a crash's record, not a step of the actor
        effects, self.effects = self.effects, Effects()
        state: bytes | None = None
        busy: bool | None = None
        if self._actor is not None and not lifecycle:
            snapshot = self._snapshot()
            state = snapshot if snapshot != self._last_state else None
            busy = self._actor.is_busy()
        status, final = lifecycle.pop("status", None), lifecycle.pop("final", None)
        if self._pending_dead_letter is not None:
            lifecycle["dead_letter"], self._pending_dead_letter = self._pending_dead_letter, None
        if effects.final_status is not None:
            status, final = effects.final_status, True
            effects.events.append(
                NewEvent("actor.stopped", dumps({"status": status}), self.wall_time())
            )
        commit = Commit(
            self.address,
            state=state,
            state_version=self.kind.state_version if state is not None else None,
            cursor=cursor,
            events=tuple(effects.events),
            sends=tuple(effects.sends),
            timers=tuple(effects.timers),
            cancel_timers=tuple(effects.cancel_timers),
            appends=tuple(effects.appends),
            status=status,
            final=final,
            busy=False if final else busy,
            **lifecycle,
        )
        try:
            result = await self._svc.store.commit(commit)
        except (StoreUnavailable, UnknownOutcome) as exc:
            # Until a commit goes through, inspect tells that this actor is stuck.
            self.commit_failure = str(exc)
            raise
        if not bookkeeping:
            self.commit_failure = None
        # Durable from here on: only now may anyone hear of it.
        self._svc.counted("commits")
        if commit.dead_letter is not None:
            self._svc.counted("dead_letters")
        if state is not None:
            self._last_state = state
        if cursor is not None:
            self._cursor = max(self._cursor, cursor)
            self._svc.cursor_advanced(self.address, cursor)
        if result.events and self._svc.listening(self.address):
            # Events are stored either way; with no subscriber, no one reads
            # the live copy, so it is not built.
            for seq, event in result.events:
                self._svc.publish(Event(self.address, seq, event.type, loads(event.data), event.at))
        if commit.sends:
            self._svc.route(commit.sends, result)
        if commit.timers:
            self._svc.timers_changed()
        if final:
            self.final_status = status
            self.state = CellState.ENDED

    def _dead_letter(self, message: Message, error: CrashReason) -> None:
        error_json = dumps({**error.to_json(), "seq": message.seq})
        self._lifecycle(
            "message.dead_lettered",
            {"seq": message.seq, "type": message.type, "error": error.summary()},
        )
        self._pending_dead_letter = (message.seq, error_json)

    def _died_handling(self, message: Message) -> CrashReason:
        if self._last_error is not None and self._last_error_seq == message.seq:
            data = loads(self._last_error)
            return CrashReason(data["type"], data["message"], data.get("traceback", ""))
        return CrashReason(
            "ProcessDied",
            f"the runtime process ended {message.attempt - 1} times while handling "
            f"message {message.seq} of {self.address}",
        )

    # -- crashes ----------------------------------------------------------------

    async def _crashed(self, exc: BaseException) -> bool:
        """Record a crash; True to restart, False when the actor ends here."""
        policy = self.kind.supervision
        reason = CrashReason.from_exception(exc)
        failed_seq = self._current.seq if self._current is not None else None
        self._current = None
        self.effects = Effects()  # what the failed attempt did is not committed
        self._actor = None
        error_json = dumps({**reason.to_json(), "seq": failed_seq})
        exceeded = self._restart_window.record(trio.current_time())
        if isinstance(exc, StateError) or policy.restart == "temporary":
            await self._fail(reason, error_json)
            return False
        if exceeded:
            if policy.on_intensity == "escalate":
                await self._fail(reason, error_json)
                raise Escalation(
                    f"{self.address} restarted more than {policy.intensity} times in "
                    f"{policy.period}s; escalating: {reason.summary()}",
                    reason,
                ) from exc
            if policy.on_intensity == "dead_letter" and failed_seq == self._cursor + 1:
                message = next(
                    iter(await self._svc.store.pending(self.address, self._cursor, 1)), None
                )
                if message is not None:
                    self._restart_window.reset()
                    self._dead_letter(Message.from_record(message), reason)
                    await self._commit_lifecycle(cursor=failed_seq, last_error=error_json)
                    return True
            await self._fail(reason, error_json)
            return False
        self.restarts += 1
        self._svc.counted("restarts")
        delay = policy.backoff(self.restarts)
        self._lifecycle("actor.crashed", {"error": reason.summary(), "restart_in": delay})
        await self._commit_lifecycle(restarts=1, last_error=error_json)
        await trio.sleep(delay)
        return True

    async def _fail(self, reason: CrashReason, error_json: bytes) -> None:
        self._lifecycle("actor.failed", {"error": reason.summary()})
        await self._commit_lifecycle(status="failed", final=True, last_error=error_json)

    async def _commit_lifecycle(self, *, cursor: int | None = None, **fields: Any) -> None:
        await self._commit(cursor=cursor, **fields)

    # -- restoring --------------------------------------------------------------

    def _instantiate(self, record: ActorRecord) -> Actor:
        cls = self.kind
        try:
            spec: Any = loads(record.spec) if record.spec is not None else None
            if cls.spec_type is not None and spec is not None:
                spec = converter.structure(spec, cls.spec_type)
            if record.state is None:
                state = cls.initial_state(spec)
            else:
                data = loads(record.state)
                if record.state_version != cls.state_version and isinstance(data, dict):
                    data = cls.migrate(data, record.state_version)
                state = (
                    data if cls.state_type is dict else converter.structure(data, cls.state_type)
                )
        except Exception as exc:
            detail = structure_error(exc)
            raise StateError(
                f"the snapshot of {self.address!r} (version {record.state_version}) does not "
                f"structure into {getattr(cls.state_type, '__qualname__', cls.state_type)} "
                f"(version {cls.state_version}): {detail}; fix the state class or migrate it "
                f"in {cls.__qualname__}.migrate()"
            ) from exc
        return cls(self.address, spec, state)
