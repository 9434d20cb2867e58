"""The operator's verbs: ``approvals``, ``approve``, ``deny``, ``dead-letters``,
``requeue`` and ``delete``, the same on the command line and in the REPL.

``approve`` and ``deny`` wait until the actor has taken the answer (a
``send`` with ``wait``), so an answer that cannot apply (no such call, the
turn was cancelled meanwhile) exits 1 with the actor's reason instead of
vanishing into a ``message.rejected`` event. Without CALL_ID they answer
the one call the actor has waiting, and refuse when there are several.
``approve --always`` also allows the tool for the rest of the session (the
answer's ``"scope": "session"``). ``approvals`` shows a DEADLINE column
(when the call expires, and what it becomes then) once a call has one.
"""

from __future__ import annotations

import argparse
from typing import Any

import orjson

from ..client import Client
from ..errors import BadRequest
from ..mailbox import format_at
from ..views import MessageOutcome, PendingApproval
from ._commands import add_parsers as add_verb_parsers
from ._verbs import Output, Verb, table

__all__ = ["ADDRESS_FIRST", "OPERATOR_VERBS", "add_parsers", "refuse_unless_handled"]

_ARGUMENTS_SHOWN = 60  # characters of a call's arguments in the human table


def refuse_unless_handled(address: str, seq: int, outcome: MessageOutcome) -> None:
    """Raise `BadRequest` (exit 1) with the reason when message ``seq`` was not applied."""
    if not outcome.ok:
        raise BadRequest(f"{address} did not apply message {seq}: {outcome.reason}")


def _optional_address(p: argparse.ArgumentParser) -> None:
    p.add_argument("address", metavar="ADDRESS", nargs="?", default=None,
                   help="only this actor's (default: every actor's)")  # fmt: skip


def _shown(arguments: Any) -> str:
    text = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
    return text if len(text) <= _ARGUMENTS_SHOWN else text[: _ARGUMENTS_SHOWN - 3] + "..."


def _deadline(p: PendingApproval) -> str:
    if p.deadline_at is None:
        return "-"
    return f"{format_at(p.deadline_at)} then {p.on_expiry}"


async def _approvals(client: Client, args: argparse.Namespace, out: Output) -> None:
    pending = await client.approvals(args.address)
    # The DEADLINE column only when a call has one: most policies set none.
    deadlines = any(p.deadline_at is not None for p in pending)
    rows = [
        [p.actor, p.call_id, p.tool, format_at(p.requested_at) if p.requested_at else "-",
         *([_deadline(p)] if deadlines else []), _shown(p.arguments)]
        for p in pending
    ]  # fmt: skip
    whose = f" at {args.address}" if args.address else ""
    header = ["ACTOR", "CALL", "TOOL", "REQUESTED", *(["DEADLINE"] if deadlines else [])]
    human = table([*header, "ARGUMENTS"], rows) if rows else f"no approvals waiting{whose}"
    out.emit(human, {"approvals": [p.to_json() for p in pending]})


def _answer_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("address", metavar="ADDRESS", help="KIND/NAME of the session or task")
    p.add_argument("call_id", metavar="CALL_ID", nargs="?", default=None,
                   help="the call to answer (default: the only one waiting)")  # fmt: skip
    p.add_argument("--reason", metavar="TEXT", default=None,
                   help="why, in words the model reads with the tool's result")  # fmt: skip


def _approve_args(p: argparse.ArgumentParser) -> None:
    _answer_args(p)
    p.add_argument("--always", action="store_true",
                   help="also allow its tool for the rest of the session")  # fmt: skip


async def _answer(client: Client, args: argparse.Namespace, out: Output, approved: bool) -> None:
    call_id = args.call_id
    if call_id is None:
        waiting = [p.call_id for p in await client.approvals(args.address)]
        if len(waiting) != 1:
            listed = ", ".join(waiting)
            raise BadRequest(
                f"no tool call is waiting for approval at {args.address}"
                if not waiting
                else f"{len(waiting)} tool calls are waiting for approval at {args.address} "
                f"({listed}): name one as CALL_ID"
            )
        call_id = waiting[0]
    body: dict[str, Any] = {"call_id": call_id, "approved": approved}
    if args.reason is not None:
        body["reason"] = args.reason
    always = getattr(args, "always", False)  # deny has no --always
    if always:
        body["scope"] = "session"
    ack, outcome = await client.send_and_wait(args.address, "approve", body)
    refuse_unless_handled(args.address, ack.seq, outcome)
    word = "approved" if approved else "denied"
    said = f"{word} {call_id} of {args.address}"
    result: dict[str, Any] = {"actor": args.address, "call_id": call_id, "approved": approved,
                              "seq": ack.seq}  # fmt: skip
    if always:
        said += ", and its tool for the rest of the session"
        result["scope"] = "session"
    out.emit(said, result)


async def _approve(client: Client, args: argparse.Namespace, out: Output) -> None:
    await _answer(client, args, out, approved=True)


async def _deny(client: Client, args: argparse.Namespace, out: Output) -> None:
    await _answer(client, args, out, approved=False)


async def _dead_letters(client: Client, args: argparse.Namespace, out: Output) -> None:
    letters = await client.dead_letters(args.address)
    rows = [
        [str(d.id), d.actor, str(d.seq), d.type, str(d.attempts), format_at(d.at),
         f"{d.error.type}: {d.error.message}"]
        for d in letters
    ]  # fmt: skip
    whose = f" of {args.address}" if args.address else ""
    human = (
        table(["ID", "ACTOR", "SEQ", "TYPE", "ATTEMPTS", "AT", "ERROR"], rows)
        if rows
        else f"no dead letters{whose}"
    )
    out.emit(human, {"dead_letters": [d.to_json() for d in letters]})


def _dead_letter_id(text: str) -> int:
    """A dead letter's id for ``requeue``: a whole number >= 1 (bad usage otherwise, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"must be a dead letter's id (a whole number >= 1, see dead-letters), got {text!r}"
        )
    return value


def _requeue_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", metavar="ID", type=_dead_letter_id,
                   help="the dead letter's id, as dead-letters lists it")  # fmt: skip


async def _requeue(client: Client, args: argparse.Namespace, out: Output) -> None:
    ack = await client.requeue(args.id)
    out.emit(f"requeued dead letter {args.id} as seq {ack.seq}",
             {"dead_letter": args.id, "seq": ack.seq})  # fmt: skip


def _delete_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("address", metavar="ADDRESS", help="KIND/NAME of an actor that has ended")


async def _delete(client: Client, args: argparse.Namespace, out: Output) -> None:
    await client.delete(args.address)
    out.emit(f"deleted {args.address}", {"actor": args.address, "deleted": True})


OPERATOR_VERBS: dict[str, Verb] = {
    v.name: v
    for v in [
        Verb("approvals", "list the tool calls waiting for approval (of one actor)",
             _optional_address, _approvals),
        Verb("approve", "approve a waiting tool call; waits until the actor took it",
             _approve_args, _approve),
        Verb("deny", "deny a waiting tool call, with --reason for the model",
             _answer_args, _deny),
        Verb("dead-letters", "list the messages set aside after failing (of one actor)",
             _optional_address, _dead_letters),
        Verb("requeue", "put a dead letter back at the end of its actor's mailbox",
             _requeue_args, _requeue),
        Verb("delete", "remove an actor that has ended, freeing its name",
             _delete_args, _delete),
    ]
}  # fmt: skip

ADDRESS_FIRST = frozenset({"approvals", "approve", "deny", "dead-letters", "delete"})
"""The verbs whose first argument is an address (the REPL completes it)."""


def add_parsers(subparsers: Any) -> None:
    add_verb_parsers(subparsers, OPERATOR_VERBS)
