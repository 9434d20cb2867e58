"""`EventStream`: one actor's events, in order, across reconnections and lag.

The stream remembers the seq of the last stored event it took in. Whenever
its server-side subscription ends (the connection dropped, the server sent
``lagged``, or this stream's own buffer overflowed because its consumer is
slow) it subscribes again with ``after`` set to that seq: the server replays
what was missed from its store, and anything at or below that seq is dropped
on arrival, so the consumer sees no gap and no duplicate.

Re-subscribing is done by the consumer's own ``__anext__``, once it has read
what is buffered: a stream nobody reads costs at most ``buffer`` events and
no traffic. Ephemeral events (``seq`` None) are never replayed, so those
that arrive while a stream is resuming are lost, as docs/protocol.md says.

Patterns (``KIND/*``, ``*``) are live only: after a loss they resume live,
and what happened in between is not replayed.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ..mailbox import Event

if TYPE_CHECKING:
    from ._client import Client
    from ._connection import Connection

__all__ = ["EventStream", "StreamStatistics"]


@attrs.frozen
class StreamStatistics:
    """A snapshot of an `EventStream`.

    Attributes:
        buffered: events received and not yet read.
        resumes: times the stream subscribed again (reconnection, lag, overflow).
        last: seq of the last stored event read, None before the first.
    """

    buffered: int
    resumes: int
    last: int | None


class EventStream:
    """Events of one subscription; iterate with ``async for``. Made by `Client.subscribe`.

    ``last`` is the seq of the last stored event yielded (for a pattern,
    always None): keep it to resume later with ``subscribe(actor, after=last)``.
    """

    def __init__(self, client: Client, actor: str, after: int | None, *, buffer: int) -> None:
        self.actor = actor
        self.last = after
        self._client = client
        self._pattern = actor == "*" or actor.endswith("/*")
        # Seq of the last stored event taken into the buffer: where to resume from.
        self._received = None if self._pattern else after
        self._buffer: deque[Event] = deque()
        self._limit = buffer
        self._conn: Connection | None = None
        self._sub: Any = None
        self._resume = False
        self._resumes = 0
        self._closed = False
        self._wakeup = trio.Event()

    def statistics(self) -> StreamStatistics:
        return StreamStatistics(len(self._buffer), self._resumes, self.last)

    def subscribe_fields(self) -> dict[str, Any]:
        """The fields of the ``subscribe`` request that (re)starts this stream."""
        if self._received is None:
            return {"actor": self.actor}
        return {"actor": self.actor, "after": self._received}

    # -- called by the connection's reader; none of these block ----------------------

    def subscribed(self, frame: dict[str, Any], conn: Connection) -> None:
        """The ``ok`` to a subscribe: route its ``sub`` here before any later frame."""
        sub = frame.get("sub")
        if self._closed or not isinstance(sub, str | int):
            if sub is not None:
                conn.cast("unsubscribe", {"sub": sub})
            return
        self._resumes += int(self._resume)
        self._resume = False
        self._conn, self._sub = conn, sub
        conn.listeners[sub] = self
        head = frame.get("head")
        if self._received is None and not self._pattern and isinstance(head, int):
            # A live subscription starts at head: resuming from there loses nothing.
            self._received = head

    def offer(self, event: Event) -> None:
        stored = event.seq is not None and not self._pattern
        if stored and self._received is not None and event.seq <= self._received:  # type: ignore[operator]
            return
        if len(self._buffer) >= self._limit:
            # The consumer is slow: stop taking events, resume from the store later.
            self._unsubscribe()
            self.lose(None)
            return
        self._buffer.append(event)
        if stored:
            self._received = event.seq
        self._wakeup.set()

    def lose(self, after: int | None) -> None:
        """The server-side subscription ended; ``after`` is where ``lagged`` says to resume."""
        self._conn = self._sub = None
        if after is not None and not self._pattern:
            self._received = max(after, self._received or 0)
        self._resume = True
        self._wakeup.set()

    # -- the consumer's side ----------------------------------------------------------

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> Event:
        # A plain iterator, not an async generator: breaking out of the loop
        # early leaves nothing half-finished to be garbage collected.
        await trio.lowlevel.checkpoint()
        while True:
            if self._buffer:
                event = self._buffer.popleft()
                if event.seq is not None and not self._pattern:
                    self.last = event.seq
                return event
            if self._closed:
                raise StopAsyncIteration
            if self._resume:
                await self._client._resubscribe(self)
                continue
            self._wakeup = trio.Event()
            await self._wakeup.wait()

    def close(self) -> None:
        """End the stream: iteration stops, the server is told to stop sending."""
        if not self._closed:
            self._closed = True
            self._buffer.clear()
            self._unsubscribe()
            self._wakeup.set()

    def _unsubscribe(self) -> None:
        if self._conn is not None:
            self._conn.listeners.pop(self._sub, None)
            self._conn.cast("unsubscribe", {"sub": self._sub})
        self._conn = self._sub = None
