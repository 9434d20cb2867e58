"""`CommitTimings`: histograms of the writer's group commits, read at scrape time.

The writer bumps them once per batch, on the trio thread, in both stores
(`OpQueue._settle`): a bucket index found by bisection and three integer
increments, no lock, nothing allocated per message. A reader (the metrics)
takes a `CommitHistograms` snapshot from the same thread.

What is measured, per group commit:

- **ack**: from the moment the oldest write of the batch was queued to the
  moment every caller of the batch is told its outcome: the longest any
  sender of that commit waited. The writer notes the time when a write
  finds the queue empty (one clock read per batch, not per write).
- **commit**: from the writer taking the batch to telling its callers: the
  transaction, its fsync and the hop to the writer's thread (SQLite: for
  the commits not made on the trio thread, `CommitPlace`).
- **batch**: how many writes the transaction carried.
"""

from __future__ import annotations

from bisect import bisect_left

import attrs

__all__ = [
    "BATCH_BUCKETS",
    "SECONDS_BUCKETS",
    "Buckets",
    "CommitHistograms",
    "CommitTimings",
    "Histogram",
]

SECONDS_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0,
)  # fmt: skip
"""Upper bounds of the latency buckets (an fsync here costs about 170 µs)."""

BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
"""Upper bounds of the batch size buckets (a store's ``max_batch`` is 2048)."""


@attrs.frozen
class Histogram:
    """One histogram as Prometheus reads it. ``counts[i]`` holds the observations
    at most ``bounds[i]`` and above the bound before it; the last holds those
    above every bound (``+Inf``). Not cumulative."""

    bounds: tuple[float, ...]
    counts: tuple[int, ...]
    sum: float

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, observations at most that) for each bucket, ``+Inf`` last."""
        total, out = 0, []
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            total += n
            out.append((bound, total))
        return out


@attrs.frozen
class CommitHistograms:
    """A snapshot of a store's `CommitTimings`."""

    ack_seconds: Histogram
    commit_seconds: Histogram
    batch_size: Histogram


class Buckets:
    """Bucket counts that ``observe`` bumps: a bisection and two additions, no
    allocation; `snapshot` copies them (a reader on the same thread needs no lock)."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def snapshot(self) -> Histogram:
        return Histogram(self.bounds, tuple(self.counts), self.sum)


class CommitTimings:
    """The writer's histograms and the two instants it keeps between batches."""

    __slots__ = ("_ack", "_batch", "_commit", "queued")

    def __init__(self) -> None:
        self._ack = Buckets(SECONDS_BUCKETS)
        self._commit = Buckets(SECONDS_BUCKETS)
        self._batch = Buckets(tuple(float(b) for b in BATCH_BUCKETS))
        self.queued = 0.0
        """When the oldest write of the batch being written was queued."""

    def settled(self, size: int, taken: float, now: float) -> None:
        """A batch of ``size`` writes, taken at ``taken``, was settled at ``now``."""
        self._ack.observe(now - self.queued)
        self._commit.observe(now - taken)
        self._batch.observe(size)

    def snapshot(self) -> CommitHistograms:
        return CommitHistograms(
            self._ack.snapshot(), self._commit.snapshot(), self._batch.snapshot()
        )
