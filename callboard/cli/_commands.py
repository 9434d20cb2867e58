"""The small commands: ``callboard send|spawn|ls|inspect|stop|tail|ping`` over the gateway.

Each opens one connection, does one thing and exits with a code a script
can act on:

====  ==========================================================
0     done (``tail``: the actor ended, or Ctrl-C)
1     the server answered with an error (the message says which), or a
      verb's outcome was not a success (``task wait``: the task failed)
2     usage: a missing or malformed argument, JSON that does not parse
3     the gateway cannot be reached, refused the handshake, or the
      connection dropped before the reply
====  ==========================================================

Errors go to stderr as one sentence. One-shot commands do not reconnect:
a lost connection is exit 3 at once. ``tail`` reconnects for as long as it
runs and resumes where it was, so a restart of the server shows no gap.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from typing import Any

import trio

from .._version import __version__
from ..client import DEFAULT_URL, Backoff, ConnectionFailed, connect, find_token
from ..errors import CallboardError
from ._serve import EXIT_INTERRUPTED
from ._verbs import VERBS, Output, Verb

__all__ = [
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "add_common",
    "add_parsers",
    "token_of",
]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3

_CLIENT_NAME = f"callboard-cli/{__version__}"


def add_common(parser: argparse.ArgumentParser) -> None:
    """``--url``, and where the token comes from (`callboard.client.find_token`)."""
    parser.add_argument(
        "--url",
        default=os.environ.get("CALLBOARD_URL", DEFAULT_URL),
        help="the gateway, default $CALLBOARD_URL or %(default)s",
    )
    parser.add_argument(
        "--token",
        default=None,
        help="the token (visible to other local users in the process list: prefer "
        "--token-file or $CALLBOARD_TOKEN)",
    )
    parser.add_argument(
        "--token-file",
        default=None,
        metavar="FILE",
        help="a file holding the token (else $CALLBOARD_TOKEN, $CALLBOARD_TOKEN_FILE, "
        "then DATA/token for a loopback gateway)",
    )
    parser.add_argument(
        "--data",
        default=None,
        metavar="DIR",
        help="the server's data directory, whose 'token' file is used for a loopback "
        "gateway (default $CALLBOARD_DATA or ./callboard-data)",
    )


def token_of(args: argparse.Namespace) -> str | None:
    """The token the command presents (see `add_common`)."""
    return find_token(args.url, args.token, token_file=args.token_file, data=args.data)


def add_parsers(subparsers: Any, verbs: dict[str, Verb] = VERBS) -> None:
    for verb in verbs.values():
        parser = subparsers.add_parser(verb.name, help=verb.summary, description=verb.summary)
        verb.add_arguments(parser)
        add_common(parser)
        parser.add_argument(
            "--json",
            action="store_true",
            help="print JSON (tail: one event object per line, raw) instead of columns "
            "(tail: events rendered for people)",
        )
        parser.set_defaults(func=lambda args, verb=verb: run_command(verb, args))


def run_command(verb: Verb, args: argparse.Namespace) -> int:
    """Run one verb to its end and turn its outcome into an exit code."""
    logging.basicConfig(level=logging.WARNING, format="callboard: %(message)s")
    out = Output(write=_print_line, json=args.json, raw=_print_raw)
    interrupted = EXIT_OK if verb.name == "tail" else EXIT_INTERRUPTED
    try:
        return trio.run(_interruptible, verb, args, out, interrupted)
    except BaseException as exc:
        # Raised inside a nursery, these come out of trio.run in a group.
        leaves = _leaves(exc)
        if all(isinstance(e, KeyboardInterrupt) for e in leaves):
            return interrupted  # a Ctrl-C before the signal handler was in place
        if any(isinstance(e, BrokenPipeError) for e in leaves):
            # The reader went away (``callboard tail x | head``): an end, not an error.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_OK
        raise


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


async def _interruptible(
    verb: Verb, args: argparse.Namespace, out: Output, interrupted: int
) -> int:
    """Ctrl-C cancels the command and ends it with ``interrupted`` (``tail``: 0).

    A signal handler rather than KeyboardInterrupt: trio raises that wherever
    the main task happens to be, inside a nursery or not, so the exit code
    would depend on timing.
    """
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:

            async def cancel_on_sigint() -> None:
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    return

            nursery.start_soon(cancel_on_sigint)
            code = await _run(verb, args, out)
            nursery.cancel_scope.cancel()
            return code
    return interrupted


async def _run(verb: Verb, args: argparse.Namespace, out: Output) -> int:
    forever = verb.reconnect or bool(getattr(args, "follow", False))
    try:
        async with connect(
            args.url,
            token_of(args),
            client_name=_CLIENT_NAME,
            reconnect=Backoff() if forever else None,
        ) as client:
            code = await verb.run(client, args, out)
    except ConnectionFailed as exc:
        _error(str(exc))
        return EXIT_UNREACHABLE
    except CallboardError as exc:
        _error(str(exc))
        return EXIT_ERROR
    return code or EXIT_OK


def _print_line(line: str) -> None:
    print(line, flush=True)


def _print_raw(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _error(message: str) -> None:
    print(f"callboard: {message}", file=sys.stderr, flush=True)
