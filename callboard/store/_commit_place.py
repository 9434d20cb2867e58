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

- the batch is small (`INLINE_OPS` operations at most): a big batch has
  writers waiting, and their next requests are read and checked while it
  syncs;
- no other task is ready to run, and none waits to write (trio's
  ``tasks_runnable``, and its epoll backend's ``tasks_waiting_write``): the
  loop would only wait for something to read meanwhile, while a task that
  waits to write has bytes the kernel may take at any moment (a fan-out to
  subscribers' sockets);
- the disk is quick: the commits of late took less than `INLINE_SECONDS`
  (smoothed). On a slow disk an inline fsync would hold up the event loop,
  timers and pings included, and the hand-off costs little beside it.

Where it is made changes nothing else: the same statement on the same
connection, with the same errors, handled the same way (fail-stop on an
I/O error); an inline COMMIT cannot be cancelled halfway, as it does not
yield.
"""

from __future__ import annotations

import trio

__all__ = ["INLINE_OPS", "INLINE_SECONDS", "CommitPlace"]

INLINE_OPS = 4
"""Operations a batch holds at most for its COMMIT to be made inline."""

INLINE_SECONDS = 0.001
"""Commits are made inline only while they take less than this, smoothed."""


class CommitPlace:
    """Decides, batch by batch, where the COMMIT is made (see the module)."""

    __slots__ = ("_seconds",)

    def __init__(self) -> None:
        self._seconds = 0.0  # a moving average of the commits' durations

    def inline(self, operations: int) -> bool:
        if operations > INLINE_OPS or self._seconds >= INLINE_SECONDS:
            return False
        now = trio.lowlevel.current_statistics()
        # The attribute is the epoll backend's (Linux); others have no such count.
        writing = getattr(now.io_statistics, "tasks_waiting_write", 0)
        return now.tasks_runnable == 0 and not writing

    def took(self, seconds: float) -> None:
        """A COMMIT took ``seconds``, wherever it was made."""
        self._seconds += (seconds - self._seconds) / 8
