"""`tune_gc`: the garbage collector's settings for a process that serves a runtime.

CPython collects its youngest generation each time 700 more objects are
alive than at its last collection. A runtime under load keeps a few thousand
alive for one group commit (each message in flight has its frames, records
and waiters), so at the default the young collection ran about once per
commit. It found next to nothing to free (reference counting frees nearly
everything first: 25 objects over 191 collections, measured), and it moved
what was alive at that moment to the older generations, which then needed
full collections: about 15 ms of CPU each on a 2-core VM, about once a
second, longer than a whole group commit. In
``durable-64-senders-64-actors`` the collector took 64-82 ms of CPU per
24,000 messages at the default, and 16-18 ms with these settings; with
32 gateway clients of 8 sends in flight, 7.7 µs per send against 0.3.

`gc.freeze` leaves what the process holds when it is called (modules,
classes, the runtime's own structures) out of every later collection.
Both settings are the whole process's, so the program that owns the process
decides: ``callboard serve`` calls this once its runtime is open, and the
benchmarks at the start of every run, scenario and baseline alike.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "tune_gc"]

YOUNG_THRESHOLD = 5_000
"""Objects allocated beyond those freed before the youngest generation is
collected: above what a busy runtime holds for one group commit, so that
those objects are freed by their reference counts before any collection
sees them (5,000 left 2-3 young collections in the runs above, where 700
made 191). Cyclic garbage waits longer for it: well under a MB. A higher
one saved no more and cost RSS: 2.56 KB per active actor at 20,000 in the
memory scenario, 2.48 at 5,000, 2.35 at the default."""


def tune_gc() -> None:
    """Collect once, freeze what survives, and raise the young generation's
    threshold to `YOUNG_THRESHOLD` (the older generations keep theirs).

    For the whole process: call it once from the program that owns it, once
    its runtime is open (``callboard serve`` does). An application whose
    other parts tune the collector themselves may skip it.
    """
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
