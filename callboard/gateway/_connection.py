"""One websocket connection: a reader, request tasks, subscriptions, one writer.

The shape follows trio-websocket's traps (an uncaught error in a handler stops
the whole server; a send cancelled halfway corrupts the stream):

- One reader loop parses frames and starts one task per request (at most
  ``max_inflight`` at once), so replies may leave out of order and a slow
  ``stop`` does not hold up a ``ping``.
- Everything outgoing goes through one bounded `Outbox` to one writer task,
  the only caller of ``send_message``; the frames that wait are written
  together (`HeldWrites`). Nothing cancels the writer while the connection
  is meant to go on: every ending either goes through the writer (a close
  after the last frame) or closes the TCP stream, so a frame is never cut
  halfway and then followed by a close frame. A client that takes no byte
  for ``send_timeout`` is caught by the watchdog, which closes the TCP
  stream (no per-frame cancel scope on the hot path).
- Subscriptions (`Subscriptions`) forward live events with ``put_nowait``
  and end with ``lagged`` when the outbox is full; a replay waits for room
  instead, reading no page from the store while the outbox is full. Memory
  per connection is therefore bounded by ``send_queue`` frames and
  ``send_queue_bytes`` (plus one frame), one batch being written
  (``write_batch`` frames, 64 K characters), each subscription's hub
  buffer and one replay page (``replay_page_bytes``) per replaying
  subscription, whatever the client does.
"""

from __future__ import annotations

import logging

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection

from .._version import __version__
from ..errors import CallboardError
from ..mailbox import Ack
from ..runtime import Runtime
from . import _frames as f
from ._access import Access, Refused
from ._config import GatewayConfig
from ._grants import Grant, TokenBucket
from ._held_writes import HeldWrites
from ._operations import Served as _Served
from ._operations import dispatch
from ._outbox import Outbox
from ._subscriptions import Counters, Subscriptions

__all__ = ["Connection"]

log = logging.getLogger("callboard.gateway")

SERVER = f"callboard/{__version__}"

# Characters of frames written together (with write_batch frames at most):
# enough to spare most system calls, little enough to hold while writing.
_BATCH_CHARS = 64 * 1024


class Connection:
    """Serves one accepted websocket until either side closes it."""

    def __init__(
        self,
        ws: WebSocketConnection,
        stream: HeldWrites,
        runtime: Runtime,
        config: GatewayConfig,
        counters: Counters,
        encoder: f.EventEncoder,
        access: Access,
        *,
        header_token: str | None,
        remote: str,
    ) -> None:
        self.remote = remote
        self.client: str | None = None
        self.grant: Grant | None = None
        self._served: _Served | None = None
        self._token = ""  # the token the grant came from, checked again while open
        self.outbox = Outbox(
            config.send_queue, reserve=config.send_reserve, max_bytes=config.send_queue_bytes
        )
        self._ws = ws
        self._stream = stream
        self._rt = runtime
        self._cfg = config
        self._counters = counters
        self._header_token = header_token
        self._access = access
        self._peer = remote.rsplit(":", 1)[0]
        self._subs = Subscriptions(
            runtime, config, self.outbox, counters, encoder, drop=self.drop, remote=remote
        )
        # Requests in flight, at most max_inflight. Past it the reader waits
        # in ``_answers`` for one to be answered, as a shutdown waits there for
        # the last. (A semaphore and an event made anew whenever the count left
        # zero did the same, for more work per request.)
        self._inflight = 0
        self._answers = trio.lowlevel.ParkingLot()
        self._bucket = (
            TokenBucket(config.rate_limit, config.rate_burst) if config.rate_limit else None
        )
        self._shutdown = trio.Event()
        self._reader = trio.CancelScope()
        self._nursery: trio.Nursery | None = None
        self._dropped = False
        self._last_heard = trio.current_time()
        self._sending_since: float | None = None
        self._batch_frames = config.write_batch

    # -- lifecycle ---------------------------------------------------------

    async def serve(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._write, name=f"writer {self.remote}")
            nursery.start_soon(self._keepalive, name=f"keepalive {self.remote}")
            nursery.start_soon(self._watch_writes, name=f"watchdog {self.remote}")
            nursery.start_soon(self._watch_shutdown, name=f"shutdown {self.remote}")
            nursery.start_soon(self._read, name=f"reader {self.remote}")

    @property
    def subscriptions(self) -> int:
        return len(self._subs)

    def shutdown(self) -> None:
        """Stop reading, let in-flight requests answer (``shutdown_grace``), close with 1001."""
        self._shutdown.set()

    async def drop(self, reason: str, *, code: int = 1008, graceful: bool = True) -> None:
        """End the connection now; bounded by ``close_timeout``, idempotent.

        ``graceful`` tries a close frame first (it waits for the frame being
        written, if any). Without it, for a frame stuck half-written, the TCP
        stream is simply closed: a close frame must not follow half a frame.
        """
        if self._dropped:
            return
        self._dropped = True
        self._counters.dropped += 1
        log.warning("dropping the connection from %s: %s", self.remote, reason)
        with trio.move_on_after(self._cfg.close_timeout, shield=True):
            if graceful:
                await self._ws.aclose(code, reason[:120])
            await self._stream.aclose()
        self._cancel()

    def _cancel(self) -> None:
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    async def _watch_shutdown(self) -> None:
        await self._shutdown.wait()
        self._reader.cancel()
        with trio.move_on_after(self._cfg.shutdown_grace):
            while self._inflight:
                await self._answers.park()
        self._subs.close()
        self.outbox.close_after(1001, "the server is shutting down")

    # -- writing -----------------------------------------------------------

    async def _write(self) -> None:
        outbox, ws = self.outbox, self._ws
        try:
            while True:
                frames = outbox.take(self._batch_frames, _BATCH_CHARS)  # no yield while frames wait
                if not frames:
                    close = outbox.close_request
                    if close is not None:
                        with trio.move_on_after(self._cfg.close_timeout, shield=True):
                            await ws.aclose(close.code, close.reason)
                        return
                    await outbox.wait()
                    continue
                self._sending_since = trio.current_time()
                await self._write_frames(frames)
                self._sending_since = None
        except (ConnectionClosed, trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self._cancel()

    async def _write_frames(self, frames: list[str]) -> None:
        """Write ``frames`` with one socket write (more when the client is slow).

        A single frame goes the same way: the watchdog then sees progress
        however the frames come, and a big frame read slowly is not cut off.
        """
        self._stream.hold()
        try:
            for frame in frames:
                await self._ws.send_message(frame)
        except ConnectionClosed:
            # Closed meanwhile: the close frame went out with what was held
            # before it (HeldWrites); anything held since is sent as well.
            await self._stream.flush(self._made_progress)
            raise
        except BaseException:
            self._stream.discard()
            raise
        await self._stream.flush(self._made_progress)

    def _made_progress(self) -> None:
        # The client is reading: the watchdog times the rest of the batch afresh.
        self._sending_since = trio.current_time()

    async def _watch_writes(self) -> None:
        """Drop the connection when the client has taken no byte for ``send_timeout``."""
        timeout = self._cfg.send_timeout
        while True:
            await trio.sleep(timeout / 4)
            since = self._sending_since
            if since is not None and trio.current_time() - since >= timeout:
                await self.drop(f"it took no data for {timeout} s", graceful=False)
                return

    def _still_granted(self) -> bool:
        grant = self.grant
        return grant is None or self._access.still_granted(grant, self._token)

    async def _revoked(self, rid: str | None) -> None:
        """The token was removed (or changed) since hello: nothing more is done for it."""
        assert self.grant is not None
        message = f"the token {self.grant.name!r} was revoked; this connection is closed"
        await self.outbox.put(f.encode_error(rid, "unauthorized", message))
        self._subs.close()
        self.outbox.close_after(1008, "token revoked")
        self._reader.cancel()

    async def _keepalive(self) -> None:
        cfg = self._cfg
        try:
            while True:
                await trio.sleep(cfg.ping_interval)
                # A connection that only listens has a revoked token noticed here.
                if not self._still_granted():
                    await self._revoked(None)
                    return
                if trio.current_time() - self._last_heard < cfg.ping_interval:
                    continue
                with trio.move_on_after(cfg.idle_timeout) as waiting:
                    await self._ws.ping()
                if waiting.cancelled_caught:
                    await self.drop(f"no pong within {cfg.idle_timeout} s", code=1011)
                    return
                self._last_heard = trio.current_time()
        except ConnectionClosed:
            pass

    # -- reading -----------------------------------------------------------

    async def _read(self) -> None:
        try:
            with self._reader:
                if await self._greet():
                    while True:
                        await self._on_frame(await self._ws.get_message())
        except ConnectionClosed:
            self._cancel()

    async def _greet(self) -> bool:
        """Wait for ``hello``; anything else, or nothing in time, closes (1008)."""
        cfg = self._cfg
        with trio.move_on_after(cfg.handshake_timeout):
            message = await self._ws.get_message()
            self._last_heard = trio.current_time()
            return await self._welcome(f.parse_frame(message, max_frame=cfg.max_frame))
        self.outbox.close_after(1008, f"no hello within {cfg.handshake_timeout} s")
        return False

    async def _welcome(self, request: f.Request | f.FrameError) -> bool:
        if isinstance(request, f.FrameError) and request.op in (None, "hello"):
            return await self._refuse(request.id, request.code, request.message, "bad hello")
        if not isinstance(request, f.Hello):
            return await self._refuse(
                request.id, "unauthorized",
                "the first frame must be hello; this connection is closed", "no hello",
            )  # fmt: skip
        presented = [t for t in (self._header_token, request.token) if t is not None]
        grant = self._access.authenticate(self._peer, presented)
        if isinstance(grant, Refused):
            return await self._refuse(request.id, grant.code, grant.message, "not authenticated")
        self.grant = grant
        self._token = presented[0]
        self.client = request.client
        welcome = {"op": "welcome", "id": request.id, "protocol": f.PROTOCOL_VERSION}
        await self.outbox.put(f.encode({**welcome, "server": SERVER}))
        log.debug(
            "connection from %s said hello as %s with the %s token",
            self.remote, request.client, grant.name,
        )  # fmt: skip
        return True

    async def _refuse(self, rid: str | None, code: str, message: str, reason: str) -> bool:
        await self.outbox.put(f.encode_error(rid, code, message))
        self.outbox.close_after(1008, reason)
        return False

    async def _on_frame(self, frame: str | bytes) -> None:
        self._last_heard = trio.current_time()
        self._counters.requests += 1
        request = f.parse_frame(frame, max_frame=self._cfg.max_frame)
        if isinstance(request, f.FrameError):
            await self.outbox.put(f.encode_error(request.id, request.code, request.message))
        elif isinstance(request, f.Hello):
            message = "hello was already received on this connection"
            await self.outbox.put(f.encode_error(request.id, "bad_request", message))
        elif not self._still_granted():
            await self._revoked(request.id)
        elif self._bucket is not None and not self._bucket.take():
            limit = f"{self._cfg.rate_limit:g} requests/s"
            message = f"this connection is over its limit of {limit}; retry later"
            await self.outbox.put(f.encode_error(request.id, "rate_limited", message))
        else:
            # No yield when a slot is free: get_message, next, yields anyway.
            while self._inflight >= self._cfg.max_inflight:
                await self._answers.park()
            self._inflight += 1
            if type(request) is f.Send and not request.wait and self._send_soon(request):
                return
            assert self._nursery is not None
            self._nursery.start_soon(self._handle, request)

    # -- answering -----------------------------------------------------------

    async def _handle(self, request: f.Request) -> None:
        try:
            reply = await self._answer(request)
            if reply is not None:
                await self.outbox.put(reply)
        finally:
            self._answered()

    def _answered(self) -> None:
        self._inflight -= 1
        if self._answers:
            self._answers.unpark_all()

    def _send_soon(self, request: f.Send) -> bool:
        """Answer a send to an active actor when its write is durable, with no
        task of its own (the common case); False leaves it to `_handle`, which
        also answers every refusal and every error."""
        grant = self.grant
        if grant is None or not grant.may_write(request.to):
            return False
        rid, counters = request.id, self._counters

        def stored(ack: Ack | Exception) -> None:
            if isinstance(ack, Exception):
                reply = self._error_reply(request, ack)
            else:
                if not ack.duplicate:
                    counters.sends_accepted += 1
                reply = f.encode_ok(rid, seq=ack.seq, duplicate=ack.duplicate)
            if self.outbox.put_nowait(reply) or self.outbox.closing:
                self._answered()  # queued, or no one will read it
                return
            assert self._nursery is not None
            try:
                self._nursery.start_soon(self._reply_later, reply)
            except RuntimeError:
                self._answered()  # the connection is gone: no one will read it

        try:
            return self._rt.send_nowait(
                request.to, request.type, request.body, key=request.key, then=stored
            )
        except Exception:
            return False  # refused before anything was queued: `_handle` says why

    async def _reply_later(self, reply: str) -> None:
        try:
            await self.outbox.put(reply)
        finally:
            self._answered()

    def _serving(self) -> _Served:
        """What requests are answered with, once (the grant is known after hello)."""
        assert self.grant is not None and self._nursery is not None
        self._served = _Served(
            self._rt, self.grant, self._access, self._subs, self._cfg, self._counters,
            self._nursery,
        )  # fmt: skip
        return self._served

    async def _answer(self, request: f.Request) -> str | None:
        try:
            return await dispatch(self._served or self._serving(), request)
        except Exception as exc:
            return self._error_reply(request, exc)

    def _error_reply(self, request: f.Request, exc: Exception) -> str:
        op = request.op
        if isinstance(exc, CallboardError):
            message = str(exc)
            if exc.code == "internal":
                log.error("internal error answering %s %r", op, request.id, exc_info=exc)
                message += " (an internal error: please report it with the server's log)"
            return f.encode_error(request.id, exc.code, message, type(exc).__name__)
        log.error("internal error answering %s %r", op, request.id, exc_info=exc)
        return f.encode_error(
            request.id, "internal",
            f"an internal error ({type(exc).__name__}: {exc}) stopped this {op}; it is a "
            "bug: please report it with the server's log",
        )  # fmt: skip
