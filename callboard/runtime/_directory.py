"""The directory of cells: what the runtime does for the actors it drives.

Private to the runtime. `Runtime` (the facade) hands a durable message here
(`deliver`), and a cell calls back here for everything it needs from the
rest of the runtime (`CellServices`): publishing a committed event, routing
its committed sends, reporting a cursor, leaving memory. Nothing here writes
to the store for a caller; what comes in has been made durable already.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

import trio

from ..actors import Actor
from ..codec import loads
from ..errors import BadRequest, RuntimeClosed, StoreUnavailable, UnknownKind
from ..mailbox import KIND_PATTERN, Event, Message, parse_address
from ..store import CommitResult, Enqueue, Store, StoredAck
from ..supervisor import ActorCell, Lane
from ._claims import Claims
from ._config import RuntimeConfig
from ._hub import Hub

__all__ = ["Directory", "RuntimeState"]


class RuntimeState(enum.Enum):
    """Where a runtime stands; it only moves forward."""

    OPENING = "opening"
    """Made, recovering what a previous process left; takes no calls yet."""
    OPEN = "open"
    """Actors run, and the facade takes sends, spawns and subscriptions."""
    CLOSING = "closing"
    """Leaving its ``async with``: ``closing`` is set, waiters are woken, and
    every actor is being cancelled where it stands (nothing durable is lost)."""
    CLOSED = "closed"
    """Every actor and service has ended; the store is closing or closed."""


class Directory:
    """The active cells by address, the kinds they are made from, and the
    services each cell asks for (it is their `CellServices`)."""

    def __init__(
        self,
        store: Store,
        hub: Hub,
        kinds: Iterable[type[Actor]],
        *,
        config: RuntimeConfig,
        clock: Callable[[], float],
        settings: Mapping[str, Any],
    ) -> None:
        self.store = store
        self.hub = hub
        self.inbox_limit = config.inbox_limit
        self.batch_max = config.batch_max
        self.passivation_slots = trio.Semaphore(config.passivating_at_once)
        self.lane = Lane()
        self.passivate_after = config.passivate_after
        self.settings = settings
        self.counts: Counter[str] = Counter()
        self.state = RuntimeState.OPENING
        self.nursery: trio.Nursery | None = None
        self.cells: dict[str, ActorCell] = {}
        self.timers_wakeup = trio.Event()
        self._clock = clock
        self._kinds: dict[str, type[Actor]] = {}
        self._kind_settings: dict[str, Mapping[str, Any]] = {}
        self._leaving: dict[str, ActorCell] = {}
        self._cursor_waiters: dict[str, list[tuple[int, trio.Event]]] = {}
        self._claims = Claims(store, retry_after=config.lease_poll)
        # Each cell's task runs in a scope of its own, so that a lost lease
        # can stop it at once (`lease_lost`); a resting cell has none.
        self._scopes: dict[ActorCell, trio.CancelScope] = {}
        for cls in kinds:
            self.register(cls)

    # -- kinds -------------------------------------------------------------------

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

    @property
    def kinds(self) -> dict[str, type[Actor]]:
        """A copy, for callers outside the runtime (`kind_named` does not copy)."""
        return dict(self._kinds)

    def kind_named(self, kind: str) -> type[Actor] | None:
        """The class registered as ``kind``, or None; no copy (it is on hot paths)."""
        return self._kinds.get(kind)

    def check_kind(self, kind: str) -> type[Actor]:
        """The class registered as ``kind``; `UnknownKind` if there is none."""
        cls = self._kinds.get(kind)
        if cls is None:
            known = ", ".join(sorted(self._kinds)) or "none"
            raise UnknownKind(f"there is no actor kind {kind!r} (known kinds: {known})")
        return cls

    def kind_of(self, address: str) -> type[Actor]:
        kind, _ = parse_address(address)
        return self.check_kind(kind)

    def create_kind(self, kind: str) -> str | None:
        """The kind to create a missing actor as (virtual kinds), else None."""
        return kind if self.check_kind(kind).virtual else None

    def settings_for(self, kind: str) -> Mapping[str, Any]:
        self.check_kind(kind)
        return self._kind_settings[kind]

    # -- a durable message reaches its cell ----------------------------------------

    @property
    def open(self) -> bool:
        return self.state is RuntimeState.OPEN

    def check_open(self) -> None:
        if self.state is not RuntimeState.OPEN:
            raise RuntimeClosed("the runtime is closed; nothing was sent")

    def deliver(self, address: str, message: Message) -> None:
        """``message`` is durable in ``address``'s mailbox: hand it to the cell
        (activating one if needed; a new cell reads it from the store)."""
        cell = self.cells.get(address)
        if cell is not None:
            cell.deliver(message)
        elif self.open:
            self._run_here(address)

    def poke(self, address: str) -> None:
        """Something is in ``address``'s mailbox that was not delivered in memory."""
        cell = self.cells.get(address)
        if cell is not None:
            cell.poke()
        elif self.open:
            self._run_here(address)

    def wake(self, address: str) -> None:
        """The store found work for ``address`` (another node stored a message
        for it, or it has work and no live owner): run it here if it may."""
        if self.kind_named(address.partition("/")[0]) is None:
            return  # a kind this node does not run
        cell = self.cells.get(address)
        if cell is not None:
            cell.poke()
        elif self.open and self.nursery is not None:
            if self.store.owns(address):
                self.activate(address)
            else:
                self._claims.request(address, self.nursery, self._claimed, found_free=True)

    def _run_here(self, address: str) -> None:
        """Activate ``address`` if this node owns it; else take it if nobody
        live does (several nodes), or leave it to the node that owns it."""
        if self.store.owns(address):
            self.activate(address)
        elif self.nursery is not None:
            self._claims.request(address, self.nursery, self._claimed)

    def _claimed(self, address: str) -> None:
        if self.open and address not in self.cells:
            self.activate(address)

    def committed_elsewhere(self, address: str | None) -> None:
        """Another node committed for ``address`` (None: for any, maybe, as a
        notification may have been lost): its subscribers and its waiters here
        (`await_cursor`) read the store, as no cell here tells them."""
        self.hub.refresh(address)
        waiters = self._cursor_waiters
        candidates = waiters if address is None else (address,)
        waiting = [a for a in candidates if a in waiters and a not in self.cells]
        if waiting and self.open and self.nursery is not None:
            self.nursery.start_soon(self._read_cursors, waiting, name="cursors elsewhere")

    async def _read_cursors(self, addresses: list[str]) -> None:
        for address in addresses:
            try:
                record = await self.store.actor(address)
            except (StoreUnavailable, RuntimeClosed):
                return  # the next notification or poll asks again
            if record is not None:
                self.cursor_advanced(address, record.cursor)

    def lease_lost(self, addresses: Iterable[str]) -> None:
        """This node lost these actors' leases: stop each at once, committing
        nothing (the node that takes one goes on from its last commit)."""
        for address in addresses:
            cell = self.cells.get(address)
            if cell is None:
                continue
            if cell.resting:
                cell.runtime_closing()  # no task: it ends here
            else:
                scope = self._scopes.get(cell)
                if scope is not None:
                    scope.cancel()

    def activate(self, address: str, *, stop: bool = False) -> ActorCell:
        if self.nursery is None or not self.open:
            raise RuntimeClosed("the runtime is closed")
        cell = ActorCell(address, self.kind_of(address), self, stop=stop)
        self.cells[address] = cell
        self.counts["activations"] += 1
        self.nursery.start_soon(self._run_cell, cell, False, name=f"actor {address}")
        return cell

    async def _run_cell(self, cell: ActorCell, resumed: bool) -> None:
        with trio.CancelScope() as scope:
            self._scopes[cell] = scope
            try:
                await cell.run(resumed=resumed)
            finally:
                if self._scopes.get(cell) is scope:
                    del self._scopes[cell]

    def await_cursor(self, address: str, seq: int) -> trio.Event:
        """An event set once ``address`` commits past ``seq`` (or the runtime closes)."""
        event = trio.Event()
        self._cursor_waiters.setdefault(address, []).append((seq, event))
        return event

    def stop_waiting(self, address: str, event: trio.Event) -> None:
        """Forget a waiter of `await_cursor` (set or not): its wait is over."""
        waiters = self._cursor_waiters.get(address)
        if waiters is None:
            return
        waiters[:] = [(seq, e) for seq, e in waiters if e is not event]
        if not waiters:
            del self._cursor_waiters[address]

    def store_recovered(self) -> None:
        """The store reopened after a fail-stop: the WAL may hold writes whose
        senders were told the outcome is unknown, so every active mailbox is
        read again from the store."""
        for cell in list(self.cells.values()):
            cell.poke()
        self.timers_wakeup.set()

    def close(self) -> None:
        """No more work: wake everyone waiting so they learn it closed."""
        self.state = RuntimeState.CLOSING
        for cell in list(self.cells.values()):
            cell.runtime_closing()  # a resting one has no task to cancel: it ends here
        for waiters in self._cursor_waiters.values():
            for _, event in waiters:
                event.set()
        self._cursor_waiters.clear()
        self.hub.close_all()

    # -- what cells ask for (CellServices) --------------------------------------------

    def wall_time(self) -> float:
        return self._clock()

    def publish(self, event: Event) -> None:
        """A committed event (or an ephemeral one) of a cell, to its subscribers."""
        self.hub.publish(event)

    def listening(self, address: str) -> bool:
        return self.hub.listening(address)

    @property
    def tapped(self) -> frozenset[str]:
        return self.hub.tapped

    def route(self, sends: tuple[Enqueue, ...], result: CommitResult) -> None:
        """A commit's sends are durable: deliver each to its recipient."""
        for item, ack in zip(sends, result.acks, strict=True):
            if isinstance(ack, StoredAck) and not ack.duplicate:
                self.deliver(
                    item.address,
                    Message(ack.seq, item.type, loads(item.body), item.sender, item.key),
                )

    def timers_changed(self) -> None:
        self.timers_wakeup.set()

    def counted(self, what: str, n: int = 1) -> None:
        """A cell reports a lifecycle step: commit, passivation, restart, dead letter."""
        self.counts[what] += n

    def forget(self, cell: ActorCell) -> None:
        """``cell`` passivates: the next message activates a successor."""
        if self.cells.get(cell.address) is cell:
            del self.cells[cell.address]
            self._leaving[cell.address] = cell

    def gone(self, cell: ActorCell) -> None:
        if self.cells.get(cell.address) is cell:
            del self.cells[cell.address]
        if self._leaving.get(cell.address) is cell:
            del self._leaving[cell.address]
        if cell.final_status is not None:
            # It takes no more messages: a waiter for one it never handled looks again.
            self.cursor_advanced(cell.address, 2**63 - 1)

    def resting_count(self) -> int:
        return sum(cell.resting for cell in self.cells.values())

    def resume(self, cell: ActorCell) -> bool:
        """A resting cell has work: run it again, from memory."""
        if self.nursery is None or not self.open:
            return False
        self.nursery.start_soon(self._run_cell, cell, True, name=f"actor {cell.address}")
        return True

    def predecessor(self, cell: ActorCell) -> ActorCell | None:
        """The cell still leaving ``cell``'s address, which it must wait for."""
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
