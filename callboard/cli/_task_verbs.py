"""``callboard task list | show ID [--follow] | wait ID | cancel ID``: the tasks on a server.

Each is a `Verb`, so the REPL offers the same (``task list`` and so on, as one
``task`` command). ``ID`` is a task's handle, ``task/<id>``, or just ``<id>``.

====  ==========================================================
0     ``list``, ``show``: done; ``show --follow``, ``wait``: the task
      settled ``succeeded``; ``cancel``: the task is ``cancelled``
1     ``show --follow``, ``wait``: it settled otherwise, or the wait's
      ``--timeout`` ran out (stderr says which); ``cancel``: it had
      settled otherwise before; or the server refused a request
3     the gateway cannot be reached
====  ==========================================================

``show`` renders the task's stored events as ``task run`` does (the model's
messages, tool calls, approvals, a resumed turn) and ends with its outcome;
with ``--follow`` it goes on with live events until the task settles.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..client import Client
from ..errors import UnknownActor
from ..views import Cancelled, Settled, Succeeded, Terminal
from ..views.task_logic import might_settle
from ._commands import EXIT_ERROR, EXIT_OK, add_common, run_command
from ._render import LIVE_STATUSES, LineWriter, Printer, task_ending
from ._verbs import Output, Verb, table

__all__ = ["TASK", "TASK_VERBS", "add_task_verbs"]


def _handle(text: str) -> str:
    """An argparse ``type``: ``task/ID`` or ``ID`` as the handle ``task/ID``."""
    return text if "/" in text else f"task/{text}"


def _id_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("handle", metavar="ID", type=_handle, help="the task, task/ID or ID")


def _list_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--status", metavar="S",
                   help="only tasks with this status: running, succeeded, failed, ...")  # fmt: skip


def _word(status: str) -> str:
    """``running`` for a task that lives (in memory or passivated), else its terminal."""
    return "running" if status in LIVE_STATUSES else status


def _one_line(text: Any, limit: int = 60) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


async def _list(client: Client, args: argparse.Namespace, out: Output) -> int:
    tasks: list[dict[str, Any]] = []
    for info in await client.list("task"):
        try:
            view = await client.inspect(info.actor)
        except UnknownActor:
            continue  # removed between the list and the inspect
        state = view.state if isinstance(view.state, dict) else {}
        spec = view.spec if isinstance(view.spec, dict) else {}
        status = _word(view.status)
        if args.status is not None and status != args.status:
            continue
        tasks.append({"task": info.actor, "status": status, "turns": state.get("turns", 0),
                      "prompt": spec.get("prompt", "")})  # fmt: skip
    if not tasks and not out.json:
        out.write(f"no {args.status} tasks" if args.status else "no tasks")
        return EXIT_OK
    rows = [[t["task"], t["status"], str(t["turns"]), _one_line(t["prompt"])] for t in tasks]
    out.emit(table(["TASK", "STATUS", "TURNS", "PROMPT"], rows), {"tasks": tasks})
    return EXIT_OK


def _show_args(p: argparse.ArgumentParser) -> None:
    _id_arg(p)
    p.add_argument("--follow", action="store_true",
                   help="go on with live events until the task settles")  # fmt: skip


async def _show(client: Client, args: argparse.Namespace, out: Output) -> int:
    handle = args.handle
    head = (await client.inspect(handle)).head
    lines = LineWriter(out.write) if out.raw is None else None
    printer = Printer(out.raw or lines or out.write, json_lines=out.json)
    terminal: Terminal | None = None
    try:
        if head or args.follow:
            async with client.subscribe(handle, after=0) as events:
                async for event in events:
                    printer.show(event)
                    if might_settle(event):
                        terminal = await client.tasks.terminal(handle)
                        if terminal is not None:
                            break
                    if not args.follow and event.seq is not None and event.seq >= head:
                        break
        if terminal is None:
            terminal = await client.tasks.terminal(handle)
        if terminal is not None:
            printer.end(terminal)
        printer.close()
    finally:
        if lines is not None:
            lines.flush()
    if not out.json and terminal is not None and not isinstance(terminal, Succeeded):
        out.write(f"=== {task_ending(handle, terminal)} ===")
    elif not out.json and terminal is None:
        out.write(f"=== {handle} is running; task show {handle} --follow follows it ===")
    if not args.follow:
        return EXIT_OK
    return _outcome(handle, terminal)


def _wait_args(p: argparse.ArgumentParser) -> None:
    _id_arg(p)
    p.add_argument("--timeout", metavar="SECONDS", type=float, default=None,
                   help="give up after this many seconds (exit 1); default: wait as long as it "
                   "takes")  # fmt: skip


async def _wait(client: Client, args: argparse.Namespace, out: Output) -> int:
    handle = args.handle
    outcome = await client.tasks.wait(handle, timeout=args.timeout)
    if not isinstance(outcome, Settled):
        where = "still attached to a server" if outcome.attached else "not attached to any server"
        _stderr(f"{handle} has not settled after {args.timeout:g} s; it is {where}")
        return EXIT_ERROR
    record = outcome.record
    terminal = record.terminal
    data = {"task": handle, "status": record.status, "result": record.result,
            "error": getattr(terminal, "error", None)}  # fmt: skip
    if isinstance(terminal, Succeeded):
        out.emit(terminal.result, data)
        return EXIT_OK
    if out.json:
        out.emit("", data)
    return _outcome(handle, terminal)


async def _cancel(client: Client, args: argparse.Namespace, out: Output) -> int:
    handle = args.handle
    terminal = await client.tasks.cancel(handle)
    status = _status_word(terminal)
    if isinstance(terminal, Cancelled):
        out.emit(f"{handle} cancelled", {"task": handle, "status": status})
        return EXIT_OK
    if out.json:
        out.emit("", {"task": handle, "status": status})
    _stderr(f"{handle} had already settled {status}; it was not cancelled")
    return EXIT_ERROR


def _status_word(terminal: Terminal) -> str:
    return {"Succeeded": "succeeded", "Failed": "failed", "Cancelled": "cancelled",
            "DeadlineExceeded": "deadline_exceeded"}[type(terminal).__name__]  # fmt: skip


def _outcome(handle: str, terminal: Terminal | None) -> int:
    if isinstance(terminal, Succeeded):
        return EXIT_OK
    _stderr(task_ending(handle, terminal))
    return EXIT_ERROR


def _stderr(message: str) -> None:
    print(f"callboard: {message}", file=sys.stderr, flush=True)


TASK_VERBS: dict[str, Verb] = {
    v.name: v
    for v in [
        Verb("list", "list the tasks with status, turns and prompt", _list_args, _list),
        Verb("show", "show what a task did and how it ended (--follow: until it settles)",
             _show_args, _show, reconnect=True),
        Verb("wait", "wait until a task settles; exit 0 if it succeeded", _wait_args, _wait,
             reconnect=True),
        Verb("cancel", "cancel a task; exit 0 once it is cancelled", _id_arg, _cancel),
    ]
}  # fmt: skip


def add_task_verbs(subparsers: Any) -> None:
    """``task list|show|wait|cancel`` beside ``task run`` (``subparsers`` is the task's)."""
    for verb in TASK_VERBS.values():
        parser = subparsers.add_parser(verb.name, help=verb.summary, description=verb.summary)
        verb.add_arguments(parser)
        add_common(parser)
        parser.add_argument("--json", action="store_true", help="print JSON instead of text")
        parser.set_defaults(func=lambda args, verb=verb: run_command(verb, args))


def _task_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="task_verb", metavar="VERB", required=True)
    for verb in TASK_VERBS.values():
        parser = sub.add_parser(verb.name, help=verb.summary, description=verb.summary)
        verb.add_arguments(parser)
        # After the verb too (``task list --json``); absent, the REPL's own default stands.
        parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                            help="print JSON instead of text")  # fmt: skip


async def _task(client: Client, args: argparse.Namespace, out: Output) -> int | None:
    return await TASK_VERBS[args.task_verb].run(client, args, out)


TASK = Verb("task", "the tasks: task list | show ID [--follow] | wait ID | cancel ID",
            _task_args, _task)  # fmt: skip
"""The REPL's ``task`` command (``task run`` stays on the command line)."""
