"""The writer's own OS thread: where its blocking SQLite calls run.

``trio.to_thread.run_sync`` takes a thread from a cache, names it, runs the
call and hands it back, on every call; for the writer that is every group
commit, and it cost more CPU than the COMMIT's own work. One long-lived
thread fed by a queue does the same job: the trio task parks, the thread
runs the call, and wakes the task through the run's token. Like
``to_thread.run_sync``, a call once started is not cancelled: the writer
must learn how a COMMIT ended.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import outcome
import trio

__all__ = ["WriterThread"]

_T = TypeVar("_T")

_Job = tuple[Callable[..., Any], tuple[Any, ...], Callable[[outcome.Outcome[Any]], None]]


def _refuse_abort(_: object) -> trio.lowlevel.Abort:
    return trio.lowlevel.Abort.FAILED


class WriterThread:
    """One OS thread running blocking calls for trio tasks, one at a time, in order."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Let the thread end once the calls queued before are done, and wait for it."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
            self._thread = None

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, args, deliver = job
            deliver(outcome.capture(fn, *args))

    async def run(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` on the thread; its result or exception, here. Not cancellable
        once queued (a checkpoint for cancellation before it is)."""
        if self._thread is None:
            raise RuntimeError(f"the {self._name} thread is not running")
        await trio.lowlevel.checkpoint_if_cancelled()
        task = trio.lowlevel.current_task()
        token = trio.lowlevel.current_trio_token()

        def deliver(result: outcome.Outcome[Any]) -> None:
            token.run_sync_soon(trio.lowlevel.reschedule, task, result)

        self._jobs.put((fn, args, deliver))
        value: _T = await trio.lowlevel.wait_task_rescheduled(_refuse_abort)
        return value
