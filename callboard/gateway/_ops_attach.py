"""Live attach on the wire (docs/protocol.md, "Live attach"): ``state``,
``set_state``, ``pause``, ``resume`` and ``step``, answered by the runtime's
`Runtime.get_state` and the others.

Called from `_operations.dispatch` once a request is known to be one of
these. ``state`` needs read access to the actor, the others write access,
as ``inspect`` and ``stop`` do.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import BadRequest, Forbidden
from ..runtime import Runtime
from . import _frames as f
from ._grants import Grant

__all__ = ["REQUESTS", "dispatch"]

REQUESTS = (f.GetState, f.SetState, f.Pause, f.Resume, f.Step)

_Request = f.GetState | f.SetState | f.Pause | f.Resume | f.Step


async def dispatch(rt: Runtime, grant: Grant, request: _Request) -> str:
    """The answer to one live-attach op (raises the `CallboardError` to answer instead)."""
    match request:
        case f.GetState(rid, actor):
            _check(grant.may_read, grant, "read the state of", actor)
            return f.encode_ok(rid, actor=actor, state=await rt.get_state(actor))
        case f.SetState(rid, actor, state):
            _check(grant.may_write, grant, "replace the state of", actor)
            if state is None:
                raise BadRequest("field 'state' is missing: it must be the new state, an object")
            return f.encode_ok(rid, seq=await rt.replace_state(actor, state))
        case f.Pause(rid, actor):
            _check(grant.may_write, grant, "pause", actor)
            return f.encode_ok(rid, actor=actor, status=await rt.pause(actor))
        case f.Resume(rid, actor):
            _check(grant.may_write, grant, "resume", actor)
            return f.encode_ok(rid, actor=actor, status=await rt.resume(actor))
        case f.Step(rid, actor):
            _check(grant.may_write, grant, "step", actor)
            return f.encode_ok(rid, actor=actor, handled=await rt.step(actor))
    raise AssertionError(f"no handler for {request!r}")  # pragma: no cover


def _check(allowed: Callable[[str], bool], grant: Grant, what: str, actor: str) -> None:
    if not allowed(actor):
        scope = ", ".join(grant.actors)
        raise Forbidden(
            f"the token {grant.name!r} ({grant.access} access to {scope}) may not {what} "
            f"{actor!r}; ask the operator for a token that reaches it"
        )
