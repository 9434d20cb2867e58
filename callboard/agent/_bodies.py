"""The bodies of the messages a session and a task take, as types the converter structures.

Each is strict JSON (`callboard.codec.strict_json`): a field takes only its
own JSON type, ``null`` in an optional field means absent, unknown fields are
ignored, and a message with no body is one with every field absent. A body
that does not fit changes nothing: the handler answers it with
``message.rejected`` whose reason names the field (`read_body`), e.g. "the
body of 'prompt' to session/s1: $.text must be a string, got 5 (a number)".
What a well-formed body asks for (a queued prompt of that id, a turn that is
running) is still the handler's to check.
"""

from __future__ import annotations

from typing import TypeVar

import attrs

from ..actors import Context
from ..codec import JSONShapeError, strict_json, structure_json
from ..mailbox import Message
from ..views import PromptMode
from ._approval_deadlines import Scope
from ._turn_runner import reject

__all__ = [
    "ApproveBody",
    "CancelBody",
    "QueueMoveBody",
    "QueueRemoveBody",
    "TextBody",
    "read_body",
]

B = TypeVar("B")


@strict_json(shorthand="text")
@attrs.frozen
class TextBody:
    """``prompt`` to a session, ``message`` to a task: ``{"text": "..."}``, or the text alone;
    ``mode`` says how it meets a running turn (``_steer``)."""

    text: str
    mode: PromptMode = "queue"


@strict_json()
@attrs.frozen
class CancelBody:
    """``cancel`` to a session: the running turn, or only if it is ``turn_id``."""

    turn_id: str | None = None


@strict_json()
@attrs.frozen
class ApproveBody:
    """``approve``: the answer to the call ``call_id`` (which may be left out when
    one call waits); ``approved`` false denies it, and ``reason`` reaches the
    model in the tool result it sees. ``scope`` ``session`` also allows the
    tool for the rest of the session (``_approval_deadlines``)."""

    call_id: str | None = None
    approved: bool = True
    reason: str | None = None
    scope: Scope = "call"


@strict_json()
@attrs.frozen
class QueueRemoveBody:
    """``queue.remove``: the queued prompt ``id`` leaves the queue."""

    id: str


@strict_json()
@attrs.frozen
class QueueMoveBody:
    """``queue.move``: the queued prompt ``id`` goes to position ``to`` (clamped)."""

    id: str
    to: int


def read_body(ctx: Context, message: Message, body_type: type[B]) -> B | None:
    """``message``'s body as ``body_type``; or None, once it is rejected naming the field."""
    what = f"the body of {message.type!r} to {ctx.address}"
    try:
        return structure_json(message.body, body_type, what=what)
    except JSONShapeError as exc:
        reject(ctx, message, str(exc))
        return None
