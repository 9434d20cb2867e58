"""The operator's ops (docs/protocol.md, "Operator ops"): ``approvals``,
``dead_letters``, ``requeue``, ``delete``, and ``send`` with ``wait``.

Called from `_operations.dispatch` once a request is known to be one of
these. Each is checked against the connection's grant as the core ops are:
reads need read access to the actor, writes write access; a scoped token
asking for every actor's approvals or dead letters sees only its own.
"""

from __future__ import annotations

from typing import Any

from ..errors import BadRequest, Forbidden
from ..mailbox import Ack
from ..runtime import Runtime
from . import _frames as f
from ._grants import Grant
from ._requests import Approvals, DeadLetters, Delete, Requeue, Send

__all__ = ["Request", "dispatch", "send_and_wait"]

Request = Approvals | DeadLetters | Requeue | Delete


async def dispatch(rt: Runtime, grant: Grant, request: Request) -> str:
    """The answer to one operator op (raises the `CallboardError` to answer instead)."""
    match request:
        case Approvals(rid, actor):
            _check(grant.may_read, grant, "read the approvals of", actor)
            pending = await rt.approvals(actor)
            rows = [p.to_json() for p in pending if grant.may_read(p.actor)]
            return f.encode_ok(rid, approvals=rows)
        case DeadLetters(rid, actor):
            _check(grant.may_read, grant, "read the dead letters of", actor)
            letters = await rt.dead_letters(actor)
            rows = [d.to_json() for d in letters if grant.may_read(d.actor)]
            return f.encode_ok(rid, dead_letters=rows)
        case Requeue(rid, dead_letter):
            # Its actor decides the grant, so it is looked up first.
            letter = next((d for d in await rt.dead_letters() if d.id == dead_letter), None)
            if letter is None:
                raise BadRequest(
                    f"there is no dead letter with id {dead_letter}; dead_letters lists them"
                )
            _check(grant.may_write, grant, "requeue the dead letters of", letter.actor)
            ack = await rt.requeue(dead_letter)
            return f.encode_ok(rid, actor=letter.actor, seq=ack.seq)
        case Delete(rid, actor):
            _check(grant.may_write, grant, "delete", actor)
            await rt.delete(actor)
            return f.encode_ok(rid, actor=actor)
    raise AssertionError(f"no handler for {request!r}")  # pragma: no cover


async def send_and_wait(rt: Runtime, request: Send) -> tuple[Ack, str]:
    """``send`` with ``wait``: the ack, and the ``ok`` given once the actor has
    handled the message, with its ``outcome`` (and ``reason`` unless handled)."""
    to = request.to
    head = await rt.head(to)
    ack = await rt.send(to, request.type, request.body, key=request.key)
    # A duplicate was handled long ago, perhaps: its rejection is anywhere held.
    outcome = await rt.wait_outcome(to, ack.seq, 0 if ack.duplicate else head)
    fields: dict[str, Any] = {"seq": ack.seq, "duplicate": ack.duplicate}
    fields["outcome"] = outcome.status
    if outcome.reason is not None:
        fields["reason"] = outcome.reason
    return ack, f.encode_ok(request.id, **fields)


def _check(allowed: Any, grant: Grant, what: str, actor: str | None) -> None:
    """Raise `Forbidden` unless ``allowed(actor)``; no actor (every actor) is always
    allowed, since a scoped token is answered only its own."""
    if actor is not None and not allowed(actor):
        scope = ", ".join(grant.actors)
        raise Forbidden(
            f"the token {grant.name!r} ({grant.access} access to {scope}) may not {what} "
            f"{actor!r}; ask the operator for a token that reaches it"
        )
