"""`Company`: whether the writer waits a moment before a batch of actor steps only.

With one client sending one message at a time, every send costs two
group commits: the message's (acknowledged, then handled by its actor),
and the actor's step. The client's next send arrives while the step's
COMMIT is in its fsync, and waits for it before its own commit starts.
Waiting up to ``commit_delay`` (`RuntimeConfig`) before writing a batch
that holds actor steps only lets that send join the step: one fsync a
send instead of two, as PostgreSQL's ``commit_delay`` trades a little
latency for fewer flushes. In interleaved benchmark runs (medians of 3
rounds, with a 0.5 ms delay) one gateway client took 9% less CPU per
send (548 against 604 µs) and 32 clients 17% less (181 against 218 µs);
the sends acknowledged a second were 1.04x and 1.15x. The in-process
scenarios moved within noise.

No send's acknowledgement waits on such a batch: the step's own sends and
events do, and so do the answers that wait for a message to be handled (a
``send`` with ``wait``, `Runtime.wait_handled`), which come up to the delay
later. Only actor steps wait, then; a batch with any other write (a
message to acknowledge, a spawn, a timer) is written at once (after
up to two scheduler passes while tasks are ready to run: `OpQueue._gather`),
and the wait ends as soon as any write arrives, which then joins the batch
with everything queued behind it.

A wait that no write joined is a wasted ``commit_delay``: actors that
only send to one another (a chain, each step's sends delivered only once
it commits) never get company. So after a wait that nothing joined the
next one is skipped, after two in a row the next two, and so on up to
`MAX_SKIP`: a chain pays one delay in some 64 steps. A wait that
something joined waits again next time.

Both stores' writers wait (`OpQueue._gather`): on PostgreSQL a COMMIT
is a round trip to the server and its flush. The wait is shielded: a
write taken from the queue is written, whatever is cancelled meanwhile,
and it is bounded by ``commit_delay``.
"""

from __future__ import annotations

__all__ = ["COMMIT_DELAY", "MAX_COMMIT_DELAY", "MAX_SKIP", "Company"]

COMMIT_DELAY = 0.001
"""Seconds a batch of actor steps only waits for another write, by default.

The wait must outlast a client's round trip: the ``ok`` out, the next send
in, parsed and queued. At 0.5 ms, on a slower machine and once the lane
stepped a message a scheduler pass sooner (so the wait began before the
``ok`` was written), 239 of 2,483 waits over 3,000 one-client sends went
unjoined and 3,756 batches were written; at 1 ms, 4 of 2,997 and 3,007."""

MAX_COMMIT_DELAY = 1.0
"""The longest commit delay taken, in seconds (`RuntimeConfig.commit_delay` too)."""

MAX_SKIP = 64
"""Batches of actor steps only written at once, at most, after waits that nothing joined."""


class Company:
    """Says, batch by batch, whether a batch of actor steps only waits (see the module)."""

    __slots__ = ("_skip", "_skipped", "delay")

    def __init__(self, delay: float) -> None:
        if not 0 <= delay <= MAX_COMMIT_DELAY:
            raise ValueError(
                f"the commit delay must be seconds from 0 to {MAX_COMMIT_DELAY:g}, got {delay!r}"
            )
        self.delay = delay
        self._skip = 0  # batches to write at once before the next wait
        self._skipped = 0

    def due(self) -> bool:
        """Whether this batch of actor steps only waits for company."""
        if not self.delay:
            return False
        if self._skipped < self._skip:
            self._skipped += 1
            return False
        self._skipped = 0
        return True

    def waited(self, joined: bool) -> None:
        """A wait ended: ``joined`` when a write came to join the batch."""
        self._skip = 0 if joined else min(MAX_SKIP, 2 * self._skip or 1)
