"""``callboard state|pause|resume|step ADDRESS``: live attach to one actor.

OTP's ``sys:get_state``, ``replace_state``, ``suspend`` and ``resume`` over
the gateway (docs/protocol.md, "Live attach"): ``state`` prints the actor's
committed state and, with ``--set JSON``, replaces it (the kind's state type
checks it; a refusal names the field and changes nothing); ``pause`` holds
its mailbox, durably, until ``resume`` (which says so when a budget, not
a pause, holds the actor's turn); ``step`` hands a paused actor its
next message and prints its seq once handled. The REPL offers the same verbs.
"""

from __future__ import annotations

import argparse
from typing import Any

import orjson

from ..client import Client
from ..errors import CallboardError
from ._commands import add_common, run_command
from ._verbs import Output, Verb, json_argument

__all__ = ["ATTACH", "add_parsers"]


def _address_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("address", metavar="ADDRESS", help="KIND/NAME of the actor")


_UNSET = object()  # ``--set null`` is a (refused) state, not "no --set"


def _state_args(p: argparse.ArgumentParser) -> None:
    _address_arg(p)
    p.add_argument("--set", metavar="JSON", dest="new_state", type=json_argument, default=_UNSET,
                   help="replace the state with this JSON object (every field of its "
                   "kind's state, as `state ADDRESS` prints them)")  # fmt: skip


async def _state(client: Client, args: argparse.Namespace, out: Output) -> None:
    if args.new_state is not _UNSET:
        seq = await client.replace_state(args.address, args.new_state)
        out.emit(f"{args.address}: state replaced (event {seq}, actor.state_replaced)",
                 {"actor": args.address, "seq": seq})  # fmt: skip
        return
    state = await client.get_state(args.address)
    human = orjson.dumps(state, option=orjson.OPT_INDENT_2).decode().splitlines()
    out.emit(human, {"actor": args.address, "state": state})


async def _pause(client: Client, args: argparse.Namespace, out: Output) -> None:
    status = await client.pause(args.address)
    out.emit(f"{args.address} {status}", {"actor": args.address, "status": status})


async def _resume(client: Client, args: argparse.Namespace, out: Output) -> None:
    status = await client.resume(args.address)
    human = [f"{args.address} {status}"]
    breach = await _budget_breach(client, args.address)
    if breach is not None:
        # A budget's pause is the turn's, not the mailbox's: resume does not lift it.
        limit = breach.get("limit")
        how = (
            f"callboard approve {args.address} budget, or " if breach.get("policy") == "ask" else ""
        )
        human.append(
            f"its turn is still held by its budget ({limit} reached); to go on: {how}"
            f"callboard send {args.address} raise_budget '{{\"{limit}\": NEW}}'"
        )
    out.emit(human, {"actor": args.address, "status": status})


async def _budget_breach(client: Client, address: str) -> dict[str, Any] | None:
    """The budget breach holding the actor's turn, if its kind has a budget and one does."""
    try:
        view = await client.inspect(address)
    except CallboardError:
        return None  # resumed all the same; the note is only a help
    summary = view.summary if isinstance(view.summary, dict) else {}
    budget = summary.get("budget")
    breach = budget.get("breach") if isinstance(budget, dict) else None
    return breach if isinstance(breach, dict) else None


async def _step(client: Client, args: argparse.Namespace, out: Output) -> None:
    handled = await client.step(args.address)
    human = (
        f"{args.address}: no message waits; nothing was handled"
        if handled is None
        else f"{args.address} handled message {handled}"
    )
    out.emit(human, {"actor": args.address, "handled": handled})


ATTACH: dict[str, Verb] = {
    v.name: v
    for v in [
        Verb("state", "print an actor's committed state, or replace it with --set JSON",
             _state_args, _state),
        Verb("pause", "hold an actor's mailbox (it keeps filling) until resume, durably",
             _address_arg, _pause),
        Verb("resume", "let a paused actor handle its mailbox again", _address_arg, _resume),
        Verb("step", "hand a paused actor its next message; print its seq once handled",
             _address_arg, _step),
    ]
}  # fmt: skip


def add_parsers(subparsers: Any) -> None:
    for verb in ATTACH.values():
        parser = subparsers.add_parser(verb.name, help=verb.summary, description=verb.summary)
        verb.add_arguments(parser)
        add_common(parser)
        parser.add_argument("--json", action="store_true", help="print JSON instead of text")
        parser.set_defaults(func=lambda args, verb=verb: run_command(verb, args))
