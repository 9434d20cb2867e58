"""`Claims`: taking the actors this node is asked to run but does not own yet.

On one node (SQLite) the store owns every actor and this is never used. On a
store shared by several nodes, a message stored here for an actor this node
does not own wakes its owner elsewhere (the store notifies it); if it has
no live owner, this node takes it (`Store.claim`) and activates it. One
claim per address runs at a time, and an address found owned elsewhere is
not asked about again for ``retry_after`` seconds: the store's poll brings
it back the moment its owner's lease has expired.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from ..errors import RuntimeClosed, StoreUnavailable, UnknownOutcome
from ..store import Store

__all__ = ["Claims"]

log = logging.getLogger("callboard.runtime")

_REMEMBERED = 10_000  # addresses owned elsewhere kept in mind at most


class Claims:
    """Claims in flight, and the addresses lately found owned by another node."""

    def __init__(self, store: Store, retry_after: float) -> None:
        self._store = store
        self._retry_after = retry_after
        self._pending: set[str] = set()
        self._elsewhere: dict[str, float] = {}

    def request(
        self, address: str, nursery: trio.Nursery, activate: Callable[[str], None], *,
        found_free: bool = False,
    ) -> None:  # fmt: skip
        """Claim ``address`` in ``nursery`` and ``activate`` it once taken;
        ``found_free``: the store saw it without a live owner (try at once)."""
        if address in self._pending:
            return
        if not found_free and self._elsewhere.get(address, 0.0) > trio.current_time():
            return
        self._pending.add(address)
        nursery.start_soon(self._claim, address, activate, name=f"claim {address}")

    async def _claim(self, address: str, activate: Callable[[str], None]) -> None:
        try:
            taken = await self._store.claim(address)
        except (StoreUnavailable, UnknownOutcome, RuntimeClosed) as exc:
            # Not taken as far as this node knows; the store's poll asks again.
            log.debug("could not claim %s: %s", address, exc)
            taken = False
        finally:
            self._pending.discard(address)
        if taken:
            self._elsewhere.pop(address, None)
            activate(address)
            return
        if len(self._elsewhere) >= _REMEMBERED:
            self._elsewhere.clear()
        self._elsewhere[address] = trio.current_time() + self._retry_after
