"""The small commands: ``callboard send|spawn|ls|inspect|stop|tail|ping`` over the gateway.

Each opens one connection, does one thing and exits with a code a script
can act on:

====  ==========================================================
0     done (``tail``: ended with Ctrl-C)
1     the server answered with an error (the message says which)
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
import sys
from typing import Any

import trio

from .. import __version__
from ..client import DEFAULT_URL, Backoff, ConnectionFailed, connect
from ..errors import CallboardError
from ._verbs import VERBS, Output, Verb

__all__ = ["EXIT_ERROR", "EXIT_OK", "EXIT_UNREACHABLE", "EXIT_USAGE", "add_common", "add_parsers"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3

_CLIENT_NAME = f"callboard-cli/{__version__}"


def add_common(parser: argparse.ArgumentParser) -> None:
    """``--url`` and ``--token``, defaulting to ``CALLBOARD_URL`` and ``CALLBOARD_TOKEN``."""
    parser.add_argument(
        "--url",
        default=os.environ.get("CALLBOARD_URL", DEFAULT_URL),
        help="the gateway, default $CALLBOARD_URL or %(default)s",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get("CALLBOARD_TOKEN"),
        help="the gateway's token, default $CALLBOARD_TOKEN",
    )


def add_parsers(subparsers: Any) -> None:
    for verb in VERBS.values():
        parser = subparsers.add_parser(verb.name, help=verb.summary, description=verb.summary)
        verb.add_arguments(parser)
        add_common(parser)
        parser.add_argument(
            "--json",
            action="store_true",
            help="print JSON (tail: one event object per line) instead of columns",
        )
        parser.set_defaults(func=lambda args, verb=verb: run_command(verb, args))


def run_command(verb: Verb, args: argparse.Namespace) -> int:
    """Run one verb to its end and turn its outcome into an exit code."""
    logging.basicConfig(level=logging.WARNING, format="callboard: %(message)s")
    out = Output(write=_print_line, json=args.json)
    try:
        return trio.run(_run, verb, args, out)
    except KeyboardInterrupt:
        return EXIT_OK if verb.name == "tail" else 130
    except BrokenPipeError:
        # The reader went away (``callboard tail x | head``): that is an end, not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


async def _run(verb: Verb, args: argparse.Namespace, out: Output) -> int:
    forever = verb.name == "tail"
    try:
        async with connect(
            args.url,
            args.token,
            client_name=_CLIENT_NAME,
            reconnect=Backoff() if forever else None,
        ) as client:
            await verb.run(client, args, out)
    except ConnectionFailed as exc:
        _error(str(exc))
        return EXIT_UNREACHABLE
    except CallboardError as exc:
        _error(str(exc))
        return EXIT_ERROR
    return EXIT_OK


def _print_line(line: str) -> None:
    print(line, flush=True)


def _error(message: str) -> None:
    print(f"callboard: {message}", file=sys.stderr, flush=True)
