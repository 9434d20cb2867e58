"""A scripted model server on loopback, for the whole test suite: OpenAI-compatible,
or the Anthropic Messages API with ``wire="anthropic"`` (``scripted_messages``).

Why a real server and not a mock of httpx: the tests exercise the real path
(sockets, chunked bodies, disconnects), and the runtime under test often runs
in a child process that gets SIGKILLed, which no in-process mock can reach.
The server runs in a background thread of the test process, so it outlives
the child and records exactly what the child sent::

    with ScriptedModel([text("Hello"), tool_call("read_file", {"path": "a"})]) as model:
        ...  # point the runtime (or a ChatClient) at model.base_url
        model.wait_for_requests_sync(2, timeout=10)
        assert model.requests[1]["messages"][-1]["role"] == "tool"

Replies (defined in ``scripted_replies``, re-exported here): ``text("...")``,
``tool_call(name, args)``, ``tool_calls([...])``, ``hold(first_delta=None)``,
``status(code, body, headers)``, ``raw(data, cut=False)``, ``drop()``;
streamed kinds take ``crlf=True``. The nth ``POST /v1/chat/completions`` gets
the nth reply (or, if the item is a callable, the reply it returns for the
parsed request body).
Requests beyond the script are recorded and answered 500 with a body saying
the script ran out. Leaving the ``with`` block stops the server promptly,
even with requests held open by :func:`hold`.
"""

from __future__ import annotations

import functools
import json
import socket
import sys
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Self

import attrs
import trio
from scripted_messages import chat_request, error_body
from scripted_replies import (
    DEFAULT_USAGE,
    Drop,
    Hold,
    Raw,
    Reply,
    ScriptedCall,
    ScriptItem,
    Status,
    Text,
    ToolCalls,
    drop,
    hold,
    raw,
    status,
    text,
    tool_call,
    tool_calls,
)

# The reply kinds are re-exported: tests import everything from this module.
__all__ = [
    "DEFAULT_USAGE",
    "Drop",
    "Hold",
    "Raw",
    "Reply",
    "ScriptItem",
    "ScriptedCall",
    "ScriptedModel",
    "Status",
    "Text",
    "ToolCalls",
    "drop",
    "hold",
    "raw",
    "status",
    "text",
    "tool_call",
    "tool_calls",
]

_THREAD_WAIT = 300.0  # seconds a waiting thread lives at most if the server never stops


class _Exchange:
    """One request being answered: the handler plus helpers to write the answer."""

    def __init__(self, handler: _Handler, number: int, body: dict[str, Any]) -> None:
        self.handler = handler
        self.number = number
        self.body = body
        self.wire = handler.server.model.wire

    def send_whole(
        self, code: int, body: bytes, content_type: str, headers: Iterable[tuple[str, str]]
    ) -> None:
        self.handler.send_response(code)
        self.handler.send_header("Content-Type", content_type)
        self.handler.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.handler.send_header(name, value)
        self.handler.end_headers()
        self.handler.wfile.write(body)

    def start_chunked(self, code: int, content_type: str) -> None:
        self.handler.send_response(code)
        self.handler.send_header("Content-Type", content_type)
        self.handler.send_header("Cache-Control", "no-cache")
        self.handler.send_header("Transfer-Encoding", "chunked")
        self.handler.end_headers()

    def send_chunk(self, data: bytes) -> None:
        if data:  # an empty chunk would end the body
            self.handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_chunked(self) -> None:
        self.handler.wfile.write(b"0\r\n\r\n")

    def close_connection(self) -> None:
        self.handler.close_connection = True

    def hold(self) -> None:
        """Wait until the client disconnects or the server stops; then close."""
        model = self.handler.server.model
        sock = self.handler.connection
        self.handler.close_connection = True
        sock.settimeout(0.02)  # poll, so that stopping the server ends the hold promptly
        while not model._stopping.is_set():
            try:
                data = sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                data = b""
            if model._stopping.is_set():
                return
            if not data:
                model._note_disconnect()
                return


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked bodies, like real servers
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the tests assert on model.requests instead

    def setup(self) -> None:
        super().setup()
        # Answers are written in many small pieces: without this, Nagle's algorithm
        # against the client's delayed ACK stalls each exchange by ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.model._opened(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.model._closed(self.connection)

    def do_POST(self) -> None:
        model = self.server.model
        data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != model.path:
            self._not_found()
            return
        try:
            body = json.loads(data)
        except ValueError:
            body = {"unparsed": data.decode("utf-8", errors="replace")}
        headers = {name.lower(): value for name, value in self.headers.items()}
        number, reply = model._take(body, headers)
        try:
            reply.serve(_Exchange(self, number, body))
        except ConnectionError:
            self.close_connection = True
            model._note_disconnect()

    def do_GET(self) -> None:
        self._not_found()

    def _not_found(self) -> None:
        message = f"the scripted model serves only POST {self.server.model.path}".encode()
        _Exchange(self, 0, {}).send_whole(404, message, "text/plain", ())


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # ScriptedModel waits for its handlers itself

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model
        super().__init__(("127.0.0.1", model.port), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if not isinstance(error, ConnectionError):
            self.model._errors.append(error)


@attrs.define(eq=False)
class ScriptedModel:
    """The server. Use as ``with ScriptedModel([...]) as model:``; see the module docstring."""

    script: list[ScriptItem] = attrs.field(converter=list, factory=list)
    path_prefix: str = "/v1"
    wire: Literal["openai", "anthropic"] = "openai"
    port: int = 0  # 0 picks a free one; a test bringing a closed port back up names it
    _cond: threading.Condition = attrs.field(factory=threading.Condition, init=False)
    _requests: list[dict[str, Any]] = attrs.field(factory=list, init=False)
    _headers: list[dict[str, str]] = attrs.field(factory=list, init=False)
    _disconnects: int = attrs.field(default=0, init=False)
    _connections: set[socket.socket] = attrs.field(factory=set, init=False)
    _errors: list[BaseException | None] = attrs.field(factory=list, init=False)
    _stopping: threading.Event = attrs.field(factory=threading.Event, init=False)
    _server: _Server | None = attrs.field(default=None, init=False)
    _thread: threading.Thread | None = attrs.field(default=None, init=False)
    _port: int | None = attrs.field(default=None, init=False)

    def __enter__(self) -> Self:
        self._server = _Server(self)
        self._port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="scripted-model",
            daemon=True,
        )
        self._thread.start()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.stop()
        if self._errors and exc is None:
            raise RuntimeError(f"the scripted model failed while answering: {self._errors[0]!r}")

    @property
    def path(self) -> str:
        """The one path served: ``/v1/chat/completions``, or ``/v1/messages`` (anthropic)."""
        if self.wire == "anthropic":
            return f"{self.path_prefix}/messages"
        return f"{self.path_prefix}/chat/completions"

    @property
    def base_url(self) -> str:
        """What a client of the wire puts before the endpoint: ``http://127.0.0.1:PORT/v1``
        (before ``/chat/completions``), or ``http://127.0.0.1:PORT`` for anthropic (before
        ``/v1/messages``, as ``https://api.anthropic.com`` is).

        Still readable after the server stopped, for assertions.
        """
        assert self._port is not None, "use ScriptedModel as a context manager"
        prefix = self.path_prefix
        if self.wire == "anthropic":
            prefix = prefix.removesuffix("/v1")
        return f"http://127.0.0.1:{self._port}{prefix}"

    @property
    def provider_fields(self) -> dict[str, str]:
        """What a spec adds to use this wire: ``{}``, or ``{"provider": "anthropic"}``."""
        return {"provider": self.wire} if self.wire != "openai" else {}

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request body so far, parsed, in arrival order (a copy)."""
        with self._cond:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """Every request as an OpenAI chat request (``requests`` itself on the openai
        wire; on anthropic, read back by ``scripted_messages.chat_request``)."""
        if self.wire == "anthropic":
            return [chat_request(body) for body in self.requests]
        return self.requests

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """The headers of every request (names lower-cased), in arrival order (a copy)."""
        with self._cond:
            return list(self._headers)

    @property
    def disconnects(self) -> int:
        """How many clients went away while a reply was held or being written."""
        with self._cond:
            return self._disconnects

    def add(self, *items: ScriptItem) -> None:
        """Append replies to the script (for requests not yet arrived)."""
        with self._cond:
            self.script.extend(items)

    def wait_for_requests_sync(self, n: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Block until ``n`` requests arrived; return them. Raises ``TimeoutError``."""
        self._wait(lambda: len(self._requests) >= n, timeout, f"{n} requests")
        return self.requests

    async def wait_for_requests(self, n: int) -> list[dict[str, Any]]:
        """:meth:`wait_for_requests_sync` from trio, in a thread abandoned on cancel.

        Bound it with the test's ``trio.fail_after``; the thread itself gives up
        when the server stops.
        """
        wait = functools.partial(self.wait_for_requests_sync, n, _THREAD_WAIT)
        return await trio.to_thread.run_sync(wait, abandon_on_cancel=True)

    def wait_for_disconnects_sync(self, n: int, timeout: float = 10.0) -> None:
        """Block until ``n`` clients went away mid-reply. Raises ``TimeoutError``."""
        self._wait(lambda: self._disconnects >= n, timeout, f"{n} disconnects")

    async def wait_for_disconnects(self, n: int) -> None:
        """:meth:`wait_for_disconnects_sync` from trio (bound it with ``trio.fail_after``)."""
        wait = functools.partial(self.wait_for_disconnects_sync, n, _THREAD_WAIT)
        await trio.to_thread.run_sync(wait, abandon_on_cancel=True)

    def stop(self) -> None:
        """Stop serving, end held replies, close every connection. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        with self._cond:
            self._stopping.set()
            self._cond.notify_all()
            connections = list(self._connections)
        server.shutdown()
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by its handler
        with self._cond:
            self._cond.wait_for(lambda: not self._connections, timeout=5.0)
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def _wait(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        with self._cond:
            self._cond.wait_for(lambda: ready() or self._stopping.is_set(), timeout)
            if not ready():
                when = "before it stopped" if self._stopping.is_set() else f"within {timeout} s"
                raise TimeoutError(
                    f"the scripted model did not see {what} {when}: "
                    f"{len(self._requests)} requests, {self._disconnects} disconnects"
                )

    def _take(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Reply]:
        with self._cond:
            self._requests.append(body)
            self._headers.append(headers)
            number = len(self._requests)
            item = self.script[number - 1] if number <= len(self.script) else None
            self._cond.notify_all()
        if item is None:
            message = (
                f"the scripted model ran out of replies: this is request {number} "
                f"and the script has {len(self.script)}"
            )
            said = {"error": {"message": message, "type": "server_error"}}
            if self.wire == "anthropic":
                said = error_body(500, message)
            return number, status(500, said)
        return number, item if not callable(item) else item(body)

    def _note_disconnect(self) -> None:
        with self._cond:
            self._disconnects += 1
            self._cond.notify_all()

    def _opened(self, connection: socket.socket) -> None:
        with self._cond:
            self._connections.add(connection)

    def _closed(self, connection: socket.socket) -> None:
        with self._cond:
            self._connections.discard(connection)
            self._cond.notify_all()
