"""`RuntimeStatistics`: what `Runtime.statistics` reports (for metrics), and
`collect`, which reads it off the runtime's parts."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from ..store import CommitHistograms

if TYPE_CHECKING:
    from ..store import Store
    from ._directory import Directory
    from ._hub import Hub
    from ._retention import RetentionStatistics

__all__ = ["RuntimeStatistics", "collect"]


@attrs.frozen
class RuntimeStatistics:
    """Counters since the runtime opened, and gauges now (for metrics)."""

    messages_accepted: int
    commits: int
    activations: int
    passivations: int
    restarts: int
    dead_letters: int
    active: int
    subscribers: int
    lagged: int
    store_batches: int
    store_operations: int
    store_largest_batch: int
    store_seconds: float
    store_healthy: bool = True
    """False from an I/O error at COMMIT until the store has recovered (fail-stop)."""
    store_recoveries: int = 0
    retention_passes: int = 0
    events_pruned: int = 0
    actors_removed: int = 0
    dead_letters_expired: int = 0
    pages_freed: int = 0
    """Free database pages retention gave back to the file system."""
    rests: int = 0
    """Times an idle actor let its task go (`RuntimeConfig.rest_after`)."""
    resting: int = 0
    """Actors in memory with no task now (counted in ``active`` too)."""
    store_histograms: CommitHistograms | None = None
    """Ack latency, commit latency and batch size of the store's group commits."""


def collect(
    store: Store, cells: Directory, hub: Hub, retained: RetentionStatistics
) -> RuntimeStatistics:
    """The runtime's figures now, from its parts."""
    stats = store.statistics()
    counts = cells.counts
    return RuntimeStatistics(
        messages_accepted=counts["accepted"],
        commits=counts["commits"],
        activations=counts["activations"],
        passivations=counts["passivations"],
        restarts=counts["restarts"],
        dead_letters=counts["dead_letters"],
        active=len(cells.cells),
        subscribers=hub.subscriber_count,
        lagged=hub.lagged_total,
        store_batches=stats.batches,
        store_operations=stats.operations,
        store_largest_batch=stats.largest_batch,
        store_seconds=stats.commit_seconds_total,
        store_healthy=store.healthy,
        store_recoveries=stats.recoveries,
        retention_passes=retained.passes,
        events_pruned=retained.events,
        actors_removed=retained.actors,
        dead_letters_expired=retained.dead_letters,
        pages_freed=retained.pages,
        rests=counts["rests"],
        resting=cells.resting_count(),
        store_histograms=store.commit_histograms(),
    )
