"""What travels: messages into a mailbox, acks back, events out, dead letters aside."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Protocol

import attrs

from ..codec import dumps_within, loads
from ..errors import BadMessage, CrashReason
from ._limits import MAX_DEPTH

__all__ = ["Ack", "DeadLetter", "Event", "Message", "encode_body", "format_at"]


def encode_body(body: Any, *, what: str) -> bytes:
    """Serialize a body (or spec, or event data) to JSON bytes, or raise
    `BadMessage` naming ``what``: also when it nests deeper than `MAX_DEPTH`."""
    try:
        data = dumps_within(body, MAX_DEPTH)
    except TypeError as exc:
        raise BadMessage(f"{what} does not serialize to JSON: {exc}") from None
    if data is None:
        raise BadMessage(
            f"{what} nests arrays and objects deeper than {MAX_DEPTH} levels, the limit "
            "(callboard.mailbox.MAX_DEPTH); flatten it or send the deep part as a string"
        )
    return data


def format_at(at: float) -> str:
    """Wall time as docs/protocol.md writes it: ISO 8601, milliseconds, ``Z``."""
    stamp = datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


@attrs.frozen
class Ack:
    """The recipient's mailbox position of a durable message.

    ``duplicate`` is true when the key was seen before: ``seq`` is then the
    first send's, and the message was not delivered again.
    """

    seq: int
    duplicate: bool = False


# What `from_record` reads of a stored row, by shape: the store's records fit,
# and the mailbox (below the store in the layers) never imports them.
class _StoredMessage(Protocol):
    @property
    def seq(self) -> int: ...
    @property
    def type(self) -> str: ...
    @property
    def body(self) -> bytes: ...
    @property
    def sender(self) -> str | None: ...
    @property
    def key(self) -> str | None: ...
    @property
    def attempts(self) -> int: ...
    @property
    def at(self) -> float: ...


class _StoredEvent(Protocol):
    @property
    def address(self) -> str: ...
    @property
    def seq(self) -> int: ...
    @property
    def type(self) -> str: ...
    @property
    def data(self) -> bytes: ...
    @property
    def at(self) -> float: ...


class _StoredDeadLetter(_StoredMessage, Protocol):
    @property
    def id(self) -> int: ...
    @property
    def address(self) -> str: ...
    @property
    def error(self) -> bytes: ...


@attrs.frozen
class Message:
    """A message as its actor's handler receives it."""

    seq: int
    type: str
    body: Any
    sender: str | None = None
    key: str | None = None
    attempt: int = 1
    at: float = 0.0

    @classmethod
    def from_record(cls, record: _StoredMessage, *, attempt: int | None = None) -> Message:
        """The stored message; its ``attempt`` the next after those recorded, unless given."""
        return cls(
            seq=record.seq,
            type=record.type,
            body=loads(record.body),
            sender=record.sender,
            key=record.key,
            attempt=record.attempts + 1 if attempt is None else attempt,
            at=record.at,
        )


@attrs.frozen
class Event:
    """Something an actor announced. ``seq`` is None for ephemeral events
    (streamed text), which are never stored or replayed."""

    actor: str
    seq: int | None
    type: str
    data: Any
    at: float

    @classmethod
    def from_record(cls, record: _StoredEvent) -> Event:
        return cls(record.address, record.seq, record.type, loads(record.data), record.at)

    def to_json(self) -> dict[str, Any]:
        return {
            "actor": self.actor,
            "seq": self.seq,
            "type": self.type,
            "data": self.data,
            "at": format_at(self.at),
        }


@attrs.frozen
class DeadLetter:
    """A message set aside after it failed too often, with the error that stopped it."""

    id: int
    actor: str
    seq: int
    type: str
    body: Any
    attempts: int
    error: CrashReason
    at: float
    sender: str | None = None
    key: str | None = None

    @classmethod
    def from_record(cls, record: _StoredDeadLetter) -> DeadLetter:
        error = loads(record.error)
        return cls(
            id=record.id,
            actor=record.address,
            seq=record.seq,
            type=record.type,
            body=loads(record.body),
            attempts=record.attempts,
            error=CrashReason(error.get("type", ""), error.get("message", ""),
                              error.get("traceback", "")),
            at=record.at,
            sender=record.sender,
            key=record.key,
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        """As docs/protocol.md's ``dead_letters`` reply has it: the error unboxed."""
        return {
            "id": self.id,
            "actor": self.actor,
            "seq": self.seq,
            "type": self.type,
            "body": self.body,
            "error": self.error.message,
            "error_type": self.error.type,
            "traceback": self.error.traceback,
            "attempts": self.attempts,
            "at": format_at(self.at),
            "sender": self.sender,
            "key": self.key,
        }
