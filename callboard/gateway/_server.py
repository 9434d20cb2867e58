"""`Gateway` and `serve_gateway`: accept TCP, vet the upgrade, run one `Connection` each.

We serve TCP ourselves and hand each stream to ``trio_websocket.
wrap_server_stream`` (rather than ``serve_websocket``) for three reasons: the
handshake gets our own deadline (trio-websocket holds a half-open one for
60 s), the Origin and path are checked before the upgrade (HTTP 403/404),
and each connection keeps its TCP stream, so a client that stopped reading
can be cut off without writing a close frame into a half-sent one.

Every per-connection handler contains its errors: in trio-websocket one
uncaught exception would take the whole server down.

Shutdown (cancel `serve`): the listeners close at once, connections stop
reading, in-flight requests get ``shutdown_grace`` to answer, and then each
connection is closed with 1001. The connections live in a shielded nursery
so that the cancellation does not cut them first; the wait is bounded, and
whatever is left after it has its TCP stream closed.
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path
from typing import NoReturn

import attrs
import trio
from trio_websocket import WebSocketRequest, wrap_server_stream
from wsproto.utilities import LocalProtocolError

from ..runtime import Runtime
from ._access import Access
from ._config import GatewayConfig
from ._connection import Connection
from ._frames import EventEncoder
from ._grants import FailureLimiter, TokenBucket
from ._held_writes import HeldWrites
from ._subscriptions import Counters
from ._tokens import CLIENT_TOKENS_FILE, TokenFile, ensure_operator_token, read_token

__all__ = ["Gateway", "GatewayStatistics", "serve_gateway"]

log = logging.getLogger("callboard.gateway")


@attrs.frozen
class GatewayStatistics:
    """A snapshot of a gateway's counters (for metrics and tests).

    ``queued_frames`` counts the frames waiting in every connection's outbox
    now; ``queued_frames_peak`` is the most one outbox ever held, which the
    ``send_queue`` limit bounds, and ``queued_bytes_peak`` the most
    characters one held, which ``send_queue_bytes`` bounds (give or take the
    one frame that went over it).
    """

    connections: int
    connections_total: int
    refused_total: int
    dropped_total: int
    subscriptions: int
    lagged_total: int
    requests_total: int
    sends_accepted_total: int
    queued_frames: int
    queued_frames_peak: int
    queued_bytes_peak: int


def _header(request: WebSocketRequest, name: bytes) -> str | None:
    for key, value in request.headers:
        if key.lower() == name:
            return value.decode("latin-1").strip()
    return None


def _bearer(request: WebSocketRequest) -> str | None:
    """The token of ``Authorization: Bearer TOKEN``; any other value is a wrong token."""
    value = _header(request, b"authorization")
    if value is None:
        return None
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else value


class Gateway:
    """The websocket front of one runtime (docs/protocol.md). Run it with `serve`."""

    def __init__(self, runtime: Runtime, config: GatewayConfig | None = None) -> None:
        self.runtime = runtime
        self.config = config or GatewayConfig()
        self.url: str | None = None
        self._counters = Counters()
        self._encoder = EventEncoder()
        self._connections: set[Connection] = set()
        self._streams = 0
        self._accepted = 0
        self._refused = 0
        self._peak = 0
        self._peak_bytes = 0
        self._origins: frozenset[str] = frozenset()
        self._access: Access | None = None
        self._operator_token: str | None = None
        self._closing = False
        self._stop = trio.Event()
        self._emptied = trio.Event()

    def statistics(self) -> GatewayStatistics:
        c = self._counters
        connections = list(self._connections)
        outboxes = [conn.outbox for conn in connections]
        return GatewayStatistics(
            connections=len(self._connections),
            connections_total=self._accepted,
            refused_total=self._refused,
            dropped_total=c.dropped,
            subscriptions=sum(conn.subscriptions for conn in connections),
            lagged_total=c.lagged,
            requests_total=c.requests,
            sends_accepted_total=c.sends_accepted,
            queued_frames=sum(len(o) for o in outboxes),
            queued_frames_peak=max([self._peak, *(o.peak for o in outboxes)]),
            queued_bytes_peak=max([self._peak_bytes, *(o.peak_bytes for o in outboxes)]),
        )

    async def serve(
        self, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED
    ) -> NoReturn:
        """Listen until cancelled; ``task_status.started(url)`` once connections are accepted.

        The URL is ``ws://HOST:PORT/v1`` with the real port (``port=0`` picks one).
        """
        cfg = self.config
        self._access = self._load_tokens()
        listeners = await trio.open_tcp_listeners(cfg.port, host=cfg.host or None)
        if cfg.port == 0 and len(listeners) > 1:
            # One name, several addresses: each got its own free port. Keep one.
            for extra in listeners[1:]:
                await extra.aclose()
            listeners = listeners[:1]
        port = listeners[0].socket.getsockname()[1]
        bound = cfg.host or listeners[0].socket.getsockname()[0]
        host = f"[{bound}]" if ":" in bound else bound
        self.url = f"ws://{host}:{port}/v1"
        own = {f"http://127.0.0.1:{port}", f"http://localhost:{port}", f"http://{host}:{port}"}
        self._origins = frozenset(o.lower().rstrip("/") for o in (*own, *cfg.allowed_origins))
        async with trio.open_nursery() as nursery:
            connections = await nursery.start(self._hold_connections)
            try:
                serve = partial(trio.serve_listeners, handler_nursery=connections)
                await nursery.start(serve, self._handle_stream, listeners)
                log.info("gateway listening on %s", self.url)
                task_status.started(self.url)
                await trio.sleep_forever()
            finally:
                self._closing = True
                for conn in list(self._connections):
                    conn.shutdown()
                self._stop.set()
                with trio.CancelScope(shield=True):
                    for listener in listeners:  # serve_listeners closes them too; twice is fine
                        await listener.aclose()
        raise AssertionError("unreachable")  # pragma: no cover

    @property
    def operator_token(self) -> str:
        """The operator token connections may present; known once `serve` has started."""
        if self._operator_token is None:
            raise RuntimeError("the gateway has not started: its token is read when it starts")
        return self._operator_token

    def _load_tokens(self) -> Access:
        """The operator token (made in the data directory if none was given) and
        the client tokens; once, before listening."""
        data = Path(self.runtime.settings["data_dir"])
        token = self.config.token
        if token is None:
            token = read_token(ensure_operator_token(data))
        self._operator_token = token
        cfg = self.config
        quota = cfg.activation_quota
        return Access(
            TokenFile(token, data / CLIENT_TOKENS_FILE),
            FailureLimiter(cfg.auth_burst, cfg.auth_rate),
            (lambda: TokenBucket(quota / 60, quota)) if quota is not None else None,
        )

    async def _hold_connections(self, task_status: trio.TaskStatus[trio.Nursery]) -> None:
        cfg = self.config
        with trio.CancelScope(shield=True):
            async with trio.open_nursery() as connections:
                task_status.started(connections)
                await self._stop.wait()
                if self._connections:
                    log.info("closing %d connections", len(self._connections))
                    with trio.move_on_after(cfg.shutdown_grace + 2 * cfg.close_timeout):
                        await self._emptied.wait()
                for conn in list(self._connections):  # past the grace: no more waiting
                    await conn.drop("it was still open when the server stopped", graceful=False)
                connections.cancel_scope.cancel()

    async def _handle_stream(self, stream: trio.SocketStream) -> None:
        """One TCP connection, from handshake to close. Never raises an error."""
        try:
            address, port = stream.socket.getpeername()[:2]
            remote = f"{address}:{port}"
        except OSError:
            remote = "unknown"
        try:
            if not self._closing and self._streams < 2 * self.config.max_connections:
                self._streams += 1
                try:
                    async with trio.open_nursery() as nursery:
                        try:
                            await self._handshake(nursery, stream, remote)
                        finally:
                            nursery.cancel_scope.cancel()
                finally:
                    self._streams -= 1
        except* Exception as group:
            closing, failures = group.split(_answered_after_close)
            if closing is not None:
                why = "; ".join(str(e) for e in _leaves(closing))
                log.info("the connection from %s ended while closing: %s", remote, why)
            if failures is not None:
                log.error("the connection from %s failed; others go on", remote, exc_info=failures)
        finally:
            with trio.move_on_after(self.config.close_timeout, shield=True):
                await stream.aclose()

    async def _handshake(
        self, nursery: trio.Nursery, stream: trio.SocketStream, remote: str
    ) -> None:
        cfg = self.config
        with trio.move_on_after(cfg.handshake_timeout) as deadline:
            writes = HeldWrites(stream)
            request = await wrap_server_stream(
                nursery, writes, max_message_size=cfg.transport_max_frame
            )
            refusal = self._refusal(request)
            if refusal is not None:
                status, why = refusal
                self._refused += 1
                log.warning("refused a connection from %s: %s", remote, why)
                await request.reject(status, body=why.encode())
                return
            ws = await request.accept()
        if deadline.cancelled_caught:
            log.info("dropped %s: no handshake within %s s", remote, cfg.handshake_timeout)
            return
        assert self._access is not None
        conn = Connection(
            ws, writes, self.runtime, cfg, self._counters, self._encoder, self._access,
            header_token=_bearer(request), remote=remote,
        )  # fmt: skip
        self._accepted += 1
        self._connections.add(conn)
        if self._closing:  # accepted while the server began to stop
            conn.shutdown()
        log.debug("connection from %s opened (%d open)", remote, len(self._connections))
        try:
            await conn.serve()
        finally:
            self._connections.discard(conn)
            self._peak = max(self._peak, conn.outbox.peak)
            self._peak_bytes = max(self._peak_bytes, conn.outbox.peak_bytes)
            if self._closing and not self._connections:
                self._emptied.set()
            log.debug("connection from %s closed (%d open)", remote, len(self._connections))

    def _refusal(self, request: WebSocketRequest) -> tuple[int, str] | None:
        path = request.path.partition("?")[0]
        if path != "/v1":
            return 404, f"there is nothing at {path[:100]!r}: the callboard gateway is at /v1\n"
        origin = _header(request, b"origin")
        if origin is not None and origin.lower().rstrip("/") not in self._origins:
            return 403, f"origin {origin[:100]!r} is not allowed to connect\n"
        if self._closing:
            return 503, "the server is shutting down\n"
        if len(self._connections) >= self.config.max_connections:
            return 503, f"the server has {len(self._connections)} connections, its limit\n"
        return None


def _answered_after_close(exc: BaseException) -> bool:
    """trio-websocket's reader answers a ping that came after our close frame,
    and wsproto refuses: the connection was ending anyway (it ends at once,
    without the rest of the closing handshake)."""
    text = str(exc)
    return (
        isinstance(exc, LocalProtocolError)
        and text.startswith("Event Pong(")
        and text.endswith(("state ConnectionState.LOCAL_CLOSING.", "state ConnectionState.CLOSED."))
    )


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    leaves: list[BaseException] = []
    for exc in group.exceptions:
        leaves.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return leaves


async def serve_gateway(
    runtime: Runtime,
    config: GatewayConfig | None = None,
    *,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> NoReturn:
    """Serve ``runtime`` over websockets (docs/protocol.md) until cancelled.

    ``task_status.started(url)`` gives the real ``ws://HOST:PORT/v1`` once
    listening. Cancelling it is the graceful stop: no new connections,
    in-flight requests answered (within ``shutdown_grace``), then close 1001.
    """
    await Gateway(runtime, config).serve(task_status=task_status)
