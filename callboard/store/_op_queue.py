"""The write queue both stores' writers share: operations, their waiters, batches.

A write is an operation (`_Op`) queued to the one writer task. Its caller
waits for it (`OpQueue._submit`), or is called back (`_submit_soon`). The
writer takes every operation waiting as one batch (`_take_batch`), writes it
its own way (SQLite on the trio thread with the COMMIT in a thread,
PostgreSQL on its connection's thread), then tells every caller at once
(`_settle`). Kept apart from either writer because none of this depends on
the database.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from functools import cached_property
from typing import Any, TypeVar, cast

import trio

from ..errors import RuntimeClosed
from ._company import Company
from ._rhythm import GroupCommits
from ._timings import CommitHistograms, CommitTimings

__all__ = ["OpQueue", "_Op"]

log = logging.getLogger("callboard.store")

_T = TypeVar("_T")


class _Op:
    __slots__ = ("done", "error", "fn", "result", "slow", "step", "task", "then")

    def __init__(
        self, fn: Callable[[Any, float], Any], slow: bool = False, step: bool = False
    ) -> None:
        self.fn = fn
        self.slow = slow  # takes milliseconds (a retention step): its batch runs in a thread
        self.step = step  # an actor's step: no acknowledgement waits for it (see `Company`)
        self.task: trio.lowlevel.Task | None = None
        self.then: Callable[[Any], None] | None = None  # told the outcome instead of a task
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None

    def finish(self) -> None:
        self.done = True
        if self.task is not None:
            trio.lowlevel.reschedule(self.task)
        elif self.then is not None:
            try:
                self.then(self.error if self.error is not None else self.result)
            except Exception:
                # The write's outcome stands; a caller's failure to hear it must
                # not stop the acks of the rest of the batch.
                log.exception("a write's outcome could not be delivered")

    async def wait(self) -> None:
        if self.done:
            await trio.lowlevel.cancel_shielded_checkpoint()
        else:
            self.task = trio.lowlevel.current_task()
            await trio.lowlevel.wait_task_rescheduled(_refuse_abort)


def _refuse_abort(_: object) -> trio.lowlevel.Abort:
    # A queued write will happen; its waiter must learn the outcome.
    return trio.lowlevel.Abort.FAILED


class OpQueue:
    """The queue of a store's writer; the store's ``__init__`` sets these."""

    _max_batch: int
    _send: trio.MemorySendChannel[_Op]
    _receive: trio.MemoryReceiveChannel[_Op]
    _group_commits: GroupCommits
    _company: Company
    _batches: int
    _operations: int
    _largest: int
    _commit_seconds: float
    _waiting_since: float | None = None
    """When the oldest write not yet taken by the writer was queued (None: none
    waits). Also what says that writes wait (`StoreWrites._queued`)."""

    @cached_property
    def _timings(self) -> CommitTimings:
        # Made on first use, so that neither store's __init__ has to know of it.
        return CommitTimings()

    def commit_histograms(self) -> CommitHistograms:
        """Ack latency, commit latency and batch size of every group commit so far."""
        return self._timings.snapshot()

    def _submit_soon(
        self, fn: Callable[[Any, float], Any], then: Callable[[Any], None], step: bool = False
    ) -> bool:
        """Queue ``fn`` without waiting; ``then`` hears its result (or its error)
        on the trio thread after the COMMIT. False, queueing nothing, when the
        queue is full or closed."""
        op = _Op(fn, step=step)
        op.then = then
        try:
            self._send.send_nowait(op)
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        if self._waiting_since is None:  # the oldest waiting: see _take_batch
            self._waiting_since = time.perf_counter()
        return True

    async def _submit(
        self, fn: Callable[[Any, float], _T], slow: bool = False, step: bool = False
    ) -> _T:
        op = _Op(fn, slow, step)
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            try:
                # The common case queues without yielding; the wait below is the
                # schedule point, so each write costs one trip through the scheduler.
                self._send.send_nowait(op)
            except trio.WouldBlock:
                await self._send.send(op)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise RuntimeClosed("the store is closed; nothing was written") from None
        # The oldest write waiting notes the time: one clock read per batch, and
        # a test of None for every other write (read by _take_batch).
        if self._waiting_since is None:
            self._waiting_since = time.perf_counter()
        # Once queued, the write will happen: waiting for it cannot be
        # cancelled, or a caller could be cancelled after its write became
        # durable. (A shielded scope would do the same, at several times the cost.)
        await op.wait()
        if op.error is not None:
            raise op.error
        return cast(_T, op.result)

    def _take_batch(self, first: _Op) -> list[_Op]:
        """``first`` and everything queued behind it, up to ``_max_batch``."""
        batch = [first]
        queued, self._waiting_since = self._waiting_since, None
        self._take_queued(batch)
        self._timings.queued = time.perf_counter() if queued is None else queued
        self._group_commits.started()
        return batch

    def _take_queued(self, batch: list[_Op]) -> None:
        """Add to ``batch`` what is queued, up to ``_max_batch``."""
        while len(batch) < self._max_batch:
            try:
                batch.append(self._receive.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel):
                break
        else:
            # Full, and writes left behind: they waited at least since now.
            if self._receive.statistics().current_buffer_used:
                self._waiting_since = time.perf_counter()

    async def _gather(self, batch: list[_Op]) -> None:
        """Before a batch of actor steps only is written, wait up to the commit
        delay for a write to join it (`Company`).

        Any other batch waits two scheduler passes at most, and only while
        other tasks are ready to run: over sockets, a request's bytes wake
        one task (trio-websocket's reader) that hands the message to another
        (the connection's), which queues the write a pass later. Taken
        before that task has run, those writes wait for the next COMMIT. With
        32 gateway clients the passes took 17% less CPU per acknowledged send
        (124 against 150 µs), 12% less with 8 sends in flight each; one
        client and the in-process scenarios moved within noise (medians of 4
        interleaved benchmark runs). With nothing ready to run it costs one
        look at trio's statistics (about 3 µs). The passes are shielded, as
        the wait for company is: what the batch took is written.
        """
        if len(batch) >= self._max_batch:
            return
        if not all(op.step for op in batch):
            if trio.lowlevel.current_statistics().tasks_runnable:
                # Twice: trio runs the tasks of a pass in either order, so
                # after one yield those that were ready may still come later.
                await trio.lowlevel.cancel_shielded_checkpoint()
                await trio.lowlevel.cancel_shielded_checkpoint()
                self._waiting_since = None
                self._take_queued(batch)
            return
        company = self._company
        if not company.delay or not company.due():
            return
        joined: _Op | None = None
        # Shielded: what is taken from the queue here is written, whatever is
        # cancelled meanwhile; the wait is bounded by the delay.
        with trio.move_on_after(company.delay, shield=True):
            with contextlib.suppress(trio.EndOfChannel):  # the store is closing
                joined = await self._receive.receive()
        company.waited(joined is not None)
        if joined is not None:
            batch.append(joined)
            self._waiting_since = None  # set by the write that joined; the rest come too
            self._take_queued(batch)

    def _settle(self, batch: list[_Op], started: float) -> None:
        """Tell every caller of ``batch`` its outcome (written or refused), and count it."""
        for op in batch:
            op.finish()
        self._group_commits.finished()
        self._batches += 1
        self._operations += len(batch)
        self._largest = max(self._largest, len(batch))
        now = time.perf_counter()
        self._commit_seconds += now - started
        self._timings.settled(len(batch), started, now)

    def _close_queue(self) -> None:
        """The writer ends: what is still queued is refused, having run nowhere."""
        self._receive.close()
        while True:
            try:
                op = self._receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
            op.error = RuntimeClosed("the store closed before this write ran; nothing was written")
            op.finish()
        self._waiting_since = None
        self._group_commits.finished()
