"""The ``nodes`` op (docs/protocol.md): the nodes sharing the server's store,
and the ``owner`` of an actor in ``list`` and ``inspect`` where it has one.

Apart from the other ops because only a store shared by several nodes
(PostgreSQL) has anything to say here: on one node the list is empty and
no row carries an owner, so those replies stay as they were.
"""

from __future__ import annotations

from typing import Any

import attrs

from ..runtime import Runtime
from ..views import ActorInfo, ActorView
from . import _frames as f
from ._grants import Grant

__all__ = ["answer_nodes", "without_absent_owner"]


async def answer_nodes(rt: Runtime, grant: Grant, rid: str) -> str:
    """``nodes``: for a token that reads every actor (the counts cover them all)."""
    if not grant.may_read("*"):
        scope = ", ".join(grant.actors)
        return f.encode_error(
            rid, "forbidden",
            f"the token {grant.name!r} ({grant.access} access to {scope}) may not list the "
            "nodes: that needs read access to every actor ('*')",
        )  # fmt: skip
    nodes = [
        {"node": n.node, "heartbeat": n.heartbeat, "actors": n.actors} for n in await rt.nodes()
    ]
    return f.encode_ok(rid, nodes=nodes)


def without_absent_owner(row: ActorInfo | ActorView) -> dict[str, Any]:
    """A ``list`` row or an ``inspect`` reply, with ``owner`` only where there is one."""
    fields = attrs.asdict(row, recurse=False)
    if fields.get("owner") is None:
        del fields["owner"]
    return fields
