"""The gateway's wire format (docs/protocol.md): parse incoming frames, encode outgoing ones.

Pure: no I/O and no trio, so every rule about what a client may send is
tested without a socket. `parse_frame` turns one text frame into a typed
request (`_requests`: a union tagged by ``op``, structured by the codec's
converter) or a `FrameError` whose message names the offending field; it
never raises. Here are the checks of the frame as a whole, before its
fields: a text frame within ``max_frame``, a JSON object that is just what
its text says (no key twice in an object, no integer past 64 bits, nested
within `callboard.mailbox.MAX_DEPTH`), a known ``op`` and a usable ``id``, so
that every error can answer to its request. Outgoing frames are written by
hand with orjson: the event frame is the hot path (`EventEncoder`).
"""

from __future__ import annotations

from typing import Any

import attrs
import orjson

from ..codec import JSONRefused, check_loaded, shown
from ..mailbox import MAX_DEPTH, Event
from ._requests import (
    OPS,
    PROTOCOL_VERSION,
    FieldRefused,
    GetState,
    Hello,
    Inspect,
    ListActors,
    Output,
    Pause,
    Ping,
    Request,
    Resume,
    Send,
    SetState,
    Spawn,
    Step,
    Stop,
    Subscribe,
    Unsubscribe,
    is_pattern,
    plain_send,
    structure_request,
)

__all__ = [
    "PROTOCOL_VERSION",
    "EventEncoder",
    "FrameError",
    "GetState",
    "Hello",
    "Inspect",
    "ListActors",
    "Output",
    "Pause",
    "Ping",
    "Request",
    "Resume",
    "Send",
    "SetState",
    "Spawn",
    "Step",
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

MAX_ID = 256


@attrs.frozen
class FrameError:
    """A frame the server cannot act on; answered with ``error`` (``id`` may be None)."""

    code: str
    message: str
    id: str | None = None
    op: str | None = None


_KNOWN = ", ".join(sorted(OPS))


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
            "bad_request", f"the frame must be a JSON object with an 'op', got {shown(obj)}"
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
        message = f"field 'op' must be a string naming the operation, got {shown(op)}"
        if op is None:
            message = "field 'op' is missing: it must be a string naming the operation"
        return FrameError("bad_request", message, _id_or_none(obj))
    rid = obj.get("id")
    if not isinstance(rid, str) or not 0 < len(rid) <= MAX_ID:
        message = (
            "field 'id' is missing: every request carries a string id"
            if rid is None
            else f"field 'id' must be a string of 1 to {MAX_ID} characters, got {shown(rid)}"
        )
        return FrameError("bad_request", message, None, op)
    if op not in OPS:
        message = f"field 'op' has unknown op {shown(op)}; known: {_KNOWN}"
        return FrameError("bad_request", message, rid, op)
    if op == "send" and (send := plain_send(obj)) is not None:
        return send
    try:
        return structure_request(obj)
    except FieldRefused as exc:
        return FrameError("bad_request", str(exc), rid, op)


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
