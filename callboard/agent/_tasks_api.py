"""`Tasks`: the task operations (`callboard.views.TaskOperations`) on a live runtime.

The facade is thin on purpose: every operation is a message to the task's
mailbox (durable before it returns) or a read of the task's last committed
snapshot through ``rt.inspect``, and every wait is a subscription to the
task's events that reads the snapshot again after each one that may end it.
So a wait sees nothing the runtime could forget, and it works the same for
a task this runtime is driving and for one that settled long ago. What the
reads mean (a record, a terminal, a reply) is decided in
``callboard.views.task_logic``, which `callboard.client.RemoteTasks` shares.

Outcomes::

    wait(...)      -> Settled(TaskRecord) | WaitTimedOut(attached)
    terminal(...)  -> None | Succeeded(result) | Failed(error) | Cancelled()
                      | DeadlineExceeded()

A wait ends with `WaitTimedOut` when its timeout passes (``attached`` says
whether this runtime is still driving the task) and, at once, with
``WaitTimedOut(attached=False)`` when the runtime closes: a caller waiting
from outside the runtime's ``async with`` block is not left hanging on a
runtime that will never answer. The task itself is untouched by that: what
its turn had not committed is not recorded, and the next runtime on the data
directory takes it up.

A message to a settled task is refused by the store, atomically: settling
is one commit that also makes the task's actor final, and the store's
enqueue refuses a final actor (`ActorStopped`). ``send`` and ``approve`` do
not inspect before they send; they only reword the refusal for tasks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, NoReturn

import attrs
import trio

from ..errors import BadRequest, RuntimeClosed
from ..mailbox import Address, Event
from ..views import (
    TASK_KIND,
    ActorView,
    Cancelled,
    DeadlineExceeded,
    Failed,
    RunSpec,
    Settled,
    Succeeded,
    TaskRecord,
    Terminal,
    WaitOutcome,
    WaitTimedOut,
)
from ..views.task_facade import TaskFacade
from ..views.task_logic import (
    answer_in,
    is_attached_view,
    message_progress,
    might_settle,
    replied,
    task_address,
)
from ._confinement import host_workspace
from ._task_spec import CONVERSATION_LOG, NO_WORKSPACE_HELP

if TYPE_CHECKING:
    from ..runtime import Runtime, Subscription

# The outcome types live in `callboard.views`; they are named here too, where
# ``callboard.agent`` has always found them.
__all__ = [
    "Cancelled",
    "DeadlineExceeded",
    "Failed",
    "Settled",
    "Succeeded",
    "TaskRecord",
    "Tasks",
    "Terminal",
    "WaitOutcome",
    "WaitTimedOut",
]


class Tasks(TaskFacade):
    """Tasks on one runtime: ``Tasks(rt)``, on a runtime whose kinds include the
    agent's (`builtin_kinds`); ``rt.tasks`` is one.

    Handles are task addresses (``task/<id>``); any ``str`` of one works.
    ``send``, ``approve``, ``cancel``, ``record`` and ``terminal`` are
    `TaskFacade`'s, over ``rt.send`` and ``rt.inspect``.
    """

    def __init__(self, rt: Runtime) -> None:
        super().__init__(rt)
        self._rt = rt

    async def spawn(self, spec: RunSpec, *, name: str | None = None) -> Address:
        """Create a task and start it; returns its handle once the spawn is durable.

        Without ``spec.workspace``, the task works in the ``workspace`` of the
        task kind's settings (`builtin_kinds`).
        """
        if spec.workspace is None:
            workspace = host_workspace(self._rt.settings_for(TASK_KIND))
            if workspace is None:
                raise BadRequest(NO_WORKSPACE_HELP)
            spec = attrs.evolve(spec, workspace=workspace)
        return await self._rt.spawn(TASK_KIND, spec, name=name)

    async def wait(self, handle: str, timeout: float | None = None) -> WaitOutcome:  # noqa: ASYNC109
        """Wait until the task settles: `Settled` with its record, or `WaitTimedOut`.

        ``timeout`` is in seconds (None: no limit). Cancel-safe: it only reads.
        """
        return await self._wait_settled(task_address(handle), timeout)

    async def wait_message(
        self,
        handle: str,
        message_id: str,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> WaitOutcome:
        """Wait for the reply to ``message_id``: `Settled` with ``record.result`` the
        reply (None when the task settled without answering it), or `WaitTimedOut`.

        The reply is read from the task's conversation log."""
        address = task_address(handle)

        async def answered(view: ActorView, event: Event | None) -> TaskRecord | None:
            progress = message_progress(view, message_id)
            if progress.reply_at is not None:
                reply = (await self._logged(address, progress.reply_at)).get("content")
                return replied(progress.record, message_id, reply)
            await trio.lowlevel.checkpoint()
            return replied(progress.record, message_id, None) if progress.unanswered else None

        def rereads(event: Event) -> bool:
            return might_settle(event) or answer_in(event, message_id) is not None

        return await self._wait_for(address, answered, rereads, timeout)

    async def is_attached(self, handle: str) -> bool:
        """Whether a live runtime (this one) is driving the task: it is open, the
        task has not settled, and the task is active here."""
        address = task_address(handle)
        if not self._rt.is_active(address):
            await trio.lowlevel.checkpoint()
            return False
        return is_attached_view(await self._rt.inspect(address))

    # -- the transport: the runtime ---------------------------------------------

    @asynccontextmanager
    async def _events(self, address: str, after: int) -> AsyncIterator[AsyncIterator[Event]]:
        """The task's stored events; they end at once when the runtime starts to close."""
        closing = self._rt.closing
        async with (
            self._rt.subscribe(address, after=after) as sub,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(_close_when_set, closing, sub)
            try:
                yield _DurableEvents(sub, closing)
            finally:
                nursery.cancel_scope.cancel()

    def _host_closing(self) -> bool:
        return self._rt.closing.is_set()

    def _cancel_unsettled(self, address: str) -> NoReturn:
        raise RuntimeClosed(
            f"the runtime closed before {address} handled its cancel; the cancel is "
            "recorded and the next runtime on this data directory settles the task"
        )

    async def _logged(self, address: str, index: int) -> dict[str, Any]:
        (item,) = await self._rt.read_log(address, CONVERSATION_LOG, index, 1)
        return item if isinstance(item, dict) else {}


async def _close_when_set(closing: trio.Event, sub: Subscription) -> None:
    """End the wait reading ``sub`` at once when the runtime starts to close."""
    await closing.wait()
    sub.close()


class _DurableEvents:
    """The stored events of ``sub`` (ephemeral ones, such as deltas, change
    nothing), ending at once when the subscription was closed or the runtime
    started to close. A plain iterator, not an async generator: a wait that
    returns from inside the loop leaves nothing half-finished."""

    def __init__(self, sub: Subscription, closing: trio.Event) -> None:
        self._sub = sub
        self._closing = closing

    def __aiter__(self) -> _DurableEvents:
        return self

    async def __anext__(self) -> Event:
        while not self._closing.is_set():
            try:
                event = await self._sub.__anext__()
            except (StopAsyncIteration, RuntimeClosed):
                break
            if self._closing.is_set():
                break
            if event.seq is not None:
                return event
        raise StopAsyncIteration
