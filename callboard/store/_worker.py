"""`WorkerThread`: the SQLite writer's own thread, for the calls that block.

The writer hands a call to a thread at most group commits (the COMMIT,
which waits for the fsync; `CommitPlace` says which it makes itself).
`trio.to_thread.run_sync` costs about 100 µs of CPU per call on our
machines: it names the OS thread for the call and names it back (two
writes under /proc), and goes through trio's thread cache. One
thread kept for the writer, handed each call through a queue and answering
through the trio token, costs about a third of that. The calls are the
writer's, one at a time, so one thread is all it needs.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import outcome
import trio

__all__ = ["WorkerThread"]

_T = TypeVar("_T")

_Job = tuple[Callable[..., Any], tuple[Any, ...], trio.lowlevel.Task, trio.lowlevel.TrioToken]


def _no_abort(_: object) -> trio.lowlevel.Abort:
    # As `trio.to_thread.run_sync`: a call handed over runs to its end, and
    # its caller hears the outcome (a COMMIT's outcome must not be dropped).
    return trio.lowlevel.Abort.FAILED


class WorkerThread:
    """One daemon thread running the calls handed to it, in order (see the module)."""

    __slots__ = ("_jobs", "_name", "_thread")

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    async def run(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` in the thread: a cancel point before it is handed over,
        not after."""
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
            self._thread.start()
        task = trio.lowlevel.current_task()
        self._jobs.put((fn, args, task, trio.lowlevel.current_trio_token()))
        result: _T = await trio.lowlevel.wait_task_rescheduled(_no_abort)
        return result

    def stop(self) -> None:
        """The thread ends once the calls handed to it have run."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread = None

    def _work(self) -> None:
        jobs = self._jobs
        while True:
            job = jobs.get()
            if job is None:
                return
            fn, args, task, token = job
            del job
            result = outcome.capture(fn, *args)
            del fn, args  # nothing of the call outlives it here
            try:
                token.run_sync_soon(trio.lowlevel.reschedule, task, result)
            except trio.RunFinishedError:
                return  # no one waits any more
