"""The errors a gateway client adds to the `CallboardError` tree, and the wire mapping.

A server ``error`` frame becomes the same exception the embedded runtime
raises for the same mistake, so code written against ``Runtime`` catches the
same types remotely. The codes docs/protocol.md has and the core tree lacks get
classes here (``callboard/errors.py`` stays the core's)::

    CallboardError
    ├── BadRequest          bad_request   (core)
    │   └── TooLarge        too_large
    ├── UnknownActor        unknown_actor (core)
    ├── UnknownKind         unknown_kind  (core)
    ├── StoreUnavailable    unavailable   (core, retryable)
    ├── UnknownOutcome      unknown_outcome (core, retryable with the same key)
    ├── Forbidden           forbidden     (core)
    ├── Pruned              pruned        (core; ``first`` is the first seq still held)
    ├── Unauthorized        unauthorized
    ├── RateLimited         rate_limited  (retryable)
    ├── ServerError         internal, or a code this client does not know
    ├── ProtocolError       the server said something docs/protocol.md does not allow
    └── ConnectionFailed    the gateway cannot be reached (retryable unless refused)
        └── ConnectionLost  the connection dropped before the reply: the request
                            may or may not have been applied
"""

from __future__ import annotations

from typing import Any

from .. import errors as _core
from ..errors import (
    BadRequest,
    CallboardError,
    Forbidden,
    Pruned,
    StoreUnavailable,
    UnknownActor,
    UnknownKind,
    UnknownOutcome,
)

__all__ = [
    "ConnectionFailed",
    "ConnectionLost",
    "ProtocolError",
    "RateLimited",
    "ServerError",
    "TooLarge",
    "Unauthorized",
    "error_from_frame",
]


class Unauthorized(CallboardError):
    """The gateway wants a token and got none, or a wrong one."""

    code = "unauthorized"


class TooLarge(BadRequest):
    """A frame or body over the gateway's limit (default 1 MiB)."""

    code = "too_large"


class RateLimited(CallboardError):
    """The connection is over its limits; the same request may succeed later."""

    code = "rate_limited"
    retryable = True


class ServerError(CallboardError):
    """The gateway reported a bug (``internal``) or a code this client does not know.

    ``code`` is the code the server sent.
    """

    def __init__(self, message: str, *, code: str = "internal") -> None:
        super().__init__(message)
        self.code = code


class ProtocolError(CallboardError):
    """The server sent something docs/protocol.md does not allow; the message quotes it."""


class ConnectionFailed(CallboardError):
    """The gateway cannot be reached, or refused the websocket handshake.

    ``retryable`` is False when trying again cannot help without a change
    (an HTTP 4xx refusal, a URL that is not ``ws://`` or ``wss://``).
    """

    retryable = True

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


class ConnectionLost(ConnectionFailed):
    """The connection dropped while a request awaited its reply.

    Nothing says whether the server applied it: a ``send`` with a ``key`` is
    safe to repeat (the repeat is acknowledged as a duplicate), a keyless one
    may be delivered twice.
    """


_BY_CODE: dict[str, type[CallboardError]] = {
    "bad_request": BadRequest,
    "unknown_actor": UnknownActor,
    "unknown_kind": UnknownKind,
    "unavailable": StoreUnavailable,
    "unknown_outcome": UnknownOutcome,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "too_large": TooLarge,
    "rate_limited": RateLimited,
}


def error_from_frame(frame: dict[str, Any]) -> CallboardError:
    """The exception an ``error`` frame stands for, carrying the server's sentence."""
    code = frame.get("code")
    message = frame.get("message")
    if not isinstance(message, str) or not message:
        message = f"the server answered with error code {code!r} and no message"
    if code == "pruned":
        actor, first = frame.get("actor"), frame.get("first")
        if isinstance(actor, str) and isinstance(first, int) and not isinstance(first, bool):
            return Pruned(actor, first, message)
    named = _BY_NAME.get(frame.get("error_type"))  # type: ignore[arg-type]
    if named is not None and named.code == code:
        # The class the runtime raised: a remote caller catches what a local one does.
        return named(message)
    cls = _BY_CODE.get(code) if isinstance(code, str) else None
    if cls is None:
        return ServerError(message, code=code if isinstance(code, str) else "internal")
    return cls(message)


def _message_classes() -> dict[str, type[CallboardError]]:
    """The core's error classes that are made from a message alone, by name."""
    found: dict[str, type[CallboardError]] = {}
    for name in _core.__all__:
        value = getattr(_core, name)
        if isinstance(value, type) and issubclass(value, CallboardError):
            if value not in (_core.Lagged, _core.Pruned):  # made from fields, not a sentence
                found[name] = value
    return found


_BY_NAME = _message_classes()
