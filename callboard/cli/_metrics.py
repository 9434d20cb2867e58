"""Prometheus metrics for ``callboard serve --metrics-port``, behind the same token.

The exposition runs on its own port, in a thread (prometheus_client is
synchronous), and every scrape samples on the trio thread. Two checks come
before any metric is read:

- **Host**: the request's ``Host`` must name the address the server bound
  (or ``localhost``/``127.0.0.1``/``[::1]`` for a loopback bind), with its
  port; anything else is 421. A web page on another origin that rebinds
  its DNS name to 127.0.0.1 sends its own name, so it is refused.
- **Token**: ``Authorization: Bearer TOKEN`` with the operator token; else
  401. Prometheus sends it with ``authorization: {credentials_file: ...}``.
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

__all__ = ["serve_metrics"]

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


async def _sample(rt: Runtime, gateway: Gateway) -> list[tuple[str, str, str, Any]]:
    """(kind, name, help, value) of every metric; value may be {label: value}."""
    stats = rt.statistics()
    gw = gateway.statistics()
    return [
        ("counter", "callboard_messages_accepted", "Messages acknowledged (all senders)",
         stats.messages_accepted),
        ("counter", "callboard_gateway_sends_accepted", "Messages acknowledged to gateway clients",
         gw.sends_accepted_total),
        ("counter", "callboard_actor_commits", "Actor steps committed", stats.commits),
        ("counter", "callboard_store_commits", "Store transactions (one fsync each)",
         stats.store_batches),
        ("counter", "callboard_store_operations", "Writes in those transactions",
         stats.store_operations),
        ("gauge", "callboard_store_batch_size_max", "Largest group commit so far",
         stats.store_largest_batch),
        ("counter", "callboard_store_commit_seconds", "Time in transactions, fsync included",
         stats.store_seconds),
        ("gauge", "callboard_store_healthy",
         "1 while the store takes writes; 0 from an I/O error until it has recovered",
         int(stats.store_healthy)),
        ("counter", "callboard_store_recoveries", "Fail-stops the store recovered from",
         stats.store_recoveries),
        ("gauge", "callboard_actors_active", "Actors in memory", stats.active),
        ("gauge", "callboard_actors", "Actors by stored status", await rt.actor_counts()),
        ("counter", "callboard_actor_activations", "Actors brought into memory",
         stats.activations),
        ("counter", "callboard_actor_passivations", "Idle actors dropped from memory",
         stats.passivations),
        ("gauge", "callboard_actors_resting", "Actors in memory with no task (idle)",
         stats.resting),
        ("counter", "callboard_actor_restarts", "Restarts after crashes", stats.restarts),
        ("gauge", "callboard_dead_letters", "Messages in the dead letters",
         await rt.dead_letter_count()),
        ("counter", "callboard_lagged_subscriptions", "Subscriptions that fell behind",
         stats.lagged),
        ("counter", "callboard_retention_passes", "Retention passes finished",
         stats.retention_passes),
        ("counter", "callboard_events_pruned", "Events removed by retention", stats.events_pruned),
        ("counter", "callboard_actors_removed", "Stopped actors removed by retention",
         stats.actors_removed),
        ("counter", "callboard_dead_letters_expired", "Dead letters removed by retention",
         stats.dead_letters_expired),
        ("counter", "callboard_store_pages_freed", "Free pages given back to the file system",
         stats.pages_freed),
        ("gauge", "callboard_subscribers", "Event subscriptions in the hub",
         stats.subscribers),
        ("gauge", "callboard_gateway_connections", "Open gateway connections", gw.connections),
        ("counter", "callboard_gateway_connections_accepted", "Connections accepted",
         gw.connections_total),
        ("counter", "callboard_gateway_lagged", "Subscriptions ended with lagged",
         gw.lagged_total),
        ("counter", "callboard_gateway_dropped", "Connections dropped for not reading",
         gw.dropped_total),
        ("gauge", "callboard_gateway_queued_frames", "Frames waiting to be written",
         gw.queued_frames),
    ]  # fmt: skip


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
    app: Callable[..., Iterable[bytes]], hosts: frozenset[str], authorized: Callable[[str], bool]
) -> Callable[..., Iterable[bytes]]:
    def guard(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
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
        from prometheus_client import CollectorRegistry, make_wsgi_app
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    except ImportError:
        raise CallboardError(
            "--metrics-port needs prometheus_client: pip install 'callboard[metrics]'"
        ) from None
    trio_token = trio.lowlevel.current_trio_token()

    class Collector:
        def collect(self) -> Any:
            try:
                sampled = trio.from_thread.run(_sample, rt, gateway, trio_token=trio_token)
            except trio.RunFinishedError:
                return
            for kind, name, text, value in sampled:
                family = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
                if isinstance(value, dict):
                    metric = family(name, text, labels=["status"])
                    for label, count in sorted(value.items()):
                        metric.add_metric([label], count)
                    yield metric
                else:
                    yield family(name, text, value=value)

    def authorized(presented: str) -> bool:
        # Checked off the trio thread: compare_digest needs no trio.
        return bool(presented) and hmac.compare_digest(presented.encode(), token.encode())

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    app = make_wsgi_app(registry)
    server = make_server(host, port, app, server_class=_Server, handler_class=_QuietHandler)
    bound = server.server_port
    server.set_app(_guarded(app, _hosts(host, bound), authorized))
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
