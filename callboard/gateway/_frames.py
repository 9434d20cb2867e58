"""The gateway's wire format (docs/protocol.md): parse incoming frames, encode outgoing ones.

Pure: no I/O and no trio, so every rule about what a client may send is
tested without a socket. `parse_frame` turns one text frame into a typed
request or a `FrameError` whose message names the offending field; it never
raises. Unknown fields are ignored (clients may be newer than the server);
``null`` in an optional field means absent. A frame is held to the limits of
`callboard.mailbox` and to what its text says (no key twice in an object, no
integer past 64 bits), so that nothing is changed or broken on its way in.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import orjson

from ..codec import JSONRefused, check_loaded
from ..errors import BadMessage
from ..mailbox import KIND_PATTERN, MAX_DEPTH, NAME_PATTERN, Event, check_key, check_type

__all__ = [
    "PROTOCOL_VERSION",
    "EventEncoder",
    "FrameError",
    "Hello",
    "Inspect",
    "ListActors",
    "Ping",
    "Request",
    "Send",
    "Spawn",
    "Stop",
    "Subscribe",
    "Unsubscribe",
    "encode",
    "encode_error",
    "encode_lagged",
    "encode_ok",
    "is_pattern",
    "parse_frame",
]

PROTOCOL_VERSION = 1
MAX_ID = 256
_MAX_SEQ = 2**63 - 1  # the store's integers are signed 64-bit


@attrs.frozen
class FrameError:
    """A frame the server cannot act on; answered with ``error`` (``id`` may be None)."""

    code: str
    message: str
    id: str | None = None
    op: str | None = None


@attrs.frozen
class Hello:
    op: ClassVar[str] = "hello"
    id: str
    protocol: int = PROTOCOL_VERSION
    client: str | None = None
    token: str | None = None


@attrs.frozen
class Send:
    op: ClassVar[str] = "send"
    id: str
    to: str
    type: str
    body: Any = None
    key: str | None = None


@attrs.frozen
class Spawn:
    op: ClassVar[str] = "spawn"
    id: str
    kind: str
    name: str | None = None
    spec: Any = None


@attrs.frozen
class Subscribe:
    """``actor`` is an address or a pattern (``KIND/*``, ``*``); ``after`` only with an address."""

    op: ClassVar[str] = "subscribe"
    id: str
    actor: str
    after: int | None = None


@attrs.frozen
class Unsubscribe:
    op: ClassVar[str] = "unsubscribe"
    id: str
    sub: str


@attrs.frozen
class ListActors:
    op: ClassVar[str] = "list"
    id: str
    kind: str | None = None
    status: str | None = None
    after: str | None = None
    limit: int | None = None


@attrs.frozen
class Inspect:
    op: ClassVar[str] = "inspect"
    id: str
    actor: str


@attrs.frozen
class Stop:
    op: ClassVar[str] = "stop"
    id: str
    actor: str


@attrs.frozen
class Ping:
    op: ClassVar[str] = "ping"
    id: str


Request = Hello | Send | Spawn | Subscribe | Unsubscribe | ListActors | Inspect | Stop | Ping


class _FieldError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_JSON_TYPES = {
    type(None): "null",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    str: "a string",
    list: "an array",
    dict: "an object",
}


def _shown(value: Any) -> str:
    """A value as an error message shows it: short, with its JSON type."""
    try:
        text = orjson.dumps(value).decode() if not isinstance(value, float) else repr(value)
    except TypeError:  # nested deeper than orjson goes: shown by its type alone
        text = "[...]" if isinstance(value, list) else "{...}"
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({_JSON_TYPES.get(type(value), 'a value')})"


def _wrong(field: str, expected: str, value: Any) -> _FieldError:
    return _FieldError("bad_request", f"field {field!r} must be {expected}, got {_shown(value)}")


def _string(obj: dict[str, Any], field: str, *, required: bool = True) -> str | None:
    value = obj.get(field)
    if value is None:
        if required:
            raise _FieldError("bad_request", f"field {field!r} is missing: it must be a string")
        return None
    if not isinstance(value, str) or not value:
        raise _wrong(field, "a non-empty string", value)
    return value


def _required(obj: dict[str, Any], field: str) -> str:
    value = _string(obj, field)
    assert value is not None
    return value


def _matching(obj: dict[str, Any], field: str, pattern: Any, what: str, *, required: bool) -> Any:
    value = _string(obj, field, required=required)
    if value is not None and not pattern.fullmatch(value):
        raise _wrong(field, f"{what} matching {pattern.pattern}", value)
    return value


def _address(obj: dict[str, Any], field: str) -> str:
    value = _required(obj, field)
    kind, sep, name = value.partition("/")
    if not sep or not KIND_PATTERN.fullmatch(kind) or not NAME_PATTERN.fullmatch(name):
        raise _wrong(field, "an address KIND/NAME (e.g. 'session/s1')", value)
    return value


def is_pattern(actor: str) -> bool:
    """True for the live-only subscription patterns ``*`` and ``KIND/*``."""
    return actor == "*" or actor.endswith("/*")


def _seq(obj: dict[str, Any], field: str) -> int | None:
    value = obj.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_SEQ:
        raise _wrong(field, "an integer >= 0 (an event seq)", value)
    return value


def _hello(obj: dict[str, Any], rid: str) -> Hello:
    protocol = obj.get("protocol", PROTOCOL_VERSION)
    if protocol is None:
        protocol = PROTOCOL_VERSION
    if isinstance(protocol, bool) or not isinstance(protocol, int):
        raise _wrong("protocol", "an integer", protocol)
    if protocol != PROTOCOL_VERSION:
        raise _FieldError(
            "bad_request",
            f"field 'protocol' asks for version {protocol}; this server speaks {PROTOCOL_VERSION}",
        )
    client = _string(obj, "client", required=False)
    return Hello(rid, protocol, client, _string(obj, "token", required=False))


def _subscribe(obj: dict[str, Any], rid: str) -> Subscribe:
    actor = _required(obj, "actor")
    after = _seq(obj, "after")
    if is_pattern(actor):
        kind = actor[:-2]
        if actor != "*" and not KIND_PATTERN.fullmatch(kind):
            raise _wrong("actor", "an address KIND/NAME or a pattern KIND/* or *", actor)
        if after is not None:
            raise _FieldError(
                "bad_request",
                f"field 'after' cannot be used with the pattern {actor!r}: patterns are live "
                "only; subscribe to one actor's address to replay its events",
            )
        return Subscribe(rid, actor, None)
    return Subscribe(rid, _address(obj, "actor"), after)


def _limited(check: Any, value: str | None, what: str) -> Any:
    """``value`` held to a limit of `callboard.mailbox`, as `Runtime.send` holds it."""
    if value is None:
        return None
    try:
        return check(value, what=what)
    except BadMessage as exc:
        raise _FieldError("bad_request", str(exc)) from None


def _send(o: dict[str, Any], rid: str) -> Send:
    to = _address(o, "to")
    type_ = _limited(check_type, _required(o, "type"), "field 'type'")
    key = _limited(check_key, _string(o, "key", required=False), "field 'key'")
    return Send(rid, to, type_, o.get("body"), key)


def _spawn(o: dict[str, Any], rid: str) -> Spawn:
    kind = _matching(o, "kind", KIND_PATTERN, "a kind", required=True)
    name = _matching(o, "name", NAME_PATTERN, "a name", required=False)
    return Spawn(rid, kind, name, o.get("spec"))


def _list(o: dict[str, Any], rid: str) -> ListActors:
    limit = o.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise _wrong("limit", "an integer >= 1 (actors in one reply)", limit)
    return ListActors(
        rid,
        _string(o, "kind", required=False),
        _string(o, "status", required=False),
        _string(o, "after", required=False),
        limit,
    )


_PARSERS: dict[str, Any] = {
    "hello": _hello,
    "send": _send,
    "spawn": _spawn,
    "subscribe": _subscribe,
    "unsubscribe": lambda o, rid: Unsubscribe(rid, _required(o, "sub")),
    "list": _list,
    "inspect": lambda o, rid: Inspect(rid, _address(o, "actor")),
    "stop": lambda o, rid: Stop(rid, _address(o, "actor")),
    "ping": lambda o, rid: Ping(rid),
}


def _too_large(frame: str, max_frame: int) -> bool:
    # Characters are cheap to count and never more than bytes; encode only when it matters.
    if len(frame) > max_frame:
        return True
    return len(frame) * 4 > max_frame and len(frame.encode("utf-8", "surrogatepass")) > max_frame


def parse_frame(frame: str | bytes, *, max_frame: int) -> Request | FrameError:
    """One incoming frame as a request, or the error to answer it with."""
    if isinstance(frame, bytes):
        return FrameError(
            "bad_request", "binary frames are not accepted: send each request as a text frame"
        )
    if _too_large(frame, max_frame):
        message = f"the frame is over the limit of {max_frame} bytes; nothing was done"
        return FrameError("too_large", message, *_id_and_op(frame))
    try:
        obj = orjson.loads(frame)
    except orjson.JSONDecodeError as exc:
        return FrameError("bad_request", f"the frame is not JSON: {exc}")
    if not isinstance(obj, dict):
        return FrameError(
            "bad_request", f"the frame must be a JSON object with an 'op', got {_shown(obj)}"
        )
    try:
        # The frame's own object is one level: its fields may nest MAX_DEPTH.
        check_loaded(frame, obj, depth=MAX_DEPTH + 1)
    except JSONRefused as exc:
        # An id given twice is no id to answer to.
        rid = None if exc.pointer == "/id" else _id_or_none(obj)
        op = obj.get("op")
        return FrameError("bad_request", str(exc), rid, op if isinstance(op, str) else None)
    op = obj.get("op")
    if not isinstance(op, str):
        message = f"field 'op' must be a string naming the operation, got {_shown(op)}"
        if op is None:
            message = "field 'op' is missing: it must be a string naming the operation"
        return FrameError("bad_request", message, _id_or_none(obj))
    rid = obj.get("id")
    if not isinstance(rid, str) or not 0 < len(rid) <= MAX_ID:
        message = (
            "field 'id' is missing: every request carries a string id"
            if rid is None
            else f"field 'id' must be a string of 1 to {MAX_ID} characters, got {_shown(rid)}"
        )
        return FrameError("bad_request", message, None, op)
    parser = _PARSERS.get(op)
    if parser is None:
        known = ", ".join(sorted(_PARSERS))
        message = f"field 'op' has unknown op {_shown(op)}; known: {known}"
        return FrameError("bad_request", message, rid, op)
    try:
        return parser(obj, rid)  # type: ignore[no-any-return]
    except _FieldError as exc:
        return FrameError(exc.code, exc.message, rid, op)


def _id_and_op(frame: str) -> tuple[str | None, str | None]:
    """The ``id`` and ``op`` of an oversized frame, so that its error can be
    matched to its request. The frame is already in memory, bounded by the
    transport's limit; parsing it costs about what a valid frame would."""
    try:
        obj = orjson.loads(frame)
    except orjson.JSONDecodeError:
        return None, None
    if not isinstance(obj, dict):
        return None, None
    op = obj.get("op")
    return _id_or_none(obj), op if isinstance(op, str) else None


def _id_or_none(obj: dict[str, Any]) -> str | None:
    rid = obj.get("id")
    return rid if isinstance(rid, str) and 0 < len(rid) <= MAX_ID else None


def encode(frame: dict[str, Any]) -> str:
    """One outgoing frame as the text of a websocket message."""
    return orjson.dumps(frame).decode()


def encode_ok(rid: str, **fields: Any) -> str:
    return encode({"op": "ok", "id": rid, **fields})


def encode_error(rid: str | None, code: str, message: str, error_type: str | None = None) -> str:
    """An ``error`` frame; ``error_type`` names the `CallboardError` class the
    runtime raised, so that a client can raise the same one (docs/protocol.md)."""
    frame: dict[str, Any] = {"op": "error", "id": rid, "code": code, "message": message}
    if error_type is not None:
        frame["error_type"] = error_type
    return encode(frame)


class EventEncoder:
    """Encodes each event once for all its subscribers.

    The hub hands the same `Event` object to every subscription, and their
    forwarders run interleaved, so remembering the last ``size`` events
    spares re-encoding one event for each of a hundred subscribers. Only
    ``sub`` differs between their frames. A replayed event is read from
    the store for one subscription alone, so it is encoded without being
    remembered (``shared=False``): 256 replayed events of 1 MB each would
    otherwise stay in memory, and no other subscriber would ever hit them.

    An event that cannot be encoded (stored by an older version that let
    deeper data in, or ephemeral data that is no JSON) is sent as a stand-in
    (`_unencodable`): one bad event must not end every stream that reaches it.
    """

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._bodies: dict[int, tuple[Event, str]] = {}

    def frame(self, sub: str, event: Event, *, shared: bool = True) -> str:
        hit = self._bodies.get(id(event)) if shared else None
        if hit is not None and hit[0] is event:  # held here, so its id is not reused
            body = hit[1]
        else:
            try:
                body = encode(event.to_json())
            except TypeError as exc:
                body = _unencodable(event, exc)
            if shared:
                if len(self._bodies) >= self._size:
                    del self._bodies[next(iter(self._bodies))]  # the oldest
                self._bodies[id(event)] = (event, body)
        return f'{{"op":"event","sub":{orjson.dumps(sub).decode()},{body[1:]}'


def _unencodable(event: Event, exc: TypeError) -> str:
    """The stand-in for ``event`` when JSON cannot hold it: ``data`` null and an
    ``error`` (code ``unencodable``) that says why. The stream goes on past it."""
    which = f"event {event.seq}" if event.seq is not None else "an ephemeral event"
    message = (
        f"{which} of {event.actor!r} cannot be encoded as JSON ({exc}); it is sent without its data"
    )
    frame = {**event.to_json(), "data": None, "error": {"code": "unencodable", "message": message}}
    try:
        return encode(frame)
    except TypeError:  # the type itself: a str with a lone surrogate
        frame["type"] = event.type.encode("utf-8", "backslashreplace").decode()
        return encode(frame)


def encode_lagged(sub: str, actor: str, after: int | None) -> str:
    return encode({"op": "lagged", "sub": sub, "actor": actor, "after": after})
