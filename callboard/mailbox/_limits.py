"""The limits a message meets at the door: the same at every later stage.

What is accepted at the door must pass every stage after it (the store, the
handler's emits, the frames that carry it to subscribers), or one message
could break them all for good. So each limit is defined once, here, and
checked where a message comes in: the gateway's frame parse and
`Runtime.send` give the same number in the same words.

- `MAX_DEPTH` (128): how deep a message body, a spec or an event's data may
  nest arrays and objects (``[1]`` is one level). orjson encodes at most 254
  levels, and the frames carrying a value add levels of their own (an event
  frame one, its ``data`` field): half of orjson's limit leaves room for any
  envelope and is still far beyond real data (Protocol Buffers stops at 100).
- `MAX_TYPE` (128 characters): a message type is a name, like ``task.cancel``.
- `MAX_KEY` (256 characters): an idempotency key is an id (a UUID is 36); it
  is stored and indexed for as long as the key window lasts. The same as a
  request's ``id`` on the wire.

A type or key may not hold control characters (U+0000 to U+001F, U+007F to
U+009F) or lone surrogates: they end up in logs, terminals and SQLite text,
where a NUL or an escape sequence is a trap, and a surrogate cannot be
stored at all. Addresses are held to `KIND_PATTERN` and `NAME_PATTERN`,
which allow none of these either.
"""

from __future__ import annotations

import re

from ..errors import BadMessage

__all__ = ["MAX_DEPTH", "MAX_KEY", "MAX_TYPE", "check_key", "check_type"]

MAX_DEPTH = 128
MAX_TYPE = 128
MAX_KEY = 256

_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def check_type(value: object, *, what: str) -> str:
    """``value`` if it is a message type; else `BadMessage`, its message opening with ``what``."""
    return _check(value, MAX_TYPE, what)


def check_key(value: object, *, what: str) -> str:
    """``value`` if it is an idempotency key; else `BadMessage`, opening with ``what``."""
    return _check(value, MAX_KEY, what)


def _check(value: object, limit: int, what: str) -> str:
    if not isinstance(value, str) or not value:
        shown = repr(value)
        shown = shown if len(shown) <= 60 else f"{shown[:57]}..."
        raise BadMessage(f"{what} must be a non-empty string, got {shown}")
    if len(value) > limit:
        raise BadMessage(f"{what} must be at most {limit} characters, got {len(value)}")
    # isprintable is quick and true of nearly every type and key; the
    # characters it also refuses (e.g. U+00A0, U+200D) are allowed.
    if not value.isprintable() and (bad := _UNSAFE.search(value)) is not None:
        raise BadMessage(
            f"{what} must not hold control characters or lone surrogates, "
            f"got {bad.group()!r} at index {bad.start()}"
        )
    return value
