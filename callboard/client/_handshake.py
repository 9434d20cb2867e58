"""Opening a connection: TCP (and TLS), the websocket handshake, ``hello`` and ``welcome``.

Everything that can go wrong before a `Connection` exists is turned here
into the client's own errors (`ConnectionFailed`, `Unauthorized`,
`ProtocolError`), so that the reconnect loop decides on one question:
``retryable`` or not.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import trio
from trio_websocket import ConnectionClosed, ConnectionRejected, HandshakeError, wrap_client_stream

from ..errors import CallboardError
from ._connection import MAX_FRAME, PROTOCOL, Connection, describe_close
from ._errors import ConnectionFailed, ProtocolError, Unauthorized, error_from_frame
from ._wire import decode, encode

__all__ = ["connection_errors", "open_connection", "unwrap_single"]


async def open_connection(
    nursery: trio.Nursery,
    url: str,
    *,
    token: str | None,
    client_name: str,
    connect_timeout: float,
) -> Connection:
    """Connect, say ``hello`` and check the ``welcome``; run under `connection_errors`.

    The TCP stream is opened here, not by trio-websocket, so that it can be
    closed for certain: when the server closes first, trio-websocket's client
    waits for the TCP close and never closes its own stream.

    The token goes in the ``Authorization`` header, not in ``hello``, so that
    it never appears in a frame a server might log.
    """
    headers = [(b"Authorization", f"Bearer {token}".encode())] if token else []
    stream: trio.SocketStream | trio.SSLStream[trio.SocketStream] | None = None
    try:
        with trio.fail_after(connect_timeout):
            stream, host, resource = await _open_stream(url)
            ws = await wrap_client_stream(
                nursery, stream, host, resource, extra_headers=headers, max_message_size=MAX_FRAME
            )
            hello = {"op": "hello", "id": "0", "protocol": PROTOCOL, "client": client_name}
            await ws.send_message(encode(hello))
            reply = decode(await ws.get_message())
        if reply["op"] == "error":
            raise error_from_frame(reply)
        if reply["op"] != "welcome":
            raise ProtocolError(f"the gateway at {url} answered hello with {reply!r}, not welcome")
        if reply.get("protocol") != PROTOCOL:
            raise ProtocolError(
                f"the gateway at {url} speaks protocol {reply.get('protocol')!r}; "
                f"this client speaks {PROTOCOL}"
            )
    except BaseException as exc:
        if stream is not None:
            with trio.move_on_after(1.0, shield=True):
                await stream.aclose()
        if isinstance(exc, trio.TooSlowError):
            message = f"cannot connect to {url}: no welcome within {connect_timeout:g} s"
            raise ConnectionFailed(message) from None
        if isinstance(exc, ConnectionClosed):
            raise _closed_early(url, exc) from None
        raise
    return Connection(ws, stream, url)


async def _open_stream(
    url: str,
) -> tuple[trio.SocketStream | trio.SSLStream[trio.SocketStream], str, str]:
    """TCP (and TLS for ``wss``) to the URL's host; returns the stream, Host header, path."""
    parts = urlsplit(url)
    secure = parts.scheme == "wss"
    host = parts.hostname or ""
    port = parts.port or (443 if secure else 80)
    resource = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    header = host if parts.port is None else f"{host}:{port}"
    if ":" in host:
        header = f"[{host}]" if parts.port is None else f"[{host}]:{port}"
    if secure:
        context = ssl.create_default_context()
        secured = await trio.open_ssl_over_tcp_stream(
            host, port, ssl_context=context, https_compatible=True
        )
        return secured, header, resource
    return await trio.open_tcp_stream(host, port), header, resource


def _closed_early(url: str, exc: ConnectionClosed) -> CallboardError:
    if exc.reason is not None and exc.reason.code == 1008:
        return Unauthorized(
            f"the gateway at {url} closed the connection as a policy violation (1008): "
            "the token is missing or wrong; pass token= or set CALLBOARD_TOKEN"
        )
    return ConnectionFailed(
        f"the gateway at {url} closed the connection before welcoming it ({describe_close(exc)})"
    )


@contextmanager
def connection_errors(url: str) -> Iterator[None]:
    """Turn what trio-websocket and the OS raise while connecting into `ConnectionFailed`.

    Also unwraps a nursery's single-error group: a refused handshake is
    raised inside trio-websocket's reader task, so it arrives as a group.
    """
    try:
        with unwrap_single():
            yield
    except ConnectionRejected as exc:
        raise ConnectionFailed(
            f"the gateway at {url} refused the websocket handshake with HTTP {exc.status_code}"
            + (" (a foreign Origin?)" if exc.status_code == 403 else ""),
            retryable=exc.status_code >= 500,
        ) from None
    except HandshakeError as exc:
        raise ConnectionFailed(f"cannot connect to {url}: {exc!r}") from None
    except OSError as exc:
        raise ConnectionFailed(f"cannot connect to {url}: {_os_reason(exc)}") from None


@contextmanager
def unwrap_single() -> Iterator[None]:
    """Re-raise the one exception of a single-error group as itself.

    A background nursery wraps even the body's own exception in a group;
    callers of an async context manager expect the exception they raised.
    Its cause and context are kept as they were.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) != 1:
            raise
        exc = group.exceptions[0]
        cause, context, suppress = exc.__cause__, exc.__context__, exc.__suppress_context__
        try:
            raise exc
        finally:
            exc.__cause__, exc.__context__ = cause, context
            exc.__suppress_context__ = suppress


def _os_reason(exc: OSError) -> str:
    """The first OS-level reason (trio wraps one per address tried), as a phrase."""
    causes = getattr(exc.__cause__, "exceptions", ())
    first = next((c for c in causes if isinstance(c, OSError) and c.strerror), exc)
    # trio writes "Error connecting to ('HOST', PORT): Connection refused".
    reason = (first.strerror or str(first)).rsplit("): ", 1)[-1].lower()
    if isinstance(first, ConnectionRefusedError):
        reason += " (is `callboard serve` running there?)"
    return reason


def _describe(exc: ConnectionClosed) -> str:
    reason = exc.reason
    if reason is None:
        return "no close frame"
    return f"code {reason.code}" + (f": {reason.reason}" if reason.reason else "")
