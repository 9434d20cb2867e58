"""The runtime: `open_runtime` and the embedding API on top of store, cells and hub.

A message's way: `Runtime.send` validates and serializes it, the store makes
it durable (group commit), the ack goes back to the sender, and the message
is delivered in memory to its actor's cell (activating it if needed). The
cell handles it and commits; only then are the commit's events published
to subscribers and its sends routed on.
"""

from __future__ import annotations

import builtins
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs
import orjson
import trio

from ..actors import Actor
from ..codec import converter, loads, structure_error
from ..errors import (
    BadRequest,
    RuntimeClosed,
    SpawnConflict,
    UnknownActor,
    UnknownKind,
)
from ..mailbox import (
    KIND_PATTERN,
    Ack,
    Address,
    DeadLetter,
    Event,
    Message,
    check_key,
    check_type,
    encode_body,
    new_name,
    parse_address,
)
from ..store import CommitResult, Enqueue, SqliteStore, StoredAck, open_sqlite_store
from ..supervisor import ActorCell
from ..views import ActorInfo, ActorView, TaskOperations
from ._config import RuntimeConfig
from ._hub import Hub, OnLag, Pace, Subscription
from ._retention import Retention, SteadyWallClock

__all__ = [
    "TIMER_RECHECK",
    "ActorInfo",
    "ActorView",
    "Runtime",
    "RuntimeStatistics",
    "open_runtime",
]

log = logging.getLogger("callboard.runtime")

# Actors read from the store at once by `Runtime.list` (it reads page after page).
_LIST_PAGE = 10_000

TIMER_RECHECK = 1.0
"""Seconds the timer service waits at most before it reads the wall clock again.

Timers are due by the wall clock, but the service waits on trio's clock,
which does not jump: after the wall clock jumps forward (NTP, a suspended
machine, a test's clock), a timer fires within about this long of the wall
clock passing its due time, not after the whole wait it computed before."""


@attrs.frozen
class RuntimeStatistics:
    """Counters since the runtime opened, and gauges now (for metrics)."""

    messages_accepted: int
    commits: int
    activations: int
    passivations: int
    restarts: int
    dead_letters: int
    active: int
    subscribers: int
    lagged: int
    store_batches: int
    store_operations: int
    store_largest_batch: int
    store_seconds: float
    store_healthy: bool = True
    """False from an I/O error at COMMIT until the store has recovered (fail-stop)."""
    store_recoveries: int = 0
    retention_passes: int = 0
    events_pruned: int = 0
    actors_removed: int = 0
    dead_letters_expired: int = 0
    pages_freed: int = 0
    """Free database pages retention gave back to the file system."""


def _spec_bytes(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


class Runtime:
    """A running set of actors on one data directory. Make one with `open_runtime`."""

    def __init__(
        self,
        store: SqliteStore,
        kinds: Iterable[type[Actor]],
        *,
        config: RuntimeConfig,
        clock: Callable[[], float],
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.hub = Hub(
            store,
            buffer=config.subscriber_buffer,
            page=config.replay_page,
            page_bytes=config.replay_page_bytes,
        )
        self.inbox_limit = config.inbox_limit
        self.batch_max = config.batch_max
        self.passivation_slots = trio.Semaphore(config.passivating_at_once)
        self.passivate_after = config.passivate_after
        self._clock = clock
        # Ages that decide a deletion (keys, retention) go by this clock; keys are
        # stamped by its other bound (_key_clock).
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
        self.settings: Mapping[str, Any] = MappingProxyType(
            {"data_dir": str(store.directory), **(settings or {})}
        )
        """What every actor sees in ``ctx.settings``, under its kind's own."""
        self._kinds: dict[str, type[Actor]] = {}
        self._kind_settings: dict[str, Mapping[str, Any]] = {}
        for cls in kinds:
            self.register(cls)
        self._cells: dict[str, ActorCell] = {}
        self._leaving: dict[str, ActorCell] = {}
        self._cursor_waiters: dict[str, list[tuple[int, trio.Event]]] = {}
        self._nursery: trio.Nursery | None = None
        self._timers_wakeup = trio.Event()
        self._closed = False
        self.closing = trio.Event()
        """Set when the runtime starts to close, before any actor is cancelled."""
        self._counts: Counter[str] = Counter()
        self._tasks: TaskOperations | None = None

    # -- kinds -----------------------------------------------------------------

    def register(self, cls: type[Actor]) -> None:
        kind = getattr(cls, "kind", None)
        if not isinstance(kind, str) or not KIND_PATTERN.fullmatch(kind):
            raise BadRequest(
                f"{cls.__qualname__}.kind must match {KIND_PATTERN.pattern}, got {kind!r}"
            )
        if kind in self._kinds and self._kinds[kind] is not cls:
            raise BadRequest(f"two actor classes claim kind {kind!r}")
        self._kinds[kind] = cls
        own = cls.kind_settings
        self._kind_settings[kind] = (
            MappingProxyType({**self.settings, **own}) if own else self.settings
        )

    def settings_for(self, kind: str) -> Mapping[str, Any]:
        """The ``ctx.settings`` of actors of ``kind``: the runtime's, under the kind's own."""
        self.check_kind(kind)
        return self._kind_settings[kind]

    @property
    def kinds(self) -> dict[str, type[Actor]]:
        return dict(self._kinds)

    def check_kind(self, kind: str) -> None:
        if kind not in self._kinds:
            known = ", ".join(sorted(self._kinds)) or "none"
            raise UnknownKind(f"there is no actor kind {kind!r} (known kinds: {known})")

    def create_kind(self, kind: str) -> str | None:
        """The kind to create a missing actor as (virtual kinds), else None."""
        self.check_kind(kind)
        return kind if self._kinds[kind].virtual else None

    def would_create(self, address: str) -> bool:
        """True when a message to ``address`` would bring a new actor into being
        (a virtual kind with no actor there yet); for quotas, so not a promise."""
        if address in self._cells:
            return False  # the common case on the hot path: one dict lookup
        kind, _ = parse_address(address)
        cls = self._kinds.get(kind)
        if cls is None or not cls.virtual:
            return False
        return self.store.actor(address) is None

    def _kind_of(self, address: str) -> type[Actor]:
        kind, _ = parse_address(address)
        self.check_kind(kind)
        return self._kinds[kind]

    # -- the embedding API -------------------------------------------------------

    @property
    def tasks(self) -> TaskOperations:
        """Autonomous tasks on this runtime (`callboard.Tasks`): spawn, send, wait,
        cancel. Offered by the kind registered as ``task`` (`Actor.caller`), e.g.
        the agent's, from `callboard.agent.builtin_kinds`."""
        if self._tasks is None:
            cls = self._kinds.get("task")
            self._tasks = cls.caller(self) if cls is not None else None
            if self._tasks is None:
                raise UnknownKind(
                    "rt.tasks needs a 'task' kind that offers it: open the runtime with "
                    "kinds=callboard.agent.builtin_kinds(...)"
                )
        return self._tasks

    def is_active(self, address: str) -> bool:
        """Whether this runtime, open, is driving ``address`` (it is in memory here)."""
        return not self._closed and address in self._cells

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
        cell = self._cells.get(to) if isinstance(to, str) else None
        cls = cell.kind if cell is not None else self._kind_of(to)
        check_type(type, what=f"the type of a message to {to!r}")
        if key is not None:
            check_key(key, what=f"the idempotency key of a message to {to!r}")
        data = encode_body(body, what=f"the body of {type!r} to {to!r}")
        self._check_open()
        item = Enqueue(to, type, data, sender, key, cls.kind if cls.virtual else None)
        (result,) = await self.store.enqueue([item])
        if isinstance(result, Exception):
            raise result
        if not result.duplicate:
            self._counts["accepted"] += 1
            self._deliver(
                to, Message(result.seq, type, loads(data), sender, key, at=self.wall_time())
            )
        return Ack(result.seq, result.duplicate)

    async def spawn(self, kind: str, spec: Any = None, name: str | None = None) -> Address:
        """Create an actor of ``kind`` from ``spec`` and activate it.

        The address's ``existed`` is True when an actor with the same spec was
        already there; a different spec raises `SpawnConflict`.
        """
        self.check_kind(kind)
        cls = self._kinds[kind]
        address = Address(f"{kind}/{name if name is not None else new_name()}")
        spec_json = _spec_bytes(self._structure_spec(cls, spec, address))
        self._check_open()
        existed, stored = await self.store.spawn(address, kind, spec_json)
        if existed and stored is not None and stored != spec_json:
            raise SpawnConflict(
                f"{address!r} exists with a different spec; pick another name or stop it first"
            )
        if not existed:
            self._activate(address)
        return Address(address, existed=existed)

    def _structure_spec(self, cls: type[Actor], spec: Any, address: str) -> Any:
        if cls.spec_type is None:
            if spec is not None and not isinstance(spec, dict):
                raise BadRequest(f"the spec for {address!r} must be a JSON object, got {spec!r}")
            encode_body(spec, what=f"the spec for {address!r}")
            cls.check_spec(spec, self._kind_settings[cls.kind])
            return spec
        try:
            typed = spec if isinstance(spec, cls.spec_type) else converter.structure(
                spec if spec is not None else {}, cls.spec_type
            )  # fmt: skip
        except Exception as exc:
            raise BadRequest(
                f"the spec for {address!r} is not a valid {cls.spec_type.__qualname__}: "
                f"{structure_error(exc)}"
            ) from None
        cls.check_spec(typed, self._kind_settings[cls.kind])
        return converter.unstructure(typed)

    async def stop(self, address: str) -> str:
        """Stop an actor; returns its final status once it has stopped."""
        self._kind_of(address)
        record = self.store.actor(address)
        if record is None:
            raise UnknownActor(f"there is no actor at {address!r}")
        if record.final:
            return record.status
        cell = self._cells.get(address)
        if cell is None:
            cell = self._activate(address, stop=True)
        else:
            cell.request_stop()
        await cell.done.wait()
        return cell.final_status or "stopped"

    async def inspect(self, address: str) -> ActorView:
        """The last committed snapshot and the bookkeeping around it."""
        await trio.lowlevel.checkpoint()
        cls = self._kind_of(address)
        record = self.store.actor(address)
        if record is None:
            raise UnknownActor(f"there is no actor at {address!r}")
        if record.state is not None:
            state = loads(record.state)
        else:
            spec = loads(record.spec) if record.spec else None
            if cls.spec_type is not None and spec is not None:
                spec = converter.structure(spec, cls.spec_type)
            state = converter.unstructure(cls.initial_state(spec))
        return ActorView(
            actor=address,
            kind=record.kind,
            status=self._status(address, record.status, record.final),
            state=state,
            cursor=record.cursor,
            mailbox=record.unhandled,
            head=record.event_head,
            restarts=record.restarts,
            last_error=self._last_error(address, record.last_error),
        )

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
        if limit < 1:
            raise BadRequest(f"a page of actors needs a limit >= 1, got {limit!r}")
        if status == "active":
            return self._active_page(kind, after, limit)
        # Stored status: "active" is this runtime's own knowledge, so a page
        # filtered by status may come out shorter than ``limit``.
        records = self.store.actors(kind, status=status, after=after, limit=limit + 1)
        more = len(records) > limit
        del records[limit:]
        rows = []
        for record in records:
            info = ActorInfo(
                record.address,
                self._status(record.address, record.status, record.final),
                record.unhandled,
                record.restarts,
            )
            if status is None or info.status == status:
                rows.append(info)
        return rows, records[-1].address if more else None

    def _active_page(
        self, kind: str | None, after: str | None, limit: int
    ) -> tuple[builtins.list[ActorInfo], str | None]:
        prefix = f"{kind}/" if kind is not None else ""
        addresses = sorted(
            a for a in self._cells if a.startswith(prefix) and (after is None or a > after)
        )
        rows: list[ActorInfo] = []
        for address in addresses:
            record = self.store.actor(address)
            if record is None or record.final:
                continue
            if len(rows) == limit:
                return rows, rows[-1].actor
            rows.append(ActorInfo(address, "active", record.unhandled, record.restarts))
        return rows, None

    def _last_error(self, address: str, stored: bytes | None) -> dict[str, Any] | None:
        cell = self._cells.get(address)
        if cell is not None and cell.commit_failure is not None:
            return {"error": cell.commit_failure, "during": "commit"}
        return loads(stored) if stored else None

    def _status(self, address: str, stored: str, final: bool) -> str:
        cell = self._cells.get(address)
        if not final and cell is not None:
            # "failing": in memory, but the store refuses its commits (a full disk).
            return "failing" if cell.commit_failure is not None else "active"
        return stored

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
            elif not self._kind_of(actor).virtual and self.store.actor(actor) is None:
                raise UnknownActor(f"there is no actor at {actor!r}; spawn it first")
        if after is not None and (actor == "*" or actor.endswith("/*")):
            raise BadRequest("'after' cannot be used with a pattern: patterns are live only")
        if after is not None:
            self.store.check_held(actor, after)  # Pruned: retention removed some of them
        # A live-only subscription to one actor starts after its head, so a lag
        # before anything was delivered still says exactly where to resume.
        head = (
            None if after is not None or actor == "*" or actor.endswith("/*") else self.head(actor)
        )
        sub = self.hub.subscribe(actor, after, on_lag=on_lag, buffer=buffer, head=head, pace=pace)
        try:
            yield sub
        finally:
            sub.close()

    def head(self, address: str) -> int:
        record = self.store.actor(address)
        return record.event_head if record is not None else 0

    def statistics(self) -> RuntimeStatistics:
        store = self.store.statistics()
        counts = self._counts
        retained = self.retention.statistics()
        return RuntimeStatistics(
            messages_accepted=counts["accepted"],
            commits=counts["commits"],
            activations=counts["activations"],
            passivations=counts["passivations"],
            restarts=counts["restarts"],
            dead_letters=counts["dead_letters"],
            active=len(self._cells),
            subscribers=self.hub.subscriber_count,
            lagged=self.hub.lagged_total,
            store_batches=store.batches,
            store_operations=store.operations,
            store_largest_batch=store.largest_batch,
            store_seconds=store.commit_seconds_total,
            store_healthy=self.store.healthy,
            store_recoveries=store.recoveries,
            retention_passes=retained.passes,
            events_pruned=retained.events,
            actors_removed=retained.actors,
            dead_letters_expired=retained.dead_letters,
            pages_freed=retained.pages,
        )

    def _store_recovered(self) -> None:
        """The store reopened after a fail-stop: the WAL may hold writes whose
        senders were told the outcome is unknown, so every active mailbox is
        read again from the store."""
        for cell in list(self._cells.values()):
            cell.poke()
        self._timers_wakeup.set()

    def counted(self, what: str, n: int = 1) -> None:
        """A cell reports a lifecycle step: commit, passivation, restart, dead letter."""
        self._counts[what] += n

    def dead_letters(self, address: str | None = None) -> builtins.list[DeadLetter]:
        return [DeadLetter.from_record(r) for r in self.store.dead_letters(address)]

    async def requeue(self, dead_letter_id: int) -> Ack:
        """Put a dead letter back at the end of its actor's mailbox."""
        self._check_open()
        result = await self.store.requeue(dead_letter_id)
        if isinstance(result, Exception):
            raise result
        self._poke(result.address)
        return Ack(result.seq, result.duplicate)

    async def wait_handled(self, address: str, seq: int) -> None:
        """Wait until ``address`` has committed the handling of message ``seq``."""
        record = self.store.actor(address)
        if record is not None and record.cursor >= seq:
            return
        self._check_open()
        event = trio.Event()
        self._cursor_waiters.setdefault(address, []).append((seq, event))
        await event.wait()
        if self._closed:
            raise RuntimeClosed(f"the runtime closed before {address} handled message {seq}")

    async def read_log(
        self, address: str, log: str, start: int = 0, limit: int = 1000
    ) -> builtins.list[Any]:
        """At most ``limit`` items of ``address``'s log ``log`` (`Context.append`)
        from index ``start`` on, each decoded from its JSON."""
        await trio.lowlevel.checkpoint()
        self._kind_of(address)
        return [loads(item) for item in self.store.read_log(address, log, start, limit)]

    # -- what cells ask of the runtime ---------------------------------------------

    def wall_time(self) -> float:
        return self._clock()

    def publish(self, event: Event) -> None:
        self.hub.publish(event)

    def listening(self, address: str) -> bool:
        return self.hub.listening(address)

    def route(self, sends: tuple[Enqueue, ...], result: CommitResult) -> None:
        for item, ack in zip(sends, result.acks, strict=True):
            if isinstance(ack, StoredAck) and not ack.duplicate:
                self._deliver(
                    item.address,
                    Message(ack.seq, item.type, loads(item.body), item.sender, item.key),
                )

    def timers_changed(self) -> None:
        self._timers_wakeup.set()

    def forget(self, cell: ActorCell) -> None:
        if self._cells.get(cell.address) is cell:
            del self._cells[cell.address]
            self._leaving[cell.address] = cell

    def gone(self, cell: ActorCell) -> None:
        if self._cells.get(cell.address) is cell:
            del self._cells[cell.address]
        if self._leaving.get(cell.address) is cell:
            del self._leaving[cell.address]

    def predecessor(self, cell: ActorCell) -> ActorCell | None:
        before = self._leaving.get(cell.address)
        return before if before is not cell else None

    def cursor_advanced(self, address: str, cursor: int) -> None:
        waiters = self._cursor_waiters.get(address)
        if not waiters:
            return
        remaining = []
        for seq, event in waiters:
            if seq <= cursor:
                event.set()
            else:
                remaining.append((seq, event))
        if remaining:
            self._cursor_waiters[address] = remaining
        else:
            del self._cursor_waiters[address]

    # -- delivery and activation ----------------------------------------------------

    def _close(self) -> None:
        """No more work: wake everyone waiting on this runtime so they learn it closed."""
        self._closed = True
        self.closing.set()
        for waiters in self._cursor_waiters.values():
            for _, event in waiters:
                event.set()
        self._cursor_waiters.clear()
        self.hub.close_all()

    def _check_open(self) -> None:
        if self._closed or self._nursery is None:
            raise RuntimeClosed("the runtime is closed; nothing was sent")

    def _deliver(self, address: str, message: Message) -> None:
        cell = self._cells.get(address)
        if cell is not None:
            cell.deliver(message)
        elif not self._closed:
            self._activate(address)

    def _poke(self, address: str) -> None:
        cell = self._cells.get(address)
        if cell is not None:
            cell.poke()
        elif not self._closed:
            self._activate(address)

    def _activate(self, address: str, *, stop: bool = False) -> ActorCell:
        if self._nursery is None or self._closed:
            raise RuntimeClosed("the runtime is closed")
        cell = ActorCell(address, self._kind_of(address), self, stop=stop)
        self._cells[address] = cell
        self._counts["activations"] += 1
        cell.fill()
        self._nursery.start_soon(cell.run, name=f"actor {address}")
        return cell

    @property
    def active_count(self) -> int:
        return len(self._cells)

    # -- background services ------------------------------------------------------------

    async def _run_timers(self) -> None:
        while True:
            self._timers_wakeup = trio.Event()
            due = self.store.next_timer_due()
            if due is None:
                await self._timers_wakeup.wait()
                continue
            delay = due - self.wall_time()
            if delay > 0:
                # Never fires early: a timer is due when the wall clock says
                # so, however it jumped meanwhile (see TIMER_RECHECK).
                # At least a millisecond: with the wall clock standing still (a
                # test's, or one held back) a timer due a hair ahead would
                # otherwise spin this loop without ever letting go of the CPU.
                with trio.move_on_after(min(max(delay, 0.001), TIMER_RECHECK)):
                    await self._timers_wakeup.wait()
                continue
            for ack in await self.store.fire_timers():
                if isinstance(ack, StoredAck) and not ack.duplicate:
                    self._poke(ack.address)

    async def _sweep_idle(self) -> None:
        """Passivate actors idle for ``passivate_after``: memory follows the
        working set, not the number of actors ever touched."""
        period = self.config.passivate_after
        while True:
            await trio.sleep(max(period / 4, 0.001))
            now = trio.current_time()
            for cell in list(self._cells.values()):
                if cell.idle_since is not None and now - cell.idle_since >= period:
                    cell.request_passivation()

    def _key_clock(self) -> float:
        """The stamp of an idempotency key: the wall clock, or where trio's clock
        has brought the wall clock of the opening if the wall clock is behind it.

        The pruner measures a key's age by the other one, whichever of the two
        ran less since the runtime opened, so no key is forgotten before trio's
        clock has run its window: neither after a jump forward of the wall clock
        (the key's stamp looks old), nor after one back and its correction (the
        stamps of keys sent meanwhile would be hours in the past, and a send
        retried just after would be delivered twice). (Trio's clock stands still
        while the machine is suspended: keys then stay longer, never shorter.)
        """
        return self._steady.never_behind()

    async def _prune_keys(self) -> None:
        # By the steady clock: a jump forward of the wall clock alone would
        # forget keys still in their window, and a send retried just after
        # would be delivered twice (see SteadyWallClock).
        while True:
            await trio.sleep(max(60.0, self.config.key_window / 10))
            await self.store.prune_keys(self.config.key_window, now=self._steady())

    def _recover(self) -> int:
        count = 0
        for address in self.store.addresses_with_work(self.wall_time()):
            kind = address.split("/", 1)[0]
            if kind not in self._kinds:
                log.warning("not recovering %s: no kind %r is registered", address, kind)
                continue
            if address not in self._cells:
                self._activate(address)
                count += 1
        return count


@asynccontextmanager
async def open_runtime(
    data: str | Path,
    *,
    kinds: Sequence[type[Actor]] = (),
    config: RuntimeConfig | None = None,
    clock: Callable[[], float] = time.time,
    settings: Mapping[str, Any] | None = None,
) -> AsyncIterator[Runtime]:
    """Open the data directory, recover what a previous process left, run until exit.

    Only one runtime may own ``data`` at a time (`DataDirectoryLocked`).
    On exit every actor is cancelled where it stands; nothing durable depends
    on that: the next runtime on ``data`` resumes from the last commits.
    ``clock`` is the wall clock for timers (tests pass one driven by trio's).
    Only the classes in ``kinds`` are registered: the agent's kinds come from
    `callboard.agent.builtin_kinds`. ``settings`` reach every actor as
    ``ctx.settings``, beside ``data_dir`` and under its kind's own.
    """
    config = config or RuntimeConfig()
    async with open_sqlite_store(data, clock=clock, queue_size=config.write_queue) as store:
        rt = Runtime(
            store,
            kinds,
            config=config,
            clock=clock,
            settings=settings,
        )
        store.on_recovered = rt._store_recovered
        store.key_clock = rt._key_clock
        async with trio.open_nursery() as services:
            try:
                async with trio.open_nursery() as actors:
                    rt._nursery = actors
                    recovered = rt._recover()
                    if recovered:
                        log.info("recovered %d actors with unfinished work", recovered)
                    services.start_soon(rt._run_timers, name="timers")
                    services.start_soon(rt._prune_keys, name="key pruning")
                    services.start_soon(rt.retention.serve, name="retention")
                    services.start_soon(rt._sweep_idle, name="passivation")
                    try:
                        yield rt
                    finally:
                        rt._close()
                        actors.cancel_scope.cancel()
            finally:
                rt._closed = True
                services.cancel_scope.cancel()
