"""``callboard task run PROMPT``: spawn a task on a server and follow it to its terminal.

It spawns the task (``client.tasks.spawn``), then reads the task's events
from the first one and writes what the task does to stdout as it happens:
the model's text as it streams, each tool call and how it ended, approvals it
waits for, and at the end the result under a ``=== succeeded ===`` line.
With ``--json`` each event is one JSON object per line instead.

====  ==========================================================
0     the task settled ``succeeded``
1     it settled ``failed``, ``cancelled`` or ``deadline_exceeded``
      (stderr says which), or the server refused a request
2     usage: a spec the task kind does not accept
3     the gateway cannot be reached, refused the handshake, or the
      connection could not be healed
====  ==========================================================

``task list``, ``task show``, ``task wait`` and ``task cancel`` are in
``_task_verbs``; the renderer they share with ``tail`` is ``_render``.

The task is durable and belongs to the server: Ctrl-C leaves it running
(stderr says how to cancel it), and its deltas are ephemeral, so text
streamed before the subscription began is shown whole when the model's
message is stored.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any, TextIO

import trio

from .._version import __version__
from ..client import Backoff, Client, ConnectionFailed, connect
from ..errors import CallboardError
from ..llm import PROVIDERS
from ..views import RunSpec, Succeeded, Terminal
from ..views.task_logic import might_settle
from ._commands import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    add_common,
    token_of,
)
from ._render import Printer, task_ending
from ._task_verbs import add_task_verbs

__all__ = ["add_parsers", "follow", "run_task", "spec_from_args"]

_CLIENT_NAME = f"callboard-cli/{__version__}"
_GIVE_UP = 60.0  # seconds without the server after which following it stops (exit 3)


def add_parsers(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "task", help="run autonomous tasks on a server", description="Autonomous tasks."
    )
    verbs = parser.add_subparsers(dest="task_command", metavar="VERB", required=True)
    run = verbs.add_parser(
        "run",
        help="spawn a task, stream what it does, exit 0 if it succeeds",
        description="Spawn a task on a server and stream what it does until it settles.",
    )
    add = run.add_argument
    add("prompt", metavar="PROMPT", help="what the task is to do")
    add("--model-url", default=None, metavar="URL",
        help="the model server's base URL (default: the server's --model-url)")  # fmt: skip
    add("--model", default=None, metavar="NAME", help="model name (default: the server's)")
    add("--workspace", default=None, metavar="DIR",
        help="the task's workspace on the server (default: the server's --workspace)")  # fmt: skip
    add("--deadline", type=float, default=None, metavar="SECONDS",
        help="settle deadline_exceeded after this many seconds")  # fmt: skip
    add("--approve", choices=["always", "ask", "never"], default="ask",
        help="tool calls: run them, ask (answer with `callboard approve`/`deny`), or refuse "
        "(default: %(default)s)")  # fmt: skip
    add("--provider", choices=PROVIDERS, default=None,
        help="the wire of --model-url (default: the server's --provider)")  # fmt: skip
    add("--approval-timeout", type=float, default=None, metavar="SECONDS",
        help="an approval unanswered this long is denied (see --approval-default)")  # fmt: skip
    add("--approval-default", choices=["deny", "approve"], default="deny",
        help="what an approval becomes at its timeout (default: %(default)s)")  # fmt: skip
    add("--context-window", type=int, default=None, metavar="TOKENS",
        help="compact the conversation past this many tokens (default: the server's)")  # fmt: skip
    # The budget: what the task may spend before on_budget acts (a task fails by default).
    add("--max-tokens", type=int, default=None, metavar="N",
        help="input and output tokens over the task's life")  # fmt: skip
    add("--max-cost", type=float, default=None, metavar="COST",
        help="cost at the server's --prices for the model")  # fmt: skip
    add("--max-model-calls", type=int, default=None, metavar="N", help="model calls")
    add("--max-tool-calls", type=int, default=None, metavar="N", help="tool calls")
    add("--on-budget", choices=["fail", "pause", "ask"], default="fail",
        help="a limit reached: fail the task, hold it for raise_budget, or ask as an "
        "approval (default: %(default)s)")  # fmt: skip
    add_common(run)
    add("--json", action="store_true", help="print one JSON event object per line")
    run.set_defaults(func=run_task)
    add_task_verbs(verbs)


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    """The `RunSpec` the arguments describe; a relative workspace is made absolute here.

    Raises:
        TypeError: the task kind would refuse it (the message names the field).
    """
    workspace = str(Path(args.workspace).resolve()) if args.workspace else None
    return RunSpec(
        args.prompt,
        base_url=args.model_url,
        model=args.model,
        deadline=args.deadline,
        approve=args.approve,
        workspace=workspace,
        provider=args.provider,
        approval_timeout=args.approval_timeout,
        approval_default=args.approval_default,
        context_window=args.context_window,
        max_tokens=args.max_tokens,
        max_cost=args.max_cost,
        max_model_calls=args.max_model_calls,
        max_tool_calls=args.max_tool_calls,
        on_budget=args.on_budget,
    )


def run_task(args: argparse.Namespace) -> int:
    """``callboard task run``: the exit code (see the module docstring)."""
    logging.basicConfig(level=logging.WARNING, format="callboard: %(message)s")
    try:
        spec = spec_from_args(args)
    except TypeError as exc:
        _error(str(exc))
        return EXIT_USAGE
    try:
        return trio.run(_run, args, spec)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


async def _run(args: argparse.Namespace, spec: RunSpec) -> int:
    handle = ""
    try:
        async with connect(
            args.url,
            token_of(args),
            client_name=_CLIENT_NAME,
            reconnect=Backoff(give_up_after=_GIVE_UP),
        ) as client:
            handle = await client.tasks.spawn(spec)
            _note(f"{handle} spawned")
            try:
                terminal = await follow(client, handle, sys.stdout, json_lines=args.json)
            except KeyboardInterrupt:
                _note(f"{handle} keeps running; cancel it with: callboard send {handle} cancel")
                raise
    except ConnectionFailed as exc:
        _error(str(exc) + (f"; {handle} keeps running on the server" if handle else ""))
        return EXIT_UNREACHABLE
    except CallboardError as exc:
        _error(str(exc))
        return EXIT_ERROR
    if isinstance(terminal, Succeeded):
        return EXIT_OK
    _error(task_ending(handle, terminal))
    return EXIT_ERROR


async def follow(client: Client, handle: str, out: TextIO, *, json_lines: bool = False) -> Terminal:
    """Write ``handle``'s events to ``out`` from the first until it settles; return its terminal."""

    def write(text: str) -> None:
        out.write(text)
        out.flush()

    printer = Printer(write, json_lines)
    async with client.subscribe(handle, after=0) as events:
        async for event in events:
            printer.show(event)
            if might_settle(event):
                terminal = await client.tasks.terminal(handle)
                if terminal is not None:
                    printer.end(terminal)
                    return terminal
    raise ConnectionFailed(f"the events of {handle} ended before it settled")


def _note(message: str) -> None:
    print(f"callboard: {message}", file=sys.stderr, flush=True)


def _error(message: str) -> None:
    print(f"callboard: {message}", file=sys.stderr, flush=True)
