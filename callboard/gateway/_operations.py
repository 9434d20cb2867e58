"""What each request op of an authenticated connection does, against the runtime.

Every op is checked against the connection's grant first (``forbidden``),
and one that would bring a new actor into being against the token's
activation quota (``rate_limited``); then the runtime answers it.
"""

from __future__ import annotations

import attrs
import trio

from ..runtime import Runtime
from . import _frames as f
from . import _ops_attach as attach
from . import _ops_operator as operator
from ._access import Access
from ._config import GatewayConfig
from ._grants import Grant
from ._ops_nodes import answer_nodes, without_absent_owner
from ._ops_reading import answer_output
from ._requests import Nodes
from ._subscriptions import Counters, Subscriptions

__all__ = ["Served", "dispatch"]


@attrs.frozen
class Served:
    """What answering a request needs of its connection."""

    runtime: Runtime
    grant: Grant
    access: Access
    subscriptions: Subscriptions
    config: GatewayConfig
    counters: Counters
    nursery: trio.Nursery


async def dispatch(served: Served, request: f.Request) -> str | None:
    """The answer to one request of an authenticated connection."""
    rt, grant = served.runtime, served.grant
    if isinstance(request, operator.Request):
        return await operator.dispatch(rt, grant, request)
    if isinstance(request, attach.REQUESTS):
        return await attach.dispatch(rt, grant, request)
    match request:
        case f.Ping(rid):
            await trio.lowlevel.checkpoint()
            return f.encode_ok(rid)
        case f.Send(rid, to, type_, body, key):
            if not grant.may_write(to):
                return _forbidden(grant, rid, "send to", to)
            if await rt.would_create(to) and not served.access.take_activation(grant):
                return _over_quota(served, rid, to)
            if request.wait:
                ack, reply = await operator.send_and_wait(rt, request)
                served.counters.sends_accepted += not ack.duplicate
                return reply
            ack = await rt.send(to, type_, body, key=key)
            if not ack.duplicate:
                served.counters.sends_accepted += 1
            return f.encode_ok(rid, seq=ack.seq, duplicate=ack.duplicate)
        case f.Spawn(rid, kind, name, spec):
            if not grant.may_spawn(kind, name):
                return _forbidden(grant, rid, "spawn", f"{kind}/{name or '*'}")
            if not served.access.take_activation(grant):
                return _over_quota(served, rid, f"{kind}/{name or '*'}")
            address = await rt.spawn(kind, spec, name)
            return f.encode_ok(rid, actor=str(address), existed=address.existed)
        case f.Subscribe(rid, actor):
            if not grant.may_read(actor):
                return _forbidden(grant, rid, "subscribe to", actor)
            return await served.subscriptions.subscribe(served.nursery, request)
        case f.Unsubscribe(rid, sub_id):
            await served.subscriptions.unsubscribe(sub_id)
            return f.encode_ok(rid)
        case f.ListActors(rid, kind, status, after, limit):
            if kind is not None:
                rt.check_kind(kind)
            limit = min(limit or served.config.list_limit, served.config.list_limit)
            rows, next_after = await rt.list_page(kind, status, after=after, limit=limit)
            # A scoped token sees only its own actors (a page may come out short).
            actors = [without_absent_owner(row) for row in rows if grant.may_read(row.actor)]
            # ``next`` only when the list goes on: a complete list is the
            # reply docs/protocol.md shows, field for field.
            if next_after is None:
                return f.encode_ok(rid, actors=actors)
            return f.encode_ok(rid, actors=actors, next=next_after)
        case f.Inspect(rid, actor):
            if not grant.may_read(actor):
                return _forbidden(grant, rid, "inspect", actor)
            view = await rt.inspect(actor)
            return f.encode_ok(rid, **without_absent_owner(view))
        case f.Stop(rid, actor):
            if not grant.may_write(actor):
                return _forbidden(grant, rid, "stop", actor)
            status = await rt.stop(actor)
            return f.encode_ok(rid, actor=actor, status=status)
        case f.Output(rid, job):
            if not grant.may_read(job):
                return _forbidden(grant, rid, "read the output of", job)
            return await answer_output(rt, request)
        case Nodes(rid):
            return await answer_nodes(rt, grant, rid)
    raise AssertionError(f"no handler for {request!r}")  # pragma: no cover


def _forbidden(grant: Grant, rid: str, what: str, actor: str) -> str:
    scope = ", ".join(grant.actors)
    message = (
        f"the token {grant.name!r} ({grant.access} access to {scope}) may not {what} "
        f"{actor!r}; ask the operator for a token that reaches it"
    )
    return f.encode_error(rid, "forbidden", message)


def _over_quota(served: Served, rid: str, actor: str) -> str:
    quota = served.config.activation_quota
    message = (
        f"the token {served.grant.name!r} has created {quota} new actors in the last minute, "
        f"its activation_quota (--activation-quota); {actor!r} was not created: retry later"
    )
    return f.encode_error(rid, "rate_limited", message)
