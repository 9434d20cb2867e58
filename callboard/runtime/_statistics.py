"""`RuntimeStatistics`: what `Runtime.statistics` reports (for metrics)."""

from __future__ import annotations

import attrs

from ..store import CommitHistograms

__all__ = ["RuntimeStatistics"]


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
