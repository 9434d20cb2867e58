"""The field types of the requests (`_requests`): each is ``str`` or ``int``
annotated with the structure hook that holds a value to the rules of the
protocol (docs/protocol.md) and of `callboard.mailbox`, raising `Refused`
with the rest of a sentence about the field. Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from cattrs.gen import override

from ..codec import Refused, shown
from ..errors import BadMessage
from ..mailbox import KIND_PATTERN, NAME_PATTERN, check_key, check_type

__all__ = [
    "PROTOCOL_VERSION",
    "Address",
    "ByteLimit",
    "ByteOffset",
    "DeadLetterId",
    "Kind",
    "Limit",
    "MessageKey",
    "MessageType",
    "Name",
    "ProtocolVersion",
    "Seq",
    "Target",
    "Text",
    "address_field",
    "is_pattern",
    "message_key_field",
    "message_type_field",
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


def address_field(value: Any, _: Any = None) -> str:
    text = _text(value)
    kind, sep, name = text.partition("/")
    if not sep or not KIND_PATTERN.fullmatch(kind) or not NAME_PATTERN.fullmatch(name):
        raise Refused(f"must be an address KIND/NAME (e.g. 'session/s1'), got {shown(text)}")
    return text


def _target(value: Any, _: Any) -> str:
    text = _text(value)
    if not is_pattern(text):
        return address_field(text)
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


def _dead_letter_id(value: Any, _: Any) -> int:
    return _integer(value, "an integer >= 1 (a dead letter's id)", 1, _MAX_SEQ)


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
Address = Annotated[str, override(struct_hook=address_field)]
"""An actor's address, ``KIND/NAME``."""
Target = Annotated[str, override(struct_hook=_target)]
"""What a subscription follows: an address, or a pattern ``KIND/*`` or ``*``."""
Kind = Annotated[str, override(struct_hook=_matching(KIND_PATTERN, "a kind"))]
Name = Annotated[str, override(struct_hook=_matching(NAME_PATTERN, "a name"))]
message_type_field = _within(check_type)
message_key_field = _within(check_key)
MessageType = Annotated[str, override(struct_hook=message_type_field)]
"""A message type within `callboard.mailbox.check_type`."""
MessageKey = Annotated[str, override(struct_hook=message_key_field)]
"""An idempotency key within `callboard.mailbox.check_key`."""
Seq = Annotated[int, override(struct_hook=_seq)]
"""An event seq: 0 to 2**63 - 1."""
Limit = Annotated[int, override(struct_hook=_limit)]
"""How many actors one ``list`` reply may hold: 1 or more."""
ProtocolVersion = Annotated[int, override(struct_hook=_protocol)]
"""The protocol version a ``hello`` asks for; null or absent means this one."""
ByteOffset = Annotated[int, override(struct_hook=_offset)]
"""A byte offset into a job's output: 0 to 2**63 - 1."""
ByteLimit = Annotated[int, override(struct_hook=_byte_limit)]
"""How many bytes one ``output`` reply may hold: 1 or more (capped by the server)."""
DeadLetterId = Annotated[int, override(struct_hook=_dead_letter_id)]
"""A dead letter's id: 1 to 2**63 - 1."""
