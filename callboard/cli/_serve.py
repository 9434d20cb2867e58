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
import errno
import importlib
import logging
import math
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, contextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import trio

from ..actors import Actor
from ..agent import builtin_kinds
from ..console import DEFAULT_CONSOLE_PORT, Console, open_console
from ..errors import CallboardError
from ..gateway import Gateway, GatewayConfig, is_loopback, read_token
from ..llm import PROVIDERS, check_provider
from ..runtime import RuntimeConfig, open_runtime, tune_gc
from ..store import redact_url
from ..tools import Sandbox, probe_sandbox
from ._logs import configure_logging, log_lifecycle
from ._metrics import serve_metrics
from ._prices import read_prices
from ._verbs import whole_number

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
        "(docs/protocol.md) until SIGINT or SIGTERM.",
    )
    add = parser.add_argument
    add("--data", default=DEFAULT_DATA, metavar="DIR", help="the data directory (%(default)s)")
    add("--store", default=os.environ.get("CALLBOARD_STORE") or None, metavar="URL",
        help="keep the actors in PostgreSQL at URL, postgresql://USER@HOST:PORT/DB "
        "($CALLBOARD_STORE, which keeps a password out of the process list); default: SQLite "
        "in the data directory. Several nodes may share one database")  # fmt: skip
    add("--node", default=None, metavar="NAME",
        help="this node's name in the PostgreSQL store (default: the host's name and a "
        "digest of the data directory)")  # fmt: skip
    add("--lease-ttl", type=float, default=10.0, metavar="SECONDS",
        help="how long a node's lease on its actors outlives its last heartbeat; another "
        "node takes them after it (%(default)s)")  # fmt: skip
    add("--host", default="127.0.0.1", help="interface to bind (%(default)s; others need a token)")
    add("--port", type=int, default=7341, help="port to bind (%(default)s; 0 picks a free one)")
    add("--token", default=None,
        help="the operator token ($CALLBOARD_TOKEN; visible in the process list, so prefer "
        "--token-file or the environment); default: DATA/token, made on first start")  # fmt: skip
    add("--token-file", default=None, metavar="FILE",
        help="read the operator token from FILE ($CALLBOARD_TOKEN_FILE)")  # fmt: skip
    add("--kind", action="append", default=[], metavar="MODULE:CLASS",
        help="an actor kind to load, e.g. mypkg.kinds:Reviewer (repeatable)")  # fmt: skip
    add("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    add("--log-format", default="text", choices=["text", "json"],
        help="log as text lines, or one JSON object a line for a log shipper "
        "(%(default)s)")  # fmt: skip
    add("--metrics-port", type=int, default=None, metavar="PORT",
        help="serve Prometheus metrics at http://METRICS_HOST:PORT/metrics")  # fmt: skip
    add("--metrics-host", default="127.0.0.1", help="interface for the metrics (%(default)s)")
    add("--console-port", type=int, default=None, metavar="PORT",
        help=f"serve the web console at http://127.0.0.1:PORT/ ({DEFAULT_CONSOLE_PORT}, or a free "
        "port if that one is taken; 0 picks a free one)")  # fmt: skip
    add("--no-console", action="store_true", help="serve no web console")
    add("--model-url", default=os.environ.get("CALLBOARD_MODEL_URL"), metavar="URL",
        help="default OpenAI-compatible base URL for new sessions and tasks "
        "($CALLBOARD_MODEL_URL), e.g. http://127.0.0.1:8000/v1")  # fmt: skip
    add("--provider", default=os.environ.get("CALLBOARD_PROVIDER") or "openai",
        type=check_provider, choices=PROVIDERS, help="the wire of --model-url: openai (chat "
        "completions) or anthropic (the Messages API, key in $ANTHROPIC_API_KEY); "
        "$CALLBOARD_PROVIDER, else %(default)s")  # fmt: skip
    add(
        "--model",
        default=os.environ.get("CALLBOARD_MODEL"),
        metavar="NAME",
        help="default model name for new sessions and tasks ($CALLBOARD_MODEL)",
    )
    add("--context-window", type=_tokens, default=None, metavar="TOKENS",
        help="the size a request to --model may reach before older turns are "
        "summarised (a spec's context_window wins); default: only when the server says "
        "it overflows")  # fmt: skip
    add("--prices", default=None, metavar="FILE",
        help='per-token prices for max_cost, as JSON: {"MODEL": {"input": PRICE, '
        '"output": PRICE}}')  # fmt: skip
    add(
        "--workspace",
        default=None,
        metavar="DIR",
        help="default workspace for tasks (the current directory)",
    )
    add("--workspace-root", action="append", default=[], metavar="DIR",
        help="a directory that spawned workspaces must lie in (repeatable; default: the "
        "directory serve was started in)")  # fmt: skip
    add("--allow-model-url", action="append", default=[], metavar="URL",
        help="a model URL specs may name besides --model-url (repeatable); it gets no "
        "server key")  # fmt: skip
    add("--allow-key-env", action="append", default=[], metavar="NAME",
        help="an environment variable a spec may name as its model key (api_key_env)")  # fmt: skip
    add("--allow-ssh-host", action="append", default=[], metavar="HOST",
        help="a host a spec's ssh executor may name (repeatable; default: none)")  # fmt: skip
    add("--secret-env", action="append", default=[], metavar="NAME",
        help="an environment variable kept from shell commands, besides CALLBOARD_*, "
        "OPENAI_API_KEY and ANTHROPIC_API_KEY (repeatable)")  # fmt: skip
    add("--sandbox", choices=["auto", "bwrap", "none"], default="auto",
        help="run shell commands and jobs under bubblewrap: auto = where it works "
        "(%(default)s)")  # fmt: skip
    add("--sandbox-network", choices=["host", "none"], default="host",
        help="the network sandboxed commands get (%(default)s)")  # fmt: skip
    add("--activation-quota", type=int, default=1000, metavar="N",
        help="new actors one token may create per minute (%(default)s; 0: no limit)")  # fmt: skip
    add("--outage-retry-limit", type=whole_number, default=None, metavar="N",
        help="times a turn parked while its model server is down asks again before it "
        "fails (default: no count; 0: do not wait)")  # fmt: skip
    add("--outage-retry-for", type=_seconds, default=None, metavar="SECONDS",
        help="how long a turn parked while its model server is down waits before it "
        "fails (default 1800 unless --outage-retry-limit is given; 0: do not wait)")  # fmt: skip
    parser.set_defaults(func=run_serve)


def _tokens(text: str) -> int:
    """``--context-window``: a positive number of tokens."""
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of tokens, got {text!r}")
    return int(text)


def _seconds(text: str) -> float:
    """``--outage-retry-for``: finite seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text!r}")
    return value


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
    configure_logging(args.log_level, args.log_format)
    try:
        token = _chosen_token(args)
        quota = args.activation_quota or None
        config = GatewayConfig(host=args.host, port=args.port, token=token, activation_quota=quota)
        if args.metrics_port is not None and token is None and not is_loopback(args.metrics_host):
            raise ValueError(
                f"--metrics-host {args.metrics_host!r} exposes the metrics beyond this machine, "
                "so the token must be chosen: pass --token-file FILE or set CALLBOARD_TOKEN, "
                "or serve the metrics on 127.0.0.1"
            )
        kinds = [load_kind(spec) for spec in args.kind]
        _workspace_roots(args)  # refused here, before anything starts
        read_prices(args.prices)
        # The poll for orphaned actors: every second, or more often for a short lease.
        args.runtime_config = RuntimeConfig(
            lease_ttl=args.lease_ttl, lease_poll=min(1.0, args.lease_ttl / 4)
        )
    except (ValueError, CallboardError) as exc:
        _last_word(args, str(exc))
        return EXIT_USAGE
    try:
        trio.run(partial(_serve, args, config, kinds))
    except BaseException as exc:  # the process's last word: say it plainly
        error = _unwrap(exc)
        if isinstance(error, KeyboardInterrupt):
            return EXIT_INTERRUPTED
        if isinstance(error, CallboardError | OSError):
            _last_word(args, str(error))
            return EXIT_FAILED
        raise
    return 0


def _last_word(args: argparse.Namespace, text: str) -> None:
    """Why serve exits: a line of its log (so a log shipper parses it too)."""
    if args.log_format == "json":
        log.error("%s", text)
    else:
        print(f"callboard serve: {text}", file=sys.stderr)


def _chosen_token(args: argparse.Namespace) -> str | None:
    """The operator token the operator chose, or None for the data directory's own."""
    if args.token is not None:
        return str(args.token)
    if args.token_file is not None:
        return read_token(args.token_file)
    if os.environ.get("CALLBOARD_TOKEN"):
        return os.environ["CALLBOARD_TOKEN"]
    if os.environ.get("CALLBOARD_TOKEN_FILE"):
        return read_token(os.environ["CALLBOARD_TOKEN_FILE"])
    return None


def _workspace_roots(args: argparse.Namespace) -> list[str]:
    """``--workspace-root`` resolved, else the directory serve started in, unless that
    is ``/``: then every directory would be a workspace, so the roots must be named."""
    if args.workspace_root:
        return [str(Path(root).resolve()) for root in args.workspace_root]
    here = os.getcwd()
    if Path(here).resolve() == Path("/"):
        raise ValueError(
            "serve was started in /, which as the default workspace root would let any "
            "spawn name any directory: name the roots with --workspace-root DIR "
            "(--workspace-root / if you mean it)"
        )
    return [here]


def _host_settings(args: argparse.Namespace, data: Path) -> dict[str, Any]:
    """What every actor is allowed, as ``ctx.settings`` (see ``callboard.agent``)."""
    roots = _workspace_roots(args)
    private = [str(data)]
    for token_file in (args.token_file, os.environ.get("CALLBOARD_TOKEN_FILE")):
        if token_file:
            private.append(str(Path(token_file).resolve()))
    return {
        "model_url": args.model_url,
        "model": args.model,
        "provider": args.provider,
        "context_window": args.context_window,
        "workspace_roots": roots,
        "allowed_model_urls": list(args.allow_model_url),
        "allowed_key_envs": list(args.allow_key_env),
        "allowed_ssh_hosts": list(args.allow_ssh_host),
        "secret_env": tuple(args.secret_env),
        "private_paths": tuple(private),
        "prices": read_prices(args.prices),
        # A turn parked through a model outage (callboard.agent's _outage); None: its default.
        "outage_retry_limit": args.outage_retry_limit,
        "outage_retry_for": args.outage_retry_for,
    }


async def _sandbox(args: argparse.Namespace) -> Sandbox | None:
    """The sandbox of shell commands and jobs: bwrap where it works (``auto``),
    bwrap or fail (``bwrap``), or none."""
    if args.sandbox == "none":
        log.warning("--sandbox none: shell commands run unconfined, as this server's user")
        return None
    sandbox = Sandbox(network=args.sandbox_network == "host")
    reason = await probe_sandbox(sandbox)
    if reason is None:
        net = "with" if sandbox.network else "without"
        log.info("shell commands run in a bubblewrap sandbox, %s the network", net)
        return sandbox
    if args.sandbox == "bwrap":
        raise CallboardError(f"--sandbox bwrap: {reason}")
    log.warning("shell commands run unsandboxed: %s (--sandbox none to silence this)", reason)
    return None


@contextmanager
def _naming_port(option: str, host: str, port: int) -> Iterator[None]:
    """A port that cannot be bound is named with the option that chose it: the
    bare "[Errno 98] Address already in use" says neither which port nor which of two."""
    try:
        yield
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        raise CallboardError(
            f"{option} {port}: {host}:{port} is already in use (another callboard serve?); "
            f"stop what holds it, or pick another port ({option} 0 picks a free one)"
        ) from None


def _unwrap(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


async def _serve(args: argparse.Namespace, config: GatewayConfig, kinds: list[type[Actor]]) -> None:
    data = Path(args.data).resolve()  # noqa: ASYNC240 (once, before anything runs)
    async with trio.open_nursery() as main:
        stopping = trio.CancelScope()
        await main.start(_watch_signals, stopping)
        settings = _host_settings(args, data)
        settings["sandbox"] = await _sandbox(args)
        # The agent's kinds, bound to the operator's settings, and the user's
        # (--kind) beside them: a user's kind of the same name wins.
        claimed = {cls.kind for cls in kinds}
        agent = builtin_kinds({**settings, "workspace": args.workspace or os.getcwd()})
        every = [*(cls for cls in agent if cls.kind not in claimed), *kinds]
        async with (
            open_runtime(
                data, kinds=every, settings=settings, store=args.store, node=args.node,
                config=args.runtime_config,
            ) as rt,
            _console(args) as console,
        ):  # fmt: skip
            log_lifecycle(rt)
            tune_gc()  # this process is the runtime's: see callboard.runtime._gc
            with stopping:
                if console is not None:  # the page's origin, and no other, joins the gateway's
                    origins = (*config.allowed_origins, *console.origins)
                    config = attrs.evolve(config, allowed_origins=origins)
                gateway = Gateway(rt, config)
                async with trio.open_nursery() as nursery:
                    with _naming_port("--port", args.host, args.port):
                        url = await nursery.start(gateway.serve)
                    where = f"callboard serving {url} with data in {data}"
                    if args.store is not None:
                        where += f", actors in {redact_url(args.store)}"
                    if console is not None:  # stdout, not the log: the token is in its fragment
                        await nursery.start(console.serve, url)
                        where += f", console at {console.url_with_token(gateway.operator_token)}"
                    if args.metrics_port is not None:
                        with _naming_port("--metrics-port", args.metrics_host, args.metrics_port):
                            metrics = await nursery.start(
                                serve_metrics, rt, gateway, args.metrics_host, args.metrics_port,
                                gateway.operator_token,
                            )  # fmt: skip
                        where += f", metrics at {metrics}"
                    if config.token is None:
                        log.info("the operator token is in %s (mode 0600)", data / "token")
                    log.info("workspace roots: %s", ", ".join(settings["workspace_roots"]))
                    names = ", ".join(sorted(rt.kinds)) or "none (load some with --kind)"
                    log.info("actor kinds: %s", names)
                    print(where, flush=True)
            log.info("the gateway is closed; stopping the runtime")
        log.info("stopped; %s is released", data)
        main.cancel_scope.cancel()


def _console(args: argparse.Namespace) -> AbstractAsyncContextManager[Console | None]:
    return nullcontext() if args.no_console else open_console(args.console_port)


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
