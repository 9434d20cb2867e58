"""docs/protocol.md frames to and from the core's own types; no I/O, no trio.

The client hands out the very types the embedded runtime does (`Event`,
`Ack`, `ActorInfo`, `ActorView`), so code can move between embedding and
the gateway without a rewrite. A reply that lacks a field docs/protocol.md
promises is a `ProtocolError` naming the field, never a bare ``KeyError``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson

from ..errors import BadMessage
from ..mailbox import Event
from ..views import ActorInfo, ActorView
from ._errors import ProtocolError

__all__ = [
    "decode",
    "encode",
    "event_from_frame",
    "field",
    "info_from_frame",
    "parse_at",
    "view_from_frame",
]


def encode(frame: dict[str, Any]) -> str:
    """One text frame; a body that is not JSON is the caller's `BadMessage`."""
    try:
        return orjson.dumps(frame).decode()
    except TypeError as exc:
        what = frame.get("op", "request")
        raise BadMessage(f"the {what} request does not serialize to JSON: {exc}") from None


def decode(text: str | bytes) -> dict[str, Any]:
    """Parse a frame from the server; anything but a JSON object with an ``op`` is refused."""
    try:
        frame = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise ProtocolError(f"the server sent a frame that is not JSON: {text[:200]!r}") from None
    if not isinstance(frame, dict) or not isinstance(frame.get("op"), str):
        raise ProtocolError(f"the server sent a frame without a string 'op': {text[:200]!r}")
    return frame


def field(frame: dict[str, Any], name: str, *types: type) -> Any:
    """``frame[name]`` checked against ``types``, or a `ProtocolError` saying what arrived."""
    value = frame.get(name)
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        expected = " or ".join(t.__name__ for t in types)
        raise ProtocolError(
            f"the server's {frame.get('op')!r} frame has {name}={value!r}; "
            f"docs/protocol.md says it is {expected}"
        )
    return value


def parse_at(value: str) -> float:
    """docs/protocol.md's ``at`` (ISO 8601, ``Z``) as seconds since the epoch, like `Event.at`."""
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        raise ProtocolError(f"the server sent an event time {value!r}, not ISO 8601") from None


def event_from_frame(frame: dict[str, Any]) -> Event:
    return Event(
        actor=field(frame, "actor", str),
        seq=field(frame, "seq", int, type(None)),
        type=field(frame, "type", str),
        data=frame.get("data"),
        at=parse_at(field(frame, "at", str)),
    )


def info_from_frame(row: dict[str, Any]) -> ActorInfo:
    return ActorInfo(
        actor=field(row, "actor", str),
        status=field(row, "status", str),
        mailbox=field(row, "mailbox", int),
        restarts=field(row, "restarts", int),
        owner=field(row, "owner", str) if "owner" in row else None,
    )


def view_from_frame(frame: dict[str, Any], address: str) -> ActorView:
    actor = field(frame, "actor", str) if "actor" in frame else address
    return ActorView(
        actor=actor,
        kind=actor.split("/", 1)[0],
        status=field(frame, "status", str),
        state=frame.get("state"),
        cursor=field(frame, "cursor", int),
        mailbox=field(frame, "mailbox", int),
        head=field(frame, "head", int),
        restarts=field(frame, "restarts", int),
        last_error=field(frame, "last_error", dict, type(None)),
        spec=frame.get("spec"),
        summary=frame.get("summary") if isinstance(frame.get("summary"), dict) else None,
        owner=field(frame, "owner", str) if "owner" in frame else None,
    )
