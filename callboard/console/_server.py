"""The console's HTTP server: the packaged files, on loopback, for one gateway.

It speaks HTTP/1.1 through h11 (the sans-I/O parser that trio-websocket's
wsproto is built on) straight on trio streams, so it needs no thread and
ends when its nursery is cancelled. One request per connection (``Connection:
close``): the page is a handful of files, and a connection that answers once
cannot be held open by a client. Every connection gets ``REQUEST_TIMEOUT``
seconds in all, at most ``MAX_CONNECTIONS`` are served at once (more are
closed unanswered), and a request's head may be ``MAX_HEAD`` bytes.

Two checks come before a file is read:

- **Host** must name the console as the browser reached it,
  ``127.0.0.1:PORT`` or ``localhost:PORT``; anything else is 421. A page
  on another site that rebinds its DNS name to 127.0.0.1 sends its own
  name, so it cannot read the console (DNS rebinding).
- **The path** must be one of the packaged files' (`ConsoleFiles`).

The page then talks to the gateway like any other client. The gateway
admits the console's origin (`Console.origins`, both names of the port
actually bound) and no other, and the page presents the operator's token in
its ``hello``, as docs/protocol.md allows browsers to.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from http import HTTPStatus
from typing import NoReturn

import attrs
import h11
import trio

from ._files import Answer, ConsoleFiles, read_files

__all__ = [
    "DEFAULT_CONSOLE_PORT",
    "MAX_CONNECTIONS",
    "REQUEST_TIMEOUT",
    "Console",
    "open_console",
]

log = logging.getLogger("callboard.console")

DEFAULT_CONSOLE_PORT = 7342
REQUEST_TIMEOUT = 10.0  # seconds a connection may take, from accept to the last byte out
MAX_CONNECTIONS = 64  # connections served at once; more are closed unanswered
MAX_HEAD = 16 * 1024  # bytes of one request's line and headers
_HOST = "127.0.0.1"


@attrs.define
class Console:
    """The console's bound listener, before and while it serves (`open_console`)."""

    port: int
    _listeners: list[trio.SocketListener]
    _serving: int = 0

    @property
    def url(self) -> str:
        """Where the page is, without the token: ``http://127.0.0.1:PORT/``."""
        return f"http://{_HOST}:{self.port}/"

    def url_with_token(self, token: str) -> str:
        """The page's URL with the token in its fragment, which browsers never send."""
        return f"{self.url}#token={token}"

    @property
    def origins(self) -> tuple[str, str]:
        """The origins the page runs in, for the gateway's Origin check."""
        return (f"http://{_HOST}:{self.port}", f"http://localhost:{self.port}")

    @property
    def hosts(self) -> frozenset[str]:
        """The ``Host`` headers the console answers."""
        return frozenset({f"{_HOST}:{self.port}", f"localhost:{self.port}"})

    async def serve(self, gateway_url: str, *, task_status: trio.TaskStatus[str]) -> NoReturn:
        """Answer requests until cancelled; ``started(url)`` once accepting.

        ``gateway_url`` is the gateway's ``ws://HOST:PORT/v1``; a gateway bound
        to every interface is reached from the page through 127.0.0.1.
        """
        files = ConsoleFiles.for_gateway(read_files(), _reachable(gateway_url))
        async with trio.open_nursery() as nursery:
            handler = partial(self._handle, files)
            await nursery.start(trio.serve_listeners, handler, self._listeners)
            log.info("console at %s (for the gateway at %s)", self.url, files.gateway_url)
            task_status.started(self.url)
            await trio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    async def _handle(self, files: ConsoleFiles, stream: trio.SocketStream) -> None:
        """One connection: one request, one answer. Never raises an error."""
        try:
            if self._serving < MAX_CONNECTIONS:
                self._serving += 1
                try:
                    with trio.move_on_after(REQUEST_TIMEOUT):
                        await self._answer(files, stream)
                finally:
                    self._serving -= 1
        except (OSError, trio.BrokenResourceError, h11.ProtocolError) as exc:
            log.debug("a console connection ended early: %s", exc)
        except Exception:  # contained: one bad connection must not end the console
            log.exception("a console connection failed; the console goes on")
        finally:
            with trio.move_on_after(1, shield=True):
                await stream.aclose()

    async def _answer(self, files: ConsoleFiles, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        try:
            event = await _next_event(conn, stream)
        except h11.RemoteProtocolError as exc:
            answer = files.refusal(400, f"that is not an HTTP request the console reads: {exc}\n")
            await _send(conn, stream, answer)
            return
        if not isinstance(event, h11.Request):
            return  # closed before a request came
        host = _header(event, b"host")
        if host is None or host.lower() not in self.hosts:
            shown = repr(host[:100]) if host is not None else "no Host"
            why = f"{shown} is not the console's host: open {self.url}\n"
            await _send(conn, stream, files.refusal(421, why))
            return
        method = event.method.decode("ascii", "replace")
        target = event.target.decode("ascii", "replace")
        await _send(conn, stream, files.answer(method, target))


async def _next_event(conn: h11.Connection, stream: trio.SocketStream) -> object:
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        conn.receive_data(await stream.receive_some(MAX_HEAD))


async def _send(conn: h11.Connection, stream: trio.SocketStream, answer: Answer) -> None:
    reason = HTTPStatus(answer.status).phrase.encode()
    head = h11.Response(status_code=answer.status, headers=list(answer.headers), reason=reason)
    data = conn.send(head) or b""
    if answer.body:
        data += conn.send(h11.Data(data=answer.body)) or b""
    data += conn.send(h11.EndOfMessage()) or b""
    await stream.send_all(data)


def _header(request: h11.Request, name: bytes) -> str | None:
    for key, value in request.headers:
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _reachable(gateway_url: str) -> str:
    """The gateway's URL as the page on loopback reaches it (a wildcard bind
    listens on 127.0.0.1 too)."""
    for wildcard in ("ws://0.0.0.0:", "ws://[::]:"):
        if gateway_url.startswith(wildcard):
            return f"ws://{_HOST}:" + gateway_url[len(wildcard) :]
    return gateway_url


@asynccontextmanager
async def open_console(port: int | None = None) -> AsyncIterator[Console]:
    """Bind the console on 127.0.0.1 (and close it on exit); serve it with `Console.serve`.

    ``port`` None means `DEFAULT_CONSOLE_PORT`, or a free port if another
    process holds that one (as Jupyter moves on from a busy port): the URL
    in the log says where. A port that was asked for and is busy is an
    `OSError` naming it. 0 picks a free port.
    """
    asked = DEFAULT_CONSOLE_PORT if port is None else port
    try:
        listeners = await trio.open_tcp_listeners(asked, host=_HOST)
    except OSError as exc:
        if port is not None or exc.errno != errno.EADDRINUSE:
            raise OSError(
                exc.errno, f"cannot serve the console on {_HOST}:{asked}: {exc.strerror} "
                "(pick another with --console-port, or --no-console)"
            ) from None  # fmt: skip
        log.warning("port %d is in use: the console takes a free port", DEFAULT_CONSOLE_PORT)
        listeners = await trio.open_tcp_listeners(0, host=_HOST)
    bound = listeners[0].socket.getsockname()[1]
    try:
        yield Console(bound, listeners)
    finally:
        with trio.CancelScope(shield=True):
            for listener in listeners:
                await listener.aclose()
