"""``callboard serve``: the runtime and its gateway in one process, until a signal.

One line on stdout says where it listens and where the data lives (scripts
and tests read the port from it, so it is flushed); everything else is
logged to stderr, one line per event worth knowing.

SIGINT or SIGTERM stops it gracefully: the gateway stops accepting, lets
in-flight requests answer and closes connections with 1001 (all bounded),
then the runtime exits (queued commits finish, actors stop) and releases
the data directory; exit 0. A second SIGINT exits at once (130): durability
never depends on the graceful path.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
from functools import partial
from pathlib import Path
from typing import Any

import trio

from .. import Actor, CallboardError, Runtime, open_runtime
from ..gateway import Gateway, GatewayConfig

__all__ = ["add_parsers", "load_kind", "run_serve"]

log = logging.getLogger("callboard.serve")

DEFAULT_DATA = "./callboard-data"
EXIT_USAGE = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


def add_parsers(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="run the runtime and its websocket gateway",
        description="Run the runtime on a data directory and serve it over websockets "
        "(PROTOCOL.md) until SIGINT or SIGTERM.",
    )
    add = parser.add_argument
    add("--data", default=DEFAULT_DATA, metavar="DIR", help="the data directory (%(default)s)")
    add("--host", default="127.0.0.1", help="interface to bind (%(default)s; others need a token)")
    add("--port", type=int, default=7341, help="port to bind (%(default)s; 0 picks a free one)")
    add("--token", default=None, help="the token clients must present ($CALLBOARD_TOKEN)")
    add("--kind", action="append", default=[], metavar="MODULE:CLASS",
        help="an actor kind to load, e.g. mypkg.kinds:Reviewer (repeatable)")  # fmt: skip
    add("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    add("--metrics-port", type=int, default=None, metavar="PORT",
        help="serve Prometheus metrics at http://METRICS_HOST:PORT/metrics")  # fmt: skip
    add("--metrics-host", default="127.0.0.1", help="interface for the metrics (%(default)s)")
    add("--model-url", default=os.environ.get("CALLBOARD_MODEL_URL"), metavar="URL",
        help="default OpenAI-compatible base URL for new sessions and tasks "
        "($CALLBOARD_MODEL_URL), e.g. http://127.0.0.1:8000/v1")  # fmt: skip
    add(
        "--model",
        default=os.environ.get("CALLBOARD_MODEL"),
        metavar="NAME",
        help="default model name for new sessions and tasks ($CALLBOARD_MODEL)",
    )
    add(
        "--workspace",
        default=None,
        metavar="DIR",
        help="default workspace for tasks (the current directory)",
    )
    parser.set_defaults(func=run_serve)


class KindError(ValueError):
    """A ``--kind`` that does not name an `Actor` subclass."""


def load_kind(spec: str) -> type[Actor]:
    """``package.module:ClassName`` as an `Actor` subclass, or `KindError` saying why."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise KindError(f"--kind {spec!r} must look like package.module:ClassName")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: the user's own modules import
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise KindError(f"--kind {spec!r}: cannot import {module_name!r} ({exc})") from None
    cls = getattr(module, attr, None)
    if not (isinstance(cls, type) and issubclass(cls, Actor)):
        raise KindError(f"--kind {spec!r}: {attr!r} in {module_name!r} is not an Actor subclass")
    return cls


def run_serve(args: argparse.Namespace) -> int:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(args.log_level.upper())
    token = args.token if args.token is not None else os.environ.get("CALLBOARD_TOKEN") or None
    try:
        config = GatewayConfig(host=args.host, port=args.port, token=token)
        kinds = [load_kind(spec) for spec in args.kind]
    except ValueError as exc:
        print(f"callboard serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        trio.run(partial(_serve, args, config, kinds))
    except BaseException as exc:  # the process's last word: say it plainly
        error = _unwrap(exc)
        if isinstance(error, KeyboardInterrupt):
            return EXIT_INTERRUPTED
        if isinstance(error, CallboardError | OSError):
            print(f"callboard serve: {error}", file=sys.stderr)
            return EXIT_FAILED
        raise
    return 0


def _unwrap(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


async def _serve(args: argparse.Namespace, config: GatewayConfig, kinds: list[type[Actor]]) -> None:
    data = Path(args.data).resolve()  # noqa: ASYNC240 (once, before anything runs)
    async with trio.open_nursery() as main:
        stopping = trio.CancelScope()
        await main.start(_watch_signals, stopping)
        settings = {"model_url": args.model_url, "model": args.model}
        workspace = args.workspace or os.getcwd()
        async with open_runtime(data, kinds=kinds, workspace=workspace, settings=settings) as rt:
            with stopping:
                gateway = Gateway(rt, config)
                async with trio.open_nursery() as nursery:
                    url = await nursery.start(gateway.serve)
                    where = f"callboard serving {url} with data in {data}"
                    if args.metrics_port is not None:
                        metrics = await nursery.start(
                            _serve_metrics, rt, gateway, args.metrics_host, args.metrics_port
                        )
                        where += f", metrics at {metrics}"
                    names = ", ".join(sorted(rt.kinds)) or "none (load some with --kind)"
                    log.info("actor kinds: %s", names)
                    print(where, flush=True)
            log.info("the gateway is closed; stopping the runtime")
        log.info("stopped; %s is released", data)
        main.cancel_scope.cancel()


async def _watch_signals(stopping: trio.CancelScope, *, task_status: trio.TaskStatus[None]) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for signum in signals:
            name = signal.Signals(signum).name
            if not stopping.cancel_called:
                log.info("%s: stopping gracefully (a second SIGINT exits at once)", name)
                stopping.cancel()
            elif signum == signal.SIGINT:
                log.warning("%s again: exiting at once", name)
                logging.shutdown()
                os._exit(EXIT_INTERRUPTED)


# -- metrics -----------------------------------------------------------------------


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
        ("gauge", "callboard_actors_active", "Actors in memory", stats.active),
        ("gauge", "callboard_actors", "Actors by stored status", rt.store.status_counts()),
        ("counter", "callboard_actor_activations", "Actors brought into memory",
         stats.activations),
        ("counter", "callboard_actor_passivations", "Idle actors dropped from memory",
         stats.passivations),
        ("counter", "callboard_actor_restarts", "Restarts after crashes", stats.restarts),
        ("gauge", "callboard_dead_letters", "Messages in the dead letters",
         rt.store.dead_letter_count()),
        ("counter", "callboard_lagged_subscriptions", "Subscriptions that fell behind",
         stats.lagged),
        ("gauge", "callboard_subscribers", "Event subscriptions in the hub",
         rt.hub.subscriber_count),
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


async def _serve_metrics(
    rt: Runtime, gateway: Gateway, host: str, port: int, *, task_status: trio.TaskStatus[str]
) -> None:
    """Prometheus exposition on its own port; each scrape samples on the trio thread."""
    try:
        from prometheus_client import CollectorRegistry, start_http_server
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    except ImportError:
        raise CallboardError(
            "--metrics-port needs prometheus_client: pip install 'callboard[metrics]'"
        ) from None
    token = trio.lowlevel.current_trio_token()

    class Collector:
        def collect(self) -> Any:
            try:
                sampled = trio.from_thread.run(_sample, rt, gateway, trio_token=token)
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

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    server, thread = start_http_server(port, addr=host, registry=registry)
    try:
        shown = f"[{host}]" if ":" in host else host
        task_status.started(f"http://{shown}:{server.server_port}/metrics")
        await trio.sleep_forever()
    finally:
        with trio.move_on_after(5, shield=True):
            await trio.to_thread.run_sync(server.shutdown)
            server.server_close()
            await trio.to_thread.run_sync(thread.join, 5)
