"""Prometheus metrics for ``callboard serve --metrics-port``, behind the same token,
and the health endpoints a load balancer or a supervisor asks, without it.

The exposition runs on its own port, in a thread (prometheus_client is
synchronous), and every scrape samples on the trio thread (`sample`), with
prometheus_client's ``process_*`` metrics of this process beside ours. Two
checks come before any metric is read:

- **Host**: the request's ``Host`` must name the address the server bound
  (or ``localhost``/``127.0.0.1``/``[::1]`` for a loopback bind), with its
  port; anything else is 421. A web page on another origin that rebinds
  its DNS name to 127.0.0.1 sends its own name, so it is refused.
- **Token**: ``Authorization: Bearer TOKEN`` with the operator token; else
  401. Prometheus sends it with ``authorization: {credentials_file: ...}``.

``GET /healthz`` (the process's event loop answers) and ``GET /readyz`` (the store takes
writes: `Runtime.writable`) need neither: load balancers and supervisors
probe them with no credentials, often by an address of their own, so they
are answered before the two checks. They tell nothing but one bit: a fixed
word and 200, or 503, the same bytes whatever the reason, and they read no
state that a scrape would.
"""

from __future__ import annotations

import hmac
import socketserver
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import trio

from ..errors import CallboardError
from ..gateway import Gateway, is_loopback
from ..runtime import Runtime
from ._event_metrics import TAPPED, AgentMetrics
from ._metric_samples import families, sample

__all__ = ["serve_metrics"]

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
_READY_TIMEOUT = 10.0  # seconds a readiness probe waits for the trio thread and the store


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a scrape in progress never holds the process open


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not worth a line each (and a line would go to stderr unformatted)."""


def _hosts(host: str, port: int) -> frozenset[str]:
    names = {host, f"[{host}]"} if ":" in host else {host}
    if is_loopback(host):
        names.update(_LOOPBACK_NAMES)
    return frozenset(f"{name}:{port}".lower() for name in names)


def _guarded(
    app: Callable[..., Iterable[bytes]],
    hosts: frozenset[str],
    authorized: Callable[[str], bool],
    alive: Callable[[], bool],
    ready: Callable[[], bool],
) -> Callable[..., Iterable[bytes]]:
    def guard(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path in ("/healthz", "/readyz"):
            return _health(environ, start_response, alive() if path == "/healthz" else ready())
        host = str(environ.get("HTTP_HOST", "")).lower()
        if host not in hosts:
            start_response("421 Misdirected Request", [("Content-Type", "text/plain")])
            return [b"this is not the host the metrics are served on\n"]
        scheme, _, token = str(environ.get("HTTP_AUTHORIZATION", "")).partition(" ")
        if scheme.lower() != "bearer" or not authorized(token.strip()):
            start_response(
                "401 Unauthorized",
                [("Content-Type", "text/plain"), ("WWW-Authenticate", "Bearer")],
            )
            return [b"present the server's token as 'Authorization: Bearer TOKEN'\n"]
        return app(environ, start_response)

    return guard


def _health(
    environ: dict[str, Any], start_response: Callable[..., Any], ok: bool
) -> Iterable[bytes]:
    """The answer of a health endpoint: one bit, the same bytes for every failure."""
    if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
        start_response(
            "405 Method Not Allowed", [("Content-Type", "text/plain"), ("Allow", "GET, HEAD")]
        )
        return [b"GET it\n"]
    status, body = ("200 OK", b"ok\n") if ok else ("503 Service Unavailable", b"unavailable\n")
    start_response(status, [("Content-Type", "text/plain"), ("Cache-Control", "no-store")])
    return [] if environ["REQUEST_METHOD"] == "HEAD" else [body]


async def serve_metrics(
    rt: Runtime,
    gateway: Gateway,
    host: str,
    port: int,
    token: str,
    *,
    task_status: trio.TaskStatus[str],
) -> None:
    """Prometheus exposition on its own port until cancelled; ``started(url)``."""
    try:
        from prometheus_client import CollectorRegistry, ProcessCollector, make_wsgi_app
    except ImportError:
        raise CallboardError(
            "--metrics-port needs prometheus_client: pip install 'callboard[metrics]'"
        ) from None
    trio_token = trio.lowlevel.current_trio_token()
    agent = AgentMetrics()
    rt.tap(TAPPED, agent.observe)

    class Collector:
        def collect(self) -> Any:
            try:
                sampled = trio.from_thread.run(sample, rt, gateway, agent, trio_token=trio_token)
            except trio.RunFinishedError:
                return
            yield from families(sampled)

    def alive() -> bool:
        # The event loop answers (one that is wedged leaves the probe to time out).
        try:
            return trio.from_thread.run_sync(bool, 1, trio_token=trio_token)
        except trio.RunFinishedError:
            return False

    def ready() -> bool:
        # On an exposition thread: ask the trio thread, bounded.
        async def probe() -> bool:
            with trio.move_on_after(_READY_TIMEOUT):
                return await rt.writable()
            return False

        try:
            return trio.from_thread.run(probe, trio_token=trio_token)
        except trio.RunFinishedError:
            return False

    def authorized(presented: str) -> bool:
        # Checked off the trio thread: compare_digest needs no trio.
        return bool(presented) and hmac.compare_digest(presented.encode(), token.encode())

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    ProcessCollector(registry=registry)  # process_*: CPU, memory, open files, start time
    app = make_wsgi_app(registry)
    server = make_server(host, port, app, server_class=_Server, handler_class=_QuietHandler)
    bound = server.server_port
    server.set_app(_guarded(app, _hosts(host, bound), authorized, alive, ready))
    async with trio.open_nursery() as nursery:
        # Abandoned on cancel: shutdown() below is what ends serve_forever.
        nursery.start_soon(
            partial(trio.to_thread.run_sync, server.serve_forever, abandon_on_cancel=True)
        )
        try:
            shown = f"[{host}]" if ":" in host else host
            task_status.started(f"http://{shown}:{bound}/metrics")
            await trio.sleep_forever()
        finally:
            with trio.move_on_after(5, shield=True):
                await trio.to_thread.run_sync(server.shutdown)
                server.server_close()
