"""`CellServices`: what a cell asks of the runtime that drives it.

The runtime's directory of cells implements it; a cell knows nothing else
of the runtime, so a message's way goes runtime → cell and back only
through these calls, each made after the commit it reports is durable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import trio

from ..mailbox import Event
from ..store import CommitResult, Enqueue, Store

if TYPE_CHECKING:
    from ._cell import ActorCell
    from ._lane import Lane

__all__ = ["CellServices"]


class CellServices(Protocol):
    """What the runtime provides to the cells it supervises."""

    store: Store
    inbox_limit: int
    batch_max: int
    passivate_after: float
    passivation_slots: trio.Semaphore
    lane: Lane
    """Steps the cells whose handler never suspends, without their tasks."""

    def settings_for(self, kind: str) -> Mapping[str, Any]: ...
    def wall_time(self) -> float: ...
    def create_kind(self, kind: str) -> str | None: ...
    def publish(self, event: Event) -> None: ...
    def listening(self, address: str) -> bool: ...
    @property
    def tapped(self) -> frozenset[str]:
        """Event types published whoever listens (see `Hub.tap`)."""
        ...

    def route(self, sends: tuple[Enqueue, ...], result: CommitResult) -> None: ...
    def timers_changed(self) -> None: ...
    def forget(self, cell: ActorCell) -> None: ...
    def gone(self, cell: ActorCell) -> None: ...
    def cursor_advanced(self, address: str, cursor: int) -> None: ...
    def counted(self, what: str, n: int = 1) -> None: ...
    def predecessor(self, cell: ActorCell) -> ActorCell | None: ...
    def resume(self, cell: ActorCell) -> bool:
        """Start a task for a resting cell; False if the runtime is closing."""
        ...
