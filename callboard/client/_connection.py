"""One welcomed websocket connection to the gateway: one reader, one writer.

Why a writer task: trio-websocket corrupts the stream when a ``send_message``
is cancelled halfway (a close frame then lands inside it), so requests put whole frames on a
bounded channel, which either takes a frame or does not, and only the writer
touches the socket. Why one reader: replies come out of order and events
interleave with them; the reader routes each frame by ``id`` (replies) or
``sub`` (events) and never blocks, so a slow event consumer cannot hold up
the reply another task is waiting for.

`_handshake` opens it. A `Connection` is used once. When it ends, every request awaiting a reply
gets `Lost` and every subscription on it is told to resume; the `Client`
decides whether to open another.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Any, Protocol

import attrs
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection

from ..mailbox import Event
from ._errors import ProtocolError, error_from_frame
from ._wire import decode, encode, event_from_frame

__all__ = ["MAX_FRAME", "PROTOCOL", "Connection", "Listener", "Lost", "OnReply", "describe_close"]

log = logging.getLogger("callboard.client")

PROTOCOL = 1
# Frames queued for the writer before a requester waits: deep enough for
# pipelined requests, small enough that a stalled socket pushes back at once.
WRITE_QUEUE = 64
# A frame the server has not taken in this long means the connection is dead.
SEND_TIMEOUT = 10.0
# Replies can be large (``inspect`` of a big state); the server, not the
# client, is the one that must bound what it accepts.
MAX_FRAME = 64 * 1024 * 1024


class Lost(Exception):
    """Internal: the connection ended before the reply came.

    ``sent`` is False when the request never reached the writer, so that
    repeating it on another connection cannot apply it twice.
    """

    def __init__(self, *, sent: bool) -> None:
        super().__init__()
        self.sent = sent


class Listener(Protocol):
    """What a subscription offers the reader (implemented by `EventStream`)."""

    def offer(self, event: Event) -> None: ...
    def lose(self, after: int | None) -> None: ...


OnReply = Callable[[dict[str, Any], "Connection"], None]


@attrs.define
class _Pending:
    on_reply: OnReply | None
    size: int
    frame: dict[str, Any] | None = None
    done: trio.Event = attrs.Factory(trio.Event)


class Connection:
    """A welcomed websocket connection. Make one with `open_connection`."""

    def __init__(self, ws: WebSocketConnection, stream: trio.abc.Stream, url: str) -> None:
        self.url = url
        self.closed = False
        self.listeners: dict[str | int, Listener] = {}
        self._ws = ws
        self._stream = stream
        self._send, self._outbox = trio.open_memory_channel[str](WRITE_QUEUE)
        self._pending: dict[str, _Pending] = {}
        self._casts: set[str] = set()
        self._ids = itertools.count(1)

    async def request(
        self, op: str, fields: dict[str, Any], on_reply: OnReply | None = None
    ) -> dict[str, Any]:
        """Send one request and return its ``ok`` frame; an ``error`` frame is raised.

        ``on_reply`` runs in the reader the moment the reply arrives, before
        any later frame is routed: a subscription registers its ``sub`` there
        so that no event following the ``ok`` is missed. It runs even if the
        caller was cancelled meanwhile, so that it can undo what the reply did.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        if self.closed:
            raise Lost(sent=False)
        request_id = str(next(self._ids))
        text = encode({"op": op, "id": request_id, **fields})
        pending = _Pending(on_reply, len(text))
        self._pending[request_id] = pending
        try:
            try:
                await self._send.send(text)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise Lost(sent=False) from None
            await pending.done.wait()
        finally:
            if not pending.done.is_set() and pending.on_reply is None:
                self._pending.pop(request_id, None)
        if pending.frame is None:
            raise Lost(sent=True)
        if pending.frame["op"] == "error":
            raise error_from_frame(pending.frame)
        return pending.frame

    def cast(self, op: str, fields: dict[str, Any]) -> None:
        """Send a request whose reply nobody awaits; dropped if the writer is full or gone."""
        if self.closed:
            return
        request_id = str(next(self._ids))
        try:
            self._send.send_nowait(encode({"op": op, "id": request_id, **fields}))
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            return
        self._casts.add(request_id)

    async def serve(self, keepalive: float | None) -> str:
        """Run the reader and writer (and keepalive) until the connection ends; say why."""
        reason = "the connection ended"

        async def watch(fn: Callable[[], Any]) -> None:
            nonlocal reason
            reason = await fn()
            nursery.cancel_scope.cancel()

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch, self._read)
                nursery.start_soon(watch, self._write)
                if keepalive is not None:
                    nursery.start_soon(watch, lambda: self._keepalive(keepalive))
        finally:
            with trio.move_on_after(1.0, shield=True):
                await self._ws.aclose()
                await self._stream.aclose()
        return reason

    def close(self) -> None:
        """Let the writer finish what is queued, then close with a close frame."""
        self._send.close()

    def abandon(self) -> None:
        """Fail every awaited reply and tell every subscription to resume elsewhere."""
        self.closed = True
        self._send.close()
        pending, self._pending = self._pending, {}
        for entry in pending.values():
            entry.on_reply = None
            entry.done.set()
        listeners, self.listeners = self.listeners, {}
        for listener in listeners.values():
            listener.lose(None)

    async def _read(self) -> str:
        while True:
            try:
                text = await self._ws.get_message()
            except ConnectionClosed as exc:
                return f"the server closed the connection ({describe_close(exc)})"
            try:
                self._dispatch(decode(text))
            except ProtocolError as exc:
                # A server bug; dropping the frame keeps the other requests going.
                log.warning("%s", exc)

    def _dispatch(self, frame: dict[str, Any]) -> None:
        op = frame["op"]
        if op in ("ok", "error"):
            rid = self._reply_id(frame)
            pending = self._pending.pop(rid, None) if rid is not None else None
            if pending is None:
                if op == "error" and rid not in self._casts:
                    log.warning("the server said: %s", frame.get("message"))
                self._casts.discard(rid or "")
                return
            pending.frame = frame
            if op == "ok" and pending.on_reply is not None:
                pending.on_reply(frame, self)
            pending.done.set()
        elif op == "event":
            listener = self.listeners.get(_sub(frame))
            if listener is not None:
                listener.offer(event_from_frame(frame))
        elif op == "lagged":
            listener = self.listeners.pop(_sub(frame), None)
            if listener is not None:
                after = frame.get("after")
                listener.lose(after if isinstance(after, int) else None)
        # Any other op is an extension this client predates (docs/protocol.md allows new ops).

    def _reply_id(self, frame: dict[str, Any]) -> str | None:
        """The ``id`` a reply answers.

        A server need not parse a frame that is too large for it, and may
        answer it without an ``id``; as only size decides, the frame it
        refused is the largest one still awaiting a reply.
        """
        rid = frame.get("id")
        if rid is None and frame.get("code") == "too_large" and self._pending:
            return max(self._pending, key=lambda k: self._pending[k].size)
        return rid if isinstance(rid, str) else None

    async def _write(self) -> str:
        async for text in self._outbox:
            with trio.move_on_after(SEND_TIMEOUT, shield=True) as scope:
                try:
                    await self._ws.send_message(text)
                except ConnectionClosed as exc:
                    return f"the server closed the connection ({describe_close(exc)})"
            if scope.cancelled_caught:
                return f"the server took no frame for {SEND_TIMEOUT:g} s"
        return "the client closed the connection"

    async def _keepalive(self, interval: float) -> str:
        while True:
            await trio.sleep(interval)
            with trio.move_on_after(interval) as scope:
                try:
                    await self.request("ping", {})
                except Lost:
                    return "the connection ended during a keepalive ping"
            if scope.cancelled_caught:
                return f"the server did not answer a ping within {interval:g} s"


def _sub(frame: dict[str, Any]) -> str | int:
    sub = frame.get("sub")
    return sub if isinstance(sub, str | int) else ""


def describe_close(exc: ConnectionClosed) -> str:
    reason = exc.reason
    if reason is None:
        return "no close frame"
    return f"code {reason.code}" + (f": {reason.reason}" if reason.reason else "")
