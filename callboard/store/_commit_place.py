"""`CommitPlace`: whether the writer makes a COMMIT on the trio thread or in its own.

A COMMIT waits for the fsync, so the writer hands it to its thread
(`WorkerThread`) and the event loop runs on meanwhile. With one client and
one message at a time, though, nothing runs meanwhile: the hand-off only
adds two wake-ups (to the thread, and back to the trio thread through its
wakeup socket) and a trip of the trio thread through the scheduler, and a
wake-up on a machine that was idle costs more than a quick disk's fsync.
Made on the trio thread, the same commit took 16-32% less CPU per
acknowledged send with one gateway client (benchmarks, interleaved runs).

So a COMMIT is made inline when all of these hold:

- the batch is not huge (`INLINE_OPS` operations at most): its COMMIT
  writes its own pages, and so takes its own time, not the recent average;
- no other task is ready to run, and none waits to write (trio's
  ``tasks_runnable``, and its epoll backend's ``tasks_waiting_write``): the
  loop would only wait for something to read meanwhile, while a task that
  waits to write has bytes the kernel may take at any moment (a fan-out to
  subscribers' sockets);
- the disk is quick: the inline commits of late took less than
  `INLINE_SECONDS` (smoothed). On a slow disk an inline fsync would hold up
  the event loop, timers and pings included, and the hand-off costs little
  beside it.

Only inline commits are timed. A commit handed to the thread comes back
late whenever the event loop is busy: the thread waits for the GIL, and
then for the loop to take its wake-up. Those times (1.2 ms at the median
with 64 senders, where inline commits took 0.33 ms) said "slow disk" when
the disk was quick, and kept every later commit off the trio thread. So
while the disk looks slow, one commit in `PROBE_EVERY` that would have been
made inline is made inline anyway, to time the disk again.

A batch of many operations used to go to the thread too (at most 4 were
made inline), in case the next requests came in during the fsync. With
64 senders in the process nothing does: the senders wait for their acks.
Made inline when nothing else could run, the same commits took 8% less
CPU per message with 64 actors and 13% less with one hot actor, and 12%
and 18% more messages were acknowledged a second (medians of interleaved
benchmark runs). Where the next requests do
come over sockets, tasks are ready to run at the commit, and it goes to
the thread as before.

Where it is made changes nothing else: the same statement on the same
connection, with the same errors, handled the same way (fail-stop on an
I/O error); an inline COMMIT cannot be cancelled halfway, as it does not
yield.
"""

from __future__ import annotations

import trio

__all__ = ["INLINE_OPS", "INLINE_SECONDS", "PROBE_EVERY", "CommitPlace"]

INLINE_OPS = 256
"""Operations a batch holds at most for its COMMIT to be made inline."""

INLINE_SECONDS = 0.001
"""Commits are made inline only while inline ones take less than this, smoothed."""

PROBE_EVERY = 32
"""While the disk looks slow, one commit in this many that could be made
inline is, so that the disk is timed again."""


class CommitPlace:
    """Decides, batch by batch, where the COMMIT is made (see the module)."""

    __slots__ = ("_passed", "_seconds")

    def __init__(self) -> None:
        self._seconds = 0.0  # a moving average of the inline commits' durations
        self._passed = 0  # commits sent to the thread only because the disk looked slow

    def inline(self, operations: int) -> bool:
        if operations > INLINE_OPS:
            return False
        now = trio.lowlevel.current_statistics()
        # The attribute is the epoll backend's (Linux); others have no such count.
        if now.tasks_runnable or getattr(now.io_statistics, "tasks_waiting_write", 0):
            return False
        if self._seconds < INLINE_SECONDS:
            return True
        self._passed += 1
        if self._passed < PROBE_EVERY:
            return False
        self._passed = 0
        return True

    def took(self, seconds: float) -> None:
        """An inline COMMIT took ``seconds``."""
        self._seconds += (seconds - self._seconds) / 8
