"""The verbs ``callboard`` and ``callboard repl`` share: their arguments, their run, their output.

One definition per verb keeps the command line and the REPL speaking the
same language: ``send counter/a add '{"n": 2}' --key k1`` means the same in
both. Output is either human (aligned columns, one line per event) or, with
``--json``, the server's reply fields as one JSON object per line.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import orjson

from ..client import Client
from ..errors import BadAddress, BadRequest
from ..mailbox import KIND_PATTERN, parse_address
from ._render import event_json, format_event, summary_rows
from ._tailing import tail

__all__ = [
    "VERBS",
    "Output",
    "Verb",
    "address_argument",
    "event_json",
    "format_event",
    "json_argument",
    "table",
    "target_argument",
    "whole_number",
]


@attrs.frozen
class Output:
    """Where a verb's result goes; ``json`` picks machine-readable lines.

    ``raw``, if set, writes text as it is (no newline added): rendered
    events stream through it; without it they are written in whole lines.
    """

    write: Callable[[str], None]
    json: bool = False
    raw: Callable[[str], None] | None = None

    def emit(self, human: str | Sequence[str], data: Any) -> None:
        if self.json:
            self.write(orjson.dumps(data).decode())
        elif isinstance(human, str):
            self.write(human)
        else:
            for line in human:
                self.write(line)


@attrs.frozen
class Verb:
    """One verb: its name and one-line summary (for help), its arguments, what it does.

    ``run`` may return an exit code (None is 0). ``reconnect``: the command
    line heals a lost connection for it (a verb that follows or waits).
    """

    name: str
    summary: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[Client, argparse.Namespace, Output], Awaitable[int | None]]
    reconnect: bool = False


def json_argument(text: str) -> Any:
    """An argparse ``type``: the argument parsed as JSON, or a usage error naming it."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not valid JSON ({exc})") from None


def address_argument(text: str) -> str:
    """An argparse ``type``: an actor's address ``KIND/NAME``, or a usage error
    (exit 2, before connecting) that the parser words with the argument's name."""
    try:
        parse_address(text)
    except BadAddress as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def target_argument(text: str) -> str:
    """An argparse ``type``: an address, or a pattern ``KIND/*`` or ``*`` (``tail``)."""
    if text == "*" or (text.endswith("/*") and KIND_PATTERN.fullmatch(text[:-2])):
        return text
    if text.endswith("/*"):
        raise argparse.ArgumentTypeError(
            f"pattern {text!r} has kind {text[:-2]!r}, which does not match {KIND_PATTERN.pattern}"
        )
    return address_argument(text)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Plain aligned columns, no trailing spaces."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [list(headers), *rows]
    ]


# -- the verbs -------------------------------------------------------------------------


def _send_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("address", metavar="ADDRESS", type=address_argument,
                   help="KIND/NAME of the recipient")  # fmt: skip
    p.add_argument("type", metavar="TYPE", help="the message type, e.g. prompt")
    p.add_argument("body", metavar="JSON", nargs="?", type=json_argument, default=None,
                   help="the message body as JSON (default: null)")  # fmt: skip
    p.add_argument("--key", metavar="K", help="idempotency key: a repeat is not delivered again")
    p.add_argument("--wait", action="store_true",
                   help="return once the actor has handled it; exit 1 with the reason if "
                   "it was rejected or dead-lettered")  # fmt: skip


async def _send(client: Client, args: argparse.Namespace, out: Output) -> None:
    if args.wait:
        ack, outcome = await client.send_and_wait(args.address, args.type, args.body, key=args.key)
        if not outcome.ok:
            raise BadRequest(f"{args.address} did not apply message {ack.seq}: {outcome.reason}")
    else:
        ack = await client.send(args.address, args.type, args.body, key=args.key)
    note = " (duplicate: delivered before, not again)" if ack.duplicate else ""
    handled = " and handled" if args.wait else ""
    data = {"seq": ack.seq, "duplicate": ack.duplicate}
    out.emit(f"sent to {args.address} as seq {ack.seq}{handled}{note}",
             {**data, "outcome": "handled"} if args.wait else data)  # fmt: skip


def _spawn_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("kind", metavar="KIND", help="the actor kind, e.g. task")
    p.add_argument("spec", metavar="JSON", nargs="?", type=json_argument, default=None,
                   help="the spec as a JSON object (default: none)")  # fmt: skip
    p.add_argument("--name", metavar="N", help="the NAME part of the address (default: generated)")


async def _spawn(client: Client, args: argparse.Namespace, out: Output) -> None:
    address = await client.spawn(args.kind, args.spec, name=args.name)
    out.emit(f"{address} ({'existed' if address.existed else 'spawned'})",
             {"actor": str(address), "existed": address.existed})  # fmt: skip


def _ls_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kind", metavar="K", help="only actors of this kind")
    p.add_argument("--status", metavar="S", help="only actors with this status, e.g. active")


async def _ls(client: Client, args: argparse.Namespace, out: Output) -> None:
    actors = await client.list(kind=args.kind, status=args.status)
    rows = [[a.actor, a.status, str(a.mailbox), str(a.restarts)] for a in actors]
    headers = ["ACTOR", "STATUS", "MAILBOX", "RESTARTS"]
    if any(a.owner is not None for a in actors):  # several nodes: which one runs it
        headers.append("OWNER")
        for row, a in zip(rows, actors, strict=True):
            row.append(a.owner or "-")
    human = table(headers, rows) if rows else "no actors"
    out.emit(human, {"actors": [_with_owner(attrs.asdict(a)) for a in actors]})


def _address_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("address", metavar="ADDRESS", type=address_argument,
                   help="KIND/NAME of the actor")  # fmt: skip


async def _inspect(client: Client, args: argparse.Namespace, out: Output) -> None:
    view = await client.inspect(args.address)
    data = _with_owner(attrs.asdict(view))
    del data["kind"]
    error = view.last_error
    fields = ("actor", "status", "owner", "mailbox", "cursor", "head", "restarts")
    rows = [[k, str(data[k])] for k in fields if k in data]
    rows.append(["last_error", "-" if error is None else orjson.dumps(error).decode()])
    rows += summary_rows(view.summary)
    spec = orjson.dumps(view.spec, option=orjson.OPT_INDENT_2).decode().splitlines()
    state = orjson.dumps(view.state, option=orjson.OPT_INDENT_2).decode().splitlines()
    shown = ["spec", *("  " + s for s in spec)] if view.spec is not None else []
    out.emit([*table(["FIELD", "VALUE"], rows)[1:], *shown, "state",
              *("  " + s for s in state)], data)  # fmt: skip


async def _stop(client: Client, args: argparse.Namespace, out: Output) -> None:
    status = await client.stop(args.address)
    out.emit(f"{args.address} {status}", {"actor": args.address, "status": status})


def _tail_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("address", metavar="ADDRESS", type=target_argument,
                   help="KIND/NAME, or KIND/* or * (live only)")  # fmt: skip
    p.add_argument("--after", metavar="N", type=whole_number, default=None,
                   help="first replay every stored event with a seq above N (0: all)")  # fmt: skip


def whole_number(text: str) -> int:
    """An argparse ``type``: a whole number >= 0 (an event seq for ``--after``, a
    byte offset, a count of retries); bad usage otherwise, exit 2."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {text!r}")
    return value


async def _tail(client: Client, args: argparse.Namespace, out: Output) -> None:
    await tail(client, args.address, args.after, out)


def _no_args(p: argparse.ArgumentParser) -> None:
    pass


async def _ping(client: Client, args: argparse.Namespace, out: Output) -> None:
    seconds = await client.ping()
    out.emit(f"pong from {client.url} in {seconds * 1000:.1f} ms", {"seconds": seconds})


VERBS: dict[str, Verb] = {
    v.name: v
    for v in [
        Verb("send", "deliver a message to an actor; prints its seq once durable",
             _send_args, _send),
        Verb("spawn", "create an actor of a kind from a JSON spec", _spawn_args, _spawn),
        Verb("ls", "list actors with status, mailbox size and restarts", _ls_args, _ls),
        Verb("inspect", "show an actor's committed state and bookkeeping",
             _address_arg, _inspect),
        Verb("stop", "stop an actor and wait until it has stopped", _address_arg, _stop),
        Verb("tail", "print an actor's events as they happen, until it ends",
             _tail_args, _tail, reconnect=True),
        Verb("ping", "one round trip to the server", _no_args, _ping),
    ]
}  # fmt: skip


def _with_owner(fields: dict[str, Any]) -> dict[str, Any]:
    """An actor's fields with ``owner`` only where it has one (several nodes)."""
    if fields.get("owner") is None:
        fields.pop("owner", None)
    return fields
