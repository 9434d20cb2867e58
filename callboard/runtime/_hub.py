"""Fan-out of committed events to subscribers, resumable from a sequence number.

A subscription registers for live events *before* it reads stored ones, and
drops any live event at or below the last seq it yielded: stored and live
meet with no gap and no duplicate. Each subscription buffers at most
``buffer`` live events; past that it stops buffering and is *lagged*: an
embedded subscriber silently reads the rest from the store, a gateway
subscriber is told where to resume (docs/protocol.md ``lagged``).

Stored events are read a page at a time, bounded by count and by bytes
(``replay_page``, ``replay_page_bytes``), on the store's worker threads: a
subscription holds at most one page, and the event loop runs on while a
page is read. Whoever takes the events may pace the replay (``pace``,
awaited before each page): the gateway waits there until the connection's
outbox has room, so a replay goes at the speed of its client. A lag while
replaying costs nothing: the store has every event the buffer dropped, so
the replay reads on.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Literal

import trio

from ..errors import Lagged, RuntimeClosed
from ..mailbox import Event
from ..store import EventRecord, Store

__all__ = ["Hub", "Subscription"]

log = logging.getLogger("callboard.runtime")

OnLag = Literal["resume", "raise"]
Pace = Callable[[], Awaitable[object]]
_YIELD_EVERY = 64


class Subscription:
    """Events of one actor (or a pattern ``KIND/*`` or ``*``, live only), in order.

    Iterate with ``async for``, from one task. ``last`` is the seq of the
    last stored event yielded (None before the first); ``replayed`` is
    whether the last event yielded was read from the store rather than
    delivered live.
    """

    def __init__(
        self,
        hub: Hub,
        actor: str,
        after: int | None,
        *,
        buffer: int,
        on_lag: OnLag,
        head: int | None = None,
        pace: Pace | None = None,
    ) -> None:
        self.actor = actor
        self.last = after if after is not None else head
        self.replayed = False
        self._hub = hub
        self._pattern = actor == "*" or actor.endswith("/*")
        self._replaying = after is not None and not self._pattern
        self._buffer: deque[Event] = deque()
        self._page: deque[EventRecord] = deque()
        self._limit = buffer
        self._lagged = False
        self._on_lag = on_lag
        self._pace = pace
        self._wakeup = trio.Event()
        self._closed = False
        self._ended = False
        self._unyielded = 0
        self._refreshes = 0  # asked to read the store again (see `refresh`)

    def offer(self, event: Event) -> None:
        """Called by the hub for each published event; never blocks."""
        if self._lagged:
            return
        if len(self._buffer) >= self._limit:
            self._lagged = True
            self._hub.lagged_total += 1
        else:
            self._buffer.append(event)
        self._wakeup.set()

    def refresh(self) -> None:
        """Events of this actor were committed elsewhere (another node owns
        it): read them from the store, from ``last`` on, in order."""
        if self._pattern or self.last is None or self._closed:
            return
        self._refreshes += 1
        self._replaying = True
        self._wakeup.set()

    def end(self) -> None:
        """The runtime closed: wake the reader, who gets `RuntimeClosed`."""
        self._ended = True
        self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._hub._remove(self)
            self._wakeup.set()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Event:
        # A plain iterator, not an async generator: breaking out of the loop
        # early must leave nothing half-finished to be garbage collected.
        # Always a cancel point; a schedule point when it waits and at least
        # every _YIELD_EVERY events: one commit often brings a hundred events
        # to a hundred subscribers, and a trip through the scheduler for each
        # cost more than delivering it.
        self._unyielded += 1
        if self._unyielded >= _YIELD_EVERY:
            self._unyielded = 0
            await trio.lowlevel.checkpoint()
        else:
            await trio.lowlevel.checkpoint_if_cancelled()
        while not self._closed:
            if self._page:
                record = self._page.popleft()
                self.last = record.seq
                self.replayed = True
                return Event.from_record(record)
            if self._replaying:
                await self._read_page()
                continue
            if self._buffer:
                event = self._buffer.popleft()
                if event.seq is not None and self.last is not None and event.seq <= self.last:
                    continue
                if (
                    event.seq is not None and self.last is not None and not self._pattern
                    and event.seq > self.last + 1
                ):  # fmt: skip
                    # The events before it were committed by another node (it
                    # owned the actor until this one took it): read them first.
                    self._buffer.appendleft(event)
                    self._replaying = True
                    continue
                if event.seq is not None and not self._pattern:
                    self.last = event.seq
                self.replayed = False
                return event
            if self._lagged:
                self._lagged = False
                if self._on_lag == "raise" or self._pattern or self.last is None:
                    self.close()
                    raise Lagged(self.actor, self.last or 0)
                self._replaying = True
                continue
            self._wakeup = trio.Event()
            self._unyielded = 0
            await self._wakeup.wait()
        if self._ended:
            raise RuntimeClosed(f"the runtime closed; the subscription to {self.actor!r} ended")
        raise StopAsyncIteration

    async def _read_page(self) -> None:
        """The next page after ``last`` into ``_page``; the replay ends with the
        stored events, unless the buffer overflowed meanwhile."""
        assert self.last is not None
        if self._pace is not None:
            await self._pace()
        hub = self._hub
        asked = self._refreshes
        page = await hub._store.read_events(
            self.actor, self.last, limit=hub.page, max_bytes=hub.page_bytes
        )
        if self._closed:
            return
        self._page.extend(page.events)
        if page.more:
            return
        if self._lagged:
            # Whatever the buffer dropped was committed before it was
            # published, so the next read has it: read on, do not lag.
            self._lagged = False
            self._buffer.clear()
        elif self._refreshes == asked:
            self._replaying = False


class Hub:
    """Routes each published event to the subscriptions that match it."""

    def __init__(
        self, store: Store, *, buffer: int = 1024, page: int = 512,
        page_bytes: int = 1024 * 1024,
    ) -> None:  # fmt: skip
        self._store = store
        self.buffer = buffer
        self.page = page
        self.page_bytes = page_bytes
        self._by_actor: dict[str, set[Subscription]] = {}
        self.lagged_total = 0
        self._taps: dict[str, list[Callable[[Event], None]]] = {}
        self.tapped: frozenset[str] = frozenset()
        """The event types someone tapped: their events are published with no subscriber."""

    def tap(self, types: Iterable[str], fn: Callable[[Event], None]) -> None:
        """Call ``fn`` with every published event of one of ``types``, of any actor.

        A committed event reaches ``fn`` once, right after its commit, on the
        trio thread; a replay (a subscriber reading stored events) never
        reaches it, so what ``fn`` counts is counted once per process. ``fn``
        runs inside the commit's announcement: it must be quick and must not
        block; what it raises is logged and goes no further (the commit stands).
        Ephemeral events come too, if their type is tapped.
        """
        for type in types:
            self._taps.setdefault(type, []).append(fn)
        self.tapped = frozenset(self._taps)

    def subscribe(
        self, actor: str, after: int | None = None, *, buffer: int | None = None,
        on_lag: OnLag = "resume", head: int | None = None, pace: Pace | None = None,
    ) -> Subscription:  # fmt: skip
        sub = Subscription(
            self, actor, after, buffer=buffer or self.buffer, on_lag=on_lag, head=head, pace=pace
        )
        self._by_actor.setdefault(actor, set()).add(sub)
        return sub

    def _remove(self, sub: Subscription) -> None:
        subs = self._by_actor.get(sub.actor)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._by_actor[sub.actor]

    def listening(self, actor: str) -> bool:
        """Whether an event of ``actor`` would reach anyone (spares building it)."""
        by_actor = self._by_actor
        return bool(by_actor) and (
            actor in by_actor or "*" in by_actor or actor.split("/", 1)[0] + "/*" in by_actor
        )

    def publish(self, event: Event) -> None:
        if self.tapped:
            for fn in self._taps.get(event.type, ()):
                try:
                    fn(event)
                except Exception:
                    log.exception("a tap of %s events failed on %s", event.type, event.actor)
        if not self._by_actor:
            return
        for key in (event.actor, event.actor.split("/", 1)[0] + "/*", "*"):
            subs = self._by_actor.get(key)
            if subs:
                for sub in tuple(subs):
                    sub.offer(event)

    def refresh(self, actor: str | None) -> None:
        """Another node committed events of ``actor`` (None: of any actor, as
        a notification may have been lost): its subscribers here read them
        from the store. An actor this node owns publishes its own."""
        if actor is not None:
            keys: tuple[str, ...] | list[str] = (actor,)
        else:
            keys = [key for key in self._by_actor if key != "*" and not key.endswith("/*")]
        for key in keys:
            subs = self._by_actor.get(key)
            if subs and not self._store.owns(key):
                for sub in tuple(subs):
                    sub.refresh()

    def close_all(self) -> None:
        for subs in list(self._by_actor.values()):
            for sub in list(subs):
                sub.end()

    @property
    def subscriber_count(self) -> int:
        return sum(len(s) for s in self._by_actor.values())
