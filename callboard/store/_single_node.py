"""`SingleNode`: what the `Store` protocol asks about other nodes, for a store that has none.

The SQLite store is one node (its data directory is locked to one process),
so it owns every actor, never loses one, and nobody else wakes its actors:
the ownership part of the protocol is trivially true here, and the runtime
behaves as it did before there were several nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import trio

from ._records import NodeRecord

__all__ = ["SingleNode"]


class SingleNode:
    """Ownership on a store that is the only node."""

    on_wake: Callable[[str], None] | None = None
    on_events: Callable[[str | None], None] | None = None
    on_lost: Callable[[Sequence[str]], None] | None = None

    def owns(self, address: str) -> bool:
        return True

    async def claim(self, address: str) -> bool:
        await trio.lowlevel.checkpoint()
        return True

    async def nodes(self) -> list[NodeRecord]:
        """No nodes table on one node: an empty list."""
        await trio.lowlevel.checkpoint()
        return []
