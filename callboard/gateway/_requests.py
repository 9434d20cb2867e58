"""The requests a client sends (docs/protocol.md, "Ops"), as types the converter structures.

`Request` is a union tagged by ``op``: the converter picks the class whose
``op`` the frame names and structures the frame's object into it. Each
field's type says what the field takes: the field types (`Address`,
`MessageType`, `Seq`, ..., in `_fields`) are ``str`` or ``int`` annotated
with a structure hook that holds a value to the rules of the protocol and of
`callboard.mailbox`, and raises `Refused` with the rest of a sentence about
the field; every other field is strict JSON (`strict_json`). Unknown fields
are ignored, and ``null`` in an optional field means absent.
`structure_request` turns the first refusal into the message the client
reads: "field 'to' must be an address KIND/NAME (e.g. 'session/s1'), got 5
(a number)". Pure: no I/O.
"""

from __future__ import annotations

import typing
from typing import Any, ClassVar

import attrs
from cattrs import BaseValidationError
from cattrs.strategies import configure_tagged_union

from ..codec import Refused, converter, refusals, strict_json
from ._fields import (
    PROTOCOL_VERSION,
    Address,
    ByteLimit,
    ByteOffset,
    DeadLetterId,
    Kind,
    Limit,
    MessageKey,
    MessageType,
    Name,
    ProtocolVersion,
    Seq,
    Target,
    Text,
    address_field,
    is_pattern,
    message_key_field,
    message_type_field,
)

__all__ = [
    "OPS",
    "PROTOCOL_VERSION",
    "Address",
    "Approvals",
    "DeadLetterId",
    "DeadLetters",
    "Delete",
    "FieldRefused",
    "GetState",
    "Hello",
    "Inspect",
    "Kind",
    "Limit",
    "ListActors",
    "MessageKey",
    "MessageType",
    "Name",
    "Nodes",
    "Output",
    "Pause",
    "Ping",
    "ProtocolVersion",
    "Request",
    "Requeue",
    "Resume",
    "Send",
    "Seq",
    "SetState",
    "Spawn",
    "Step",
    "Stop",
    "Subscribe",
    "Target",
    "Text",
    "Unsubscribe",
    "is_pattern",
    "plain_send",
    "structure_request",
]

# -- the requests --------------------------------------------------------------------
# ``id`` is checked before the op is looked up (an error answers to it), so
# it is a plain string here. Fields are checked in their order, and of several
# wrong ones the first is named; a rule across fields (`_live_only`, an attrs
# validator) is checked once every field is right.


@strict_json()
@attrs.frozen
class Hello:
    op: ClassVar[str] = "hello"
    id: str
    protocol: ProtocolVersion = PROTOCOL_VERSION
    client: Text | None = None
    token: Text | None = None


@strict_json()
@attrs.frozen
class Send:
    op: ClassVar[str] = "send"
    id: str
    to: Address
    type: MessageType
    body: Any = None
    key: MessageKey | None = None
    wait: bool = False
    """Answer once the actor has handled the message, saying how (``outcome``)."""


@strict_json()
@attrs.frozen
class Spawn:
    op: ClassVar[str] = "spawn"
    id: str
    kind: Kind
    name: Name | None = None
    spec: Any = None


def _live_only(instance: Subscribe, attribute: Any, after: int | None) -> None:
    if after is not None and is_pattern(instance.actor):
        raise Refused(
            f"cannot be used with the pattern {instance.actor!r}: patterns are live only; "
            "subscribe to one actor's address to replay its events",
            field="after",
        )


@strict_json()
@attrs.frozen
class Subscribe:
    """``actor`` is an address or a pattern (``KIND/*``, ``*``); ``after`` only with an address."""

    op: ClassVar[str] = "subscribe"
    id: str
    actor: Target
    after: Seq | None = attrs.field(default=None, validator=_live_only)


@strict_json()
@attrs.frozen
class Unsubscribe:
    op: ClassVar[str] = "unsubscribe"
    id: str
    sub: Text


@strict_json()
@attrs.frozen
class ListActors:
    op: ClassVar[str] = "list"
    id: str
    kind: Text | None = None
    status: Text | None = None
    after: Text | None = None
    limit: Limit | None = None


@strict_json()
@attrs.frozen
class Inspect:
    op: ClassVar[str] = "inspect"
    id: str
    actor: Address


@strict_json()
@attrs.frozen
class Stop:
    op: ClassVar[str] = "stop"
    id: str
    actor: Address


@strict_json()
@attrs.frozen
class Output:
    """A job's output from byte ``after`` (docs/protocol.md, "output")."""

    op: ClassVar[str] = "output"
    id: str
    job: Address
    after: ByteOffset | None = None
    limit: ByteLimit | None = None


@strict_json()
@attrs.frozen
class Ping:
    op: ClassVar[str] = "ping"
    id: str


# -- an operator's requests (docs/protocol.md, "Operator ops") ------------------------


@strict_json()
@attrs.frozen
class Approvals:
    """The approvals waiting, of ``actor`` or of every actor the token reads."""

    op: ClassVar[str] = "approvals"
    id: str
    actor: Address | None = None


@strict_json()
@attrs.frozen
class DeadLetters:
    op: ClassVar[str] = "dead_letters"
    id: str
    actor: Address | None = None


@strict_json()
@attrs.frozen
class Requeue:
    op: ClassVar[str] = "requeue"
    id: str
    dead_letter: DeadLetterId


@strict_json()
@attrs.frozen
class Delete:
    op: ClassVar[str] = "delete"
    id: str
    actor: Address


# -- live attach (docs/protocol.md, "Live attach") ---------------------------------------


@strict_json()
@attrs.frozen
class GetState:
    op: ClassVar[str] = "state"
    id: str
    actor: Address


@strict_json()
@attrs.frozen
class SetState:
    """``state`` is checked against the actor's kind by the runtime (null: missing)."""

    op: ClassVar[str] = "set_state"
    id: str
    actor: Address
    state: Any = None


@strict_json()
@attrs.frozen
class Pause:
    op: ClassVar[str] = "pause"
    id: str
    actor: Address


@strict_json()
@attrs.frozen
class Resume:
    op: ClassVar[str] = "resume"
    id: str
    actor: Address


@strict_json()
@attrs.frozen
class Step:
    op: ClassVar[str] = "step"
    id: str
    actor: Address


@strict_json()
@attrs.frozen
class Nodes:
    op: ClassVar[str] = "nodes"
    id: str


Request = (
    Hello | Send | Spawn | Subscribe | Unsubscribe | ListActors | Inspect | Stop | Ping
    | Approvals | DeadLetters | Requeue | Delete | Output
    | GetState | SetState | Pause | Resume | Step | Nodes
)  # fmt: skip

_OP_OF: dict[type, str] = {cls: cls.op for cls in typing.get_args(Request)}
OPS = frozenset(_OP_OF.values())
configure_tagged_union(Request, converter, tag_generator=_OP_OF.__getitem__, tag_name="op")
_structure = converter.get_structure_hook(Request)  # once: the converter's lookup costs ~1 us


_REQUIRED_NOT_STRINGS = {"dead_letter": "an integer >= 1 (a dead letter's id)"}


class FieldRefused(ValueError):
    """A request with a field the server cannot take; the message names the field."""


def structure_request(frame: dict[str, Any]) -> Request:
    """``frame`` (an object whose ``op`` is one of `OPS` and whose ``id`` was checked)
    as its request; raises `FieldRefused` naming the first field that was wrong."""
    try:
        return _structure(frame, Request)  # type: ignore[no-any-return]
    except (BaseValidationError, Refused) as exc:
        path, first = refusals(exc)[0]
        field = path[0] if path else "?"
        if isinstance(first, KeyError):  # every required field is a string, but these
            what = _REQUIRED_NOT_STRINGS.get(str(field), "a string")
            raise FieldRefused(f"field {field!r} is missing: it must be {what}") from None
        predicate = first.predicate if isinstance(first, Refused) else f"is not valid ({first})"
        raise FieldRefused(f"field {field!r} {predicate}") from None


def plain_send(frame: dict[str, Any]) -> Send | None:
    """A `send` whose every field is plainly valid, structured without the
    converter (its tagged union was a twentieth of a gateway's CPU per send),
    through the same field hooks; None for anything else, which
    `structure_request` then answers, error and all."""
    key, wait = frame.get("key"), frame.get("wait", False)
    if type(wait) is not bool:
        return None
    try:
        to = address_field(frame.get("to"))
        kind_of_message = message_type_field(frame.get("type"), None)
        key = None if key is None else message_key_field(key, None)
    except Refused:
        return None
    return Send(frame["id"], to, kind_of_message, frame.get("body"), key, wait)
