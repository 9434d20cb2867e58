"""The requests a client sends (docs/protocol.md, "Ops"), as types the converter structures.

`Request` is a union tagged by ``op``: the converter picks the class whose
``op`` the frame names and structures the frame's object into it. Each
field's type says what the field takes: the field types here (`Address`,
`MessageType`, `Seq`, ...) are ``str`` or ``int`` annotated with a structure
hook that holds a value to the rules of the protocol and of
`callboard.mailbox`, and raises `Refused` with the rest of a sentence about
the field; every other field is strict JSON (`strict_json`). Unknown fields
are ignored, and ``null`` in an optional field means absent.
`structure_request` turns the first refusal into the message the client
reads: "field 'to' must be an address KIND/NAME (e.g. 'session/s1'), got 5
(a number)". Pure: no I/O.
"""

from __future__ import annotations

import re
import typing
from typing import Annotated, Any, ClassVar

import attrs
from cattrs import BaseValidationError
from cattrs.gen import override
from cattrs.strategies import configure_tagged_union

from ..codec import Refused, converter, refusals, shown, strict_json
from ..errors import BadMessage
from ..mailbox import KIND_PATTERN, NAME_PATTERN, check_key, check_type

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

PROTOCOL_VERSION = 1
_MAX_SEQ = 2**63 - 1  # the store's integers are signed 64-bit


def is_pattern(actor: str) -> bool:
    """True for the live-only subscription patterns ``*`` and ``KIND/*``."""
    return actor == "*" or actor.endswith("/*")


# -- the field types' hooks --------------------------------------------------------


def _text(value: Any, _: Any = None) -> str:
    if value is None:
        raise Refused("is missing: it must be a string")
    if not isinstance(value, str) or not value:
        raise Refused(f"must be a non-empty string, got {shown(value)}")
    return value


def _address(value: Any, _: Any = None) -> str:
    text = _text(value)
    kind, sep, name = text.partition("/")
    if not sep or not KIND_PATTERN.fullmatch(kind) or not NAME_PATTERN.fullmatch(name):
        raise Refused(f"must be an address KIND/NAME (e.g. 'session/s1'), got {shown(text)}")
    return text


def _target(value: Any, _: Any) -> str:
    text = _text(value)
    if not is_pattern(text):
        return _address(text)
    if text != "*" and not KIND_PATTERN.fullmatch(text[:-2]):
        raise Refused(f"must be an address KIND/NAME or a pattern KIND/* or *, got {shown(text)}")
    return text


def _matching(pattern: re.Pattern[str], what: str) -> Any:
    def check(value: Any, _: Any) -> str:
        text = _text(value)
        if not pattern.fullmatch(text):
            raise Refused(f"must be {what} matching {pattern.pattern}, got {shown(text)}")
        return text

    return check


_IT = "it"  # the subject of a mailbox limit's sentence, replaced by the field's name


def _within(check: Any) -> Any:
    """A hook holding a string to a limit of `callboard.mailbox`, as `Runtime.send` does."""

    def hook(value: Any, _: Any) -> str:
        try:
            return check(_text(value), what=_IT)  # type: ignore[no-any-return]
        except BadMessage as exc:
            raise Refused(str(exc).removeprefix(f"{_IT} ")) from None

    return hook


def _integer(value: Any, expected: str, low: int, high: int | None = None) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        raise Refused(f"must be {expected}, got {shown(value)}")
    return value


def _seq(value: Any, _: Any) -> int:
    return _integer(value, "an integer >= 0 (an event seq)", 0, _MAX_SEQ)


def _limit(value: Any, _: Any) -> int:
    return _integer(value, "an integer >= 1 (actors in one reply)", 1)


def _offset(value: Any, _: Any) -> int:
    return _integer(value, "an integer >= 0 (a byte offset)", 0, _MAX_SEQ)


def _byte_limit(value: Any, _: Any) -> int:
    return _integer(value, "an integer >= 1 (bytes in one reply)", 1)


def _protocol(value: Any, _: Any) -> int:
    if value is None:
        return PROTOCOL_VERSION
    if isinstance(value, bool) or not isinstance(value, int):
        raise Refused(f"must be an integer, got {shown(value)}")
    if value != PROTOCOL_VERSION:
        raise Refused(f"asks for version {value}; this server speaks {PROTOCOL_VERSION}")
    return value


# -- the field types ------------------------------------------------------------------
# Each is ``str`` or ``int`` to the type checker and to code reading a request;
# to the converter, the hook its ``override`` names (`strict_json`).

Text = Annotated[str, override(struct_hook=_text)]
"""A non-empty string."""
Address = Annotated[str, override(struct_hook=_address)]
"""An actor's address, ``KIND/NAME``."""
Target = Annotated[str, override(struct_hook=_target)]
"""What a subscription follows: an address, or a pattern ``KIND/*`` or ``*``."""
Kind = Annotated[str, override(struct_hook=_matching(KIND_PATTERN, "a kind"))]
Name = Annotated[str, override(struct_hook=_matching(NAME_PATTERN, "a name"))]
_message_type = _within(check_type)
_message_key = _within(check_key)
MessageType = Annotated[str, override(struct_hook=_message_type)]
"""A message type within `callboard.mailbox.check_type`."""
MessageKey = Annotated[str, override(struct_hook=_message_key)]
"""An idempotency key within `callboard.mailbox.check_key`."""
Seq = Annotated[int, override(struct_hook=_seq)]
"""An event seq: 0 to 2**63 - 1."""
Limit = Annotated[int, override(struct_hook=_limit)]
"""How many actors one ``list`` reply may hold: 1 or more."""
ProtocolVersion = Annotated[int, override(struct_hook=_protocol)]
ByteOffset = Annotated[int, override(struct_hook=_offset)]
"""A byte offset into a job's output: 0 to 2**63 - 1."""
ByteLimit = Annotated[int, override(struct_hook=_byte_limit)]
"""How many bytes one ``output`` reply may hold: 1 or more (capped by the server)."""
"""The protocol version a ``hello`` asks for; null or absent means this one."""


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


def _dead_letter_id(value: Any, _: Any) -> int:
    return _integer(value, "an integer >= 1 (a dead letter's id)", 1, _MAX_SEQ)


DeadLetterId = Annotated[int, override(struct_hook=_dead_letter_id)]
"""A dead letter's id: 1 to 2**63 - 1."""


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
        to = _address(frame.get("to"))
        kind_of_message = _message_type(frame.get("type"), None)
        key = None if key is None else _message_key(key, None)
    except Refused:
        return None
    return Send(frame["id"], to, kind_of_message, frame.get("body"), key, wait)
