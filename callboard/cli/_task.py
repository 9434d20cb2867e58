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

The task is durable and belongs to the server: Ctrl-C leaves it running
(stderr says how to cancel it), and its deltas are ephemeral, so text
streamed before the subscription began is shown whole when the model's
message is stored.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, TextIO

import attrs
import trio

from .._version import __version__
from ..client import Backoff, Client, ConnectionFailed, connect
from ..errors import CallboardError
from ..mailbox import Event
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

__all__ = ["add_parsers", "follow", "run_task", "spec_from_args"]

_CLIENT_NAME = f"callboard-cli/{__version__}"
_GIVE_UP = 60.0  # seconds without the server after which following it stops (exit 3)
_RESULT_RULE = "=== succeeded ==="


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
        help="OpenAI-compatible base URL (default: the server's --model-url)")  # fmt: skip
    add("--model", default=None, metavar="NAME", help="model name (default: the server's)")
    add("--workspace", default=None, metavar="DIR",
        help="the task's workspace on the server (default: the server's --workspace)")  # fmt: skip
    add("--deadline", type=float, default=None, metavar="SECONDS",
        help="settle deadline_exceeded after this many seconds")  # fmt: skip
    add("--approve", choices=["always", "ask", "never"], default="ask",
        help="tool calls: run them, ask (answer with `callboard send`), or refuse "
        "(default: %(default)s)")  # fmt: skip
    add_common(run)
    add("--json", action="store_true", help="print one JSON event object per line")
    run.set_defaults(func=run_task)


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
    _error(_ending(handle, terminal))
    return EXIT_ERROR


async def follow(client: Client, handle: str, out: TextIO, *, json_lines: bool = False) -> Terminal:
    """Write ``handle``'s events to ``out`` from the first until it settles; return its terminal."""
    printer = _Printer(out, json_lines)
    async with client.subscribe(handle, after=0) as events:
        async for event in events:
            printer.show(event)
            if might_settle(event):
                terminal = await client.tasks.terminal(handle)
                if terminal is not None:
                    printer.end(terminal)
                    return terminal
    raise ConnectionFailed(f"the events of {handle} ended before it settled")


@attrs.define
class _Printer:
    """Turns a task's events into lines a person reads, or JSON lines."""

    out: TextIO
    json_lines: bool
    _streamed: bool = False  # the model's text since its last stored message was shown
    _open_line: bool = False

    def show(self, event: Event) -> None:
        data = event.data if isinstance(event.data, dict) else {}
        if self.json_lines:
            row = {"actor": event.actor, "seq": event.seq, "type": event.type, "data": event.data}
            self._write(json.dumps(row, ensure_ascii=False) + "\n")
            return
        kind = event.type
        if kind == "turn.delta":
            self._streamed = True
            self._write(str(data.get("text", "")), open_line=True)
        elif kind == "turn.retrying":
            self._line("[the model is asked again; the text above is dropped]")
        elif kind == "turn.started":
            self._line(f"> {data.get('prompt', '')}")
        elif kind == "assistant.message":
            content = data.get("content") or ""
            if not self._streamed and content:
                self._write(content, open_line=True)
            self._streamed = False
            self._end_line()
        elif kind == "tool.started":
            self._line(f"[tool] {data.get('name')}({data.get('arguments', '')})")
        elif kind == "tool.finished":
            status = str(data.get("status"))
            result = " ".join(str(data.get("result", "")).split())
            # What the model reads says "error: ..." itself: the status says it once.
            result = result.removeprefix(f"{status}: ")
            result = result if len(result) <= 120 else result[:117] + "..."
            self._line(f"[tool] {data.get('name')} {status}: {result}")
        elif kind == "approval.requested":
            body = json.dumps({"call_id": data.get("call_id"), "approved": True})
            self._line(
                f"[approval] {data.get('name')}({data.get('arguments', '')}) waits; answer with: "
                f"callboard send {event.actor} approve '{body}'"
            )

    def end(self, terminal: Terminal) -> None:
        if self.json_lines:
            return
        if isinstance(terminal, Succeeded):
            self._line(_RESULT_RULE)
            self._line(terminal.result)

    def _line(self, text: str) -> None:
        self._end_line()
        self._write(text + "\n")

    def _end_line(self) -> None:
        if self._open_line:
            self._write("\n")

    def _write(self, text: str, *, open_line: bool = False) -> None:
        self.out.write(text)
        self.out.flush()
        self._open_line = open_line if text else self._open_line


def _ending(handle: str, terminal: Terminal | None) -> str:
    name = type(terminal).__name__
    error = getattr(terminal, "error", None)
    words = {
        "Failed": f"{handle} failed: {error}",
        "Cancelled": f"{handle} was cancelled",
        "DeadlineExceeded": f"{handle} exceeded its deadline",
    }
    return words.get(name, f"{handle} ended without a terminal")


def _note(message: str) -> None:
    print(f"callboard: {message}", file=sys.stderr, flush=True)


def _error(message: str) -> None:
    print(f"callboard: {message}", file=sys.stderr, flush=True)
