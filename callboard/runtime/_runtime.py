"""The runtime: `open_runtime` and `Runtime`, the embedding API.

A message's way, top to bottom:

1. `Runtime.send` checks the address, type, key and body (the limits of
   `callboard.mailbox`) and serializes the body, before anything is written.
2. The store appends it to the recipient's mailbox (`Store.enqueue`, one
   group commit shared with every write queued meanwhile); once that is
   durable, the sender gets its `Ack` (seq, duplicate).
3. The runtime's `Directory` hands the message, now durable, to the
   recipient's `ActorCell` (activating one if it is not in memory: a new
   cell reads its mailbox from the store, so nothing depends on delivery).
4. The cell handles a batch of its mailbox in order and commits the
   actor's new snapshot, cursor, events, sends and timers in one atomic
   `Store.commit`.
5. Only after that commit is durable are its events published to the hub's
   subscribers (and so to gateway connections), its sends delivered to
   their recipients (back to step 3), and waiters on its cursor woken
   (`wait_handled`). Nothing is announced that was not recorded first.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any

import trio

from ..actors import Actor
from ..codec import loads
from ..errors import BadRequest, UnknownActor, UnknownKind
from ..mailbox import (
    Ack,
    Address,
    DeadLetter,
    Event,
    Message,
    check_key,
    check_type,
    encode_body,
)
from ..store import Enqueue, NodeRecord, Store, StoredAck
from ..supervisor import Control
from ..views import ActorInfo, ActorView, MessageOutcome, PendingApproval, TaskOperations
from . import _attach, _lifecycle, _operator, _views
from ._config import RuntimeConfig
from ._directory import Directory, RuntimeState
from ._hub import Hub, OnLag, Pace, Subscription
from ._retention import Retention, SteadyWallClock
from ._statistics import RuntimeStatistics, collect

__all__ = ["Runtime", "RuntimeState"]

log = logging.getLogger("callboard.runtime")

# Actors read from the store at once by `Runtime.list` (it reads page after page).
_LIST_PAGE = 10_000


class Runtime:
    """A running set of actors on one data directory. Make one with `open_runtime`."""

    def __init__(
        self,
        store: Store,
        kinds: Iterable[type[Actor]],
        *,
        config: RuntimeConfig,
        clock: Callable[[], float],
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.config = config
        self.settings: Mapping[str, Any] = MappingProxyType(
            {"data_dir": str(store.directory), **(settings or {})}
        )
        """What every actor sees in ``ctx.settings``, under its kind's own."""
        self._store = store
        self._hub = Hub(
            store,
            buffer=config.subscriber_buffer,
            page=config.replay_page,
            page_bytes=config.replay_page_bytes,
        )
        self._cells = Directory(
            store, self._hub, kinds, config=config, clock=clock, settings=self.settings
        )
        # Ages that decide a deletion (keys, retention) go by this clock; keys are
        # stamped by its other bound (see open_runtime).
        self._steady = SteadyWallClock(clock)
        self.retention = Retention(
            store,
            clock=self._steady,
            keep_events=config.event_retention,
            event_max_age=config.event_max_age,
            stopped_retention=config.stopped_retention,
            dead_letter_retention=config.dead_letter_retention,
            batch=config.retention_batch,
            interval=config.retention_interval,
        )
        """Retention passes: one runs every ``retention_interval``, `run_pass` runs one now."""
        self.closing = trio.Event()
        """Set when the runtime starts to close, before any actor is cancelled."""
        self._tasks: TaskOperations | None = None

    @property
    def state(self) -> RuntimeState:
        """Where the runtime stands (`RuntimeState`)."""
        return self._cells.state

    @property
    def data_dir(self) -> Path:
        return self._store.directory

    # -- kinds -----------------------------------------------------------------

    def register(self, cls: type[Actor]) -> None:
        """Add an actor kind (its ``kind`` must be new, or this same class)."""
        self._cells.register(cls)

    @property
    def kinds(self) -> dict[str, type[Actor]]:
        return self._cells.kinds

    def check_kind(self, kind: str) -> None:
        """Raise `UnknownKind` unless ``kind`` is registered."""
        self._cells.check_kind(kind)

    def settings_for(self, kind: str) -> Mapping[str, Any]:
        """The ``ctx.settings`` of actors of ``kind``: the runtime's, under the kind's own."""
        return self._cells.settings_for(kind)

    def _kind_of(self, address: str) -> type[Actor]:
        return self._cells.kind_of(address)

    async def would_create(self, address: str) -> bool:
        """True when a message to ``address`` would bring a new actor into being
        (a virtual kind with no actor there yet); for quotas, so not a promise."""
        if address in self._cells.cells:
            return False  # the common case on the hot path: one dict lookup
        cls = self._cells.kind_named(address.partition("/")[0])
        if cls is None or not cls.virtual:
            return False
        return await self._store.actor(address) is None

    # -- the embedding API -------------------------------------------------------

    @property
    def tasks(self) -> TaskOperations:
        """Autonomous tasks on this runtime (`callboard.Tasks`): spawn, send, wait,
        cancel. Offered by the kind registered as ``task`` (`Actor.caller`), e.g.
        the agent's, from `callboard.agent.builtin_kinds`."""
        if self._tasks is None:
            cls = self._cells.kind_named("task")
            self._tasks = cls.caller(self) if cls is not None else None
            if self._tasks is None:
                raise UnknownKind(
                    "rt.tasks needs a 'task' kind that offers it: open the runtime with "
                    "kinds=callboard.agent.builtin_kinds(...)"
                )
        return self._tasks

    def is_active(self, address: str) -> bool:
        """Whether this runtime, open, is driving ``address`` (it is in memory here)."""
        return self._cells.open and address in self._cells.cells

    @property
    def active_count(self) -> int:
        return len(self._cells.cells)

    def wall_time(self) -> float:
        """The runtime's wall clock (seconds since the epoch), as timers read it."""
        return self._cells.wall_time()

    async def send(
        self, to: str, type: str, body: Any = None, *, key: str | None = None,
        sender: str | None = None,
    ) -> Ack:  # fmt: skip
        """Deliver a message to ``to``'s mailbox; returns once it is durable.

        With a ``key``, a repeated send returns the first ack with
        ``duplicate=True`` and is not delivered again. Cancel-atomic until
        the write is queued; after that it completes.
        """
        # An active actor's address was checked when its cell was made, and
        # a kind once registered stays: only the others are parsed again.
        cell = self._cells.cells.get(to) if isinstance(to, str) else None
        cls = cell.kind if cell is not None else self._kind_of(to)
        item = self._message(cls, to, type, body, key, sender)
        (result,) = await self._store.enqueue([item])
        if isinstance(result, Exception):
            raise result
        return self._accepted(item, result)

    def send_nowait(
        self, to: str, type: str, body: Any = None, *, key: str | None = None,
        sender: str | None = None, then: Callable[[Ack | Exception], None],
    ) -> bool:  # fmt: skip
        """`send` to an active actor without waiting: ``then`` hears the `Ack`
        once the message is durable, or the exception that refused it, on the
        trio thread. Bad input raises here, as `send` raises it.

        Returns False, having done nothing, when the send would have to wait
        (the actor is not active, or the write queue is full): `send` then.
        A server answers a request this way without a task per request.
        """
        cell = self._cells.cells.get(to) if isinstance(to, str) else None
        if cell is None:
            return False
        item = self._message(cell.kind, to, type, body, key, sender)

        def stored(result: StoredAck | Exception) -> None:
            then(result if isinstance(result, Exception) else self._accepted(item, result))

        return self._store.enqueue_soon(item, stored)

    def _message(
        self, cls: type[Actor], to: str, kind_of_message: str, body: Any, key: str | None,
        sender: str | None,
    ) -> Enqueue:  # fmt: skip
        """The message to store for a send to ``to`` (of kind ``cls``); raises
        the error that names what is wrong with it, or that the runtime closed."""
        check_type(kind_of_message, what=f"the type of a message to {to!r}")
        if key is not None:
            check_key(key, what=f"the idempotency key of a message to {to!r}")
        data = encode_body(body, what=f"the body of {kind_of_message!r} to {to!r}")
        self._cells.check_open()
        return Enqueue(to, kind_of_message, data, sender, key, cls.kind if cls.virtual else None)

    def _accepted(self, item: Enqueue, result: StoredAck) -> Ack:
        """``item`` is durable: hand it to its actor (a duplicate was already)."""
        if not result.duplicate:
            self._cells.counts["accepted"] += 1
            message = Message(
                result.seq, item.type, loads(item.body), item.sender, item.key,
                at=self._cells.wall_time(),
            )  # fmt: skip
            self._cells.deliver(item.address, message)
        return Ack(result.seq, result.duplicate)

    async def spawn(self, kind: str, spec: Any = None, name: str | None = None) -> Address:
        """Create an actor of ``kind`` from ``spec`` and activate it.

        The address's ``existed`` is True when an actor with the same spec was
        already there; a different spec raises `SpawnConflict`.
        """
        return await _lifecycle.spawn(self._cells, kind, spec, name)

    async def stop(self, address: str) -> str:
        """Stop an actor; returns its final status once it has stopped."""
        return await _lifecycle.stop(self._cells, address)

    async def inspect(self, address: str) -> ActorView:
        """The last committed snapshot and the bookkeeping around it."""
        await trio.lowlevel.checkpoint()
        return await _views.inspect(self._cells, address)

    # -- live attach: OTP's sys:get_state, replace_state, suspend, resume -------------

    async def get_state(self, address: str) -> Any:
        """The actor's last committed state, as JSON."""
        await trio.lowlevel.checkpoint()
        return await _attach.state(self._cells, address)

    async def replace_state(self, address: str, state: Any) -> int:
        """Replace the actor's state with ``state`` (JSON, or a ``state_type``
        instance) between two of its batches, as a commit of its own; returns
        the seq of its ``actor.state_replaced`` event. A state its kind's
        ``state_type`` does not hold exactly is refused (`BadRequest`, naming
        the field) and nothing changes."""
        checked = _attach.checked_state(self._kind_of(address), address, state)
        return int(await _attach.control(self._cells, address, Control("replace_state", checked)))

    async def pause(self, address: str) -> str:
        """Hold the actor's mailbox, durably (restarts keep it); returns ``"paused"``
        once its current batch is committed. Messages are still accepted and stored."""
        return str(await _attach.control(self._cells, address, Control("pause")))

    async def resume(self, address: str) -> str:
        """Let a paused actor handle its mailbox again; returns ``"active"``."""
        return str(await _attach.control(self._cells, address, Control("resume")))

    async def step(self, address: str) -> int | None:
        """Hand a paused actor its next message; returns its seq once handled and
        committed (None: its mailbox is empty). `BadRequest` if it is not paused,
        `ActorCrashed` if the message crashed its handler (its supervision decides
        what follows; restarted, it stays paused)."""
        seq = await _attach.control(self._cells, address, Control("step"))
        return None if seq is None else int(seq)

    async def list(self, kind: str | None = None, status: str | None = None) -> list[ActorInfo]:
        """Every actor (of ``kind``, with ``status``) and its mailbox size, in address order."""
        rows: list[ActorInfo] = []
        after: str | None = None
        while True:
            page, after = await self.list_page(kind, status, after=after, limit=_LIST_PAGE)
            rows.extend(page)
            if after is None:
                return rows

    async def list_page(
        self, kind: str | None = None, status: str | None = None, *, after: str | None = None,
        limit: int = _LIST_PAGE,
    ) -> tuple[builtins.list[ActorInfo], str | None]:  # fmt: skip
        """At most ``limit`` actors past the address ``after``, in address order,
        and the ``after`` of the next page (None when there is no more)."""
        await trio.lowlevel.checkpoint()
        return await _views.list_page(self._cells, kind, status, after=after, limit=limit)

    @asynccontextmanager
    async def subscribe(
        self, actor: str, after: int | None = None, *, on_lag: OnLag = "resume",
        buffer: int | None = None, pace: Pace | None = None,
    ) -> AsyncIterator[Subscription]:  # fmt: skip
        """Events of ``actor``: with ``after``, every stored event with a greater
        seq, then live ones, with no gap and no duplicate. ``actor`` may be
        ``KIND/*`` or ``*`` (live only). Raises `Pruned` (on entry, or from the
        iteration if retention overtakes a replay) when some of those events
        are no longer held.

        Stored events are read in pages of at most ``replay_page`` events and
        ``replay_page_bytes`` bytes (`RuntimeConfig`), one page held at a
        time; ``pace``, if given, is awaited before each page is read (e.g.
        until the queue the events go to has room)."""
        if actor != "*":
            kind, _, name = actor.partition("/")
            if name == "*":
                self.check_kind(kind)
            elif not self._kind_of(actor).virtual and await self._store.actor(actor) is None:
                raise UnknownActor(f"there is no actor at {actor!r}; spawn it first")
        if after is not None and (actor == "*" or actor.endswith("/*")):
            raise BadRequest("'after' cannot be used with a pattern: patterns are live only")
        if after is not None:
            await self._store.check_held(actor, after)  # Pruned: retention removed some of them
        # A live-only subscription to one actor starts after its head, so a lag
        # before anything was delivered still says exactly where to resume.
        head = (
            None
            if after is not None or actor == "*" or actor.endswith("/*")
            else await self.head(actor)
        )
        sub = self._hub.subscribe(actor, after, on_lag=on_lag, buffer=buffer, head=head, pace=pace)
        try:
            yield sub
        finally:
            sub.close()

    async def read_log(
        self, address: str, log: str, start: int = 0, limit: int = 1000
    ) -> builtins.list[Any]:
        """Entries ``start`` on (at most ``limit``) of the actor's log ``log``
        (what its handlers appended with ``ctx.append``), decoded."""
        self._kind_of(address)
        return [loads(item) for item in await self._store.read_log(address, log, start, limit)]

    async def has_actor(self, address: str) -> bool:
        """Whether an actor was spawned (or created) at ``address`` and not removed."""
        return await self._store.actor(address) is not None

    async def head(self, address: str) -> int:
        """The seq of ``address``'s last stored event (0 before the first)."""
        record = await self._store.actor(address)
        return record.event_head if record is not None else 0

    def statistics(self) -> RuntimeStatistics:
        return collect(self._store, self._cells, self._hub, self.retention.statistics())

    def tap(self, types: Iterable[str], fn: Callable[[Event], None]) -> None:
        """Call ``fn`` with each event of ``types`` of any actor, once, right after
        the commit that stored it (never on a replay); for metrics and logs.
        ``fn`` runs on the trio thread inside the commit's announcement: it must
        be quick; what it raises is logged and goes no further. See `Hub.tap`."""
        self._hub.tap(types, fn)

    async def writable(self) -> bool:
        """Whether the store takes writes now (`Store.writable`; for readiness probes)."""
        return self._cells.open and await self._store.writable()

    async def nodes(self) -> builtins.list[NodeRecord]:
        """The nodes sharing this runtime's store, each with its last heartbeat
        and the actors it owns (none on one node: SQLite)."""
        return await self._store.nodes()

    async def actor_counts(self) -> dict[str, int]:
        """How many actors have each stored status (for metrics)."""
        return await self._store.status_counts()

    async def dead_letter_count(self) -> int:
        return await self._store.dead_letter_count()

    async def dead_letters(self, address: str | None = None) -> builtins.list[DeadLetter]:
        """The messages set aside (of ``address``), oldest first."""
        return [DeadLetter.from_record(r) for r in await self._store.dead_letters(address)]

    async def requeue(self, dead_letter_id: int) -> Ack:
        """Put a dead letter back at the end of its actor's mailbox."""
        self._cells.check_open()
        result = await self._store.requeue(dead_letter_id)
        if isinstance(result, LookupError):
            raise BadRequest(f"{result}; dead_letters lists them") from None
        if isinstance(result, Exception):
            raise result
        self._cells.poke(result.address)
        return Ack(result.seq, result.duplicate)

    async def wait_handled(self, address: str, seq: int) -> None:
        """Wait until ``address`` has committed the handling of message ``seq``;
        `ActorStopped` if it ended before it did."""
        await _operator.wait_handled(self._cells, address, seq)

    # -- what an operator asks (`_operator`) -------------------------------------------

    async def approvals(self, address: str | None = None) -> builtins.list[PendingApproval]:
        """The tool calls waiting for a person's answer (of ``address``), as committed.
        Answer one with ``send(address, "approve", {"call_id", "approved", "reason"})``."""
        return await _operator.approvals(self._cells, address)

    async def delete(self, address: str) -> None:
        """Remove an actor that has ended, with its events, logs, keys and timers, so
        that its name can be spawned again; `BadRequest` naming its status otherwise."""
        await _operator.delete(self._cells, address)

    async def wait_outcome(self, address: str, seq: int, after: int = 0) -> MessageOutcome:
        """Wait until ``address`` has handled message ``seq`` and say how it came out
        (handled, rejected, dead-lettered, or not handled: the actor ended first);
        ``after``, its event head before the send, bounds the search for a rejection."""
        return await _operator.wait_outcome(self._cells, address, seq, after)
