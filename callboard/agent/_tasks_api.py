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

import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ..errors import ActorStopped, BadRequest, CallboardError, RuntimeClosed
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
    TaskOperations,
    TaskRecord,
    Terminal,
    WaitOutcome,
    WaitTimedOut,
    message_id_for,
)
from ..views.task_logic import (
    answer_in,
    approve_body,
    check_text,
    is_attached_view,
    message_progress,
    might_settle,
    replied,
    settled_record,
    settled_refusal,
    task_address,
    task_record,
)
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

_Found = Callable[[ActorView], Awaitable[TaskRecord | None]]


class Tasks(TaskOperations):
    """Tasks on one runtime: ``Tasks(rt)``, on a runtime whose kinds include the
    agent's (`builtin_kinds`); ``rt.tasks`` is one.

    Handles are task addresses (``task/<id>``); any ``str`` of one works.
    """

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    async def spawn(self, spec: RunSpec, *, name: str | None = None) -> Address:
        """Create a task and start it; returns its handle once the spawn is durable.

        Without ``spec.workspace``, the task works in the ``workspace`` of the
        task kind's settings (`builtin_kinds`).
        """
        if spec.workspace is None:
            workspace = self._rt.settings_for(TASK_KIND).get("workspace")
            if workspace is None:
                raise BadRequest(NO_WORKSPACE_HELP)
            spec = attrs.evolve(spec, workspace=str(workspace))
        return await self._rt.spawn(TASK_KIND, spec, name=name)

    async def send(self, handle: str, text: str, *, key: str | None = None) -> str:
        """Send a follow-up message; returns its id once it is durable.

        The task answers it in its own turn (see `wait_message`). A repeated
        send with the same ``key`` returns the same id and is not answered
        twice, even once the task has settled. A message that became durable
        just before the task settled is not answered (`wait_message` ends
        with no reply).

        Raises:
            ActorStopped: the task has settled and takes no more messages (the
                store refused the message: there is no window between a check
                and the send).
        """
        address = task_address(handle)
        check_text(address, text)
        try:
            ack = await self._rt.send(address, "message", {"text": text}, key=key)
        except ActorStopped:
            raise await self._refusal(address) from None
        return message_id_for(ack.seq)

    async def wait(self, handle: str, timeout: float | None = None) -> WaitOutcome:  # noqa: ASYNC109
        """Wait until the task settles: `Settled` with its record, or `WaitTimedOut`.

        ``timeout`` is in seconds (None: no limit). Cancel-safe: it only reads.
        """

        async def settled(view: ActorView) -> TaskRecord | None:
            await trio.lowlevel.checkpoint()
            return settled_record(view)

        return await self._wait_for(task_address(handle), settled, might_settle, timeout)

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

        async def answered(view: ActorView) -> TaskRecord | None:
            progress = message_progress(view, message_id)
            if progress.reply_at is not None:
                reply = (await self._logged(address, progress.reply_at)).get("content")
                return replied(progress.record, message_id, reply)
            await trio.lowlevel.checkpoint()
            return replied(progress.record, message_id, None) if progress.unanswered else None

        def rereads(event: Event) -> bool:
            return might_settle(event) or answer_in(event, message_id) is not None

        return await self._wait_for(address, answered, rereads, timeout)

    async def terminal(self, handle: str) -> Terminal | None:
        """The task's terminal as last committed, or None while it runs."""
        return (await self.record(handle)).terminal

    async def record(self, handle: str) -> TaskRecord:
        """The task as last committed (``result``: its ``Succeeded`` result, if any)."""
        return task_record(await self._rt.inspect(task_address(handle)))

    async def is_attached(self, handle: str) -> bool:
        """Whether a live runtime (this one) is driving the task: it is open, the
        task has not settled, and the task is active here."""
        address = task_address(handle)
        if not self._rt.is_active(address):
            await trio.lowlevel.checkpoint()
            return False
        return is_attached_view(await self._rt.inspect(address))

    async def cancel(self, handle: str) -> Terminal:
        """Settle the task ``Cancelled`` (closing its model stream, stopping a running
        tool); returns its terminal, which is the earlier one if it had settled.

        Raises:
            RuntimeClosed: the runtime closed first; the cancel is durable and the
                next runtime on the data directory settles the task.
        """
        address = task_address(handle)
        current = await self.terminal(address)
        if current is not None:
            return current
        try:
            await self._rt.send(address, "cancel")
        except ActorStopped:
            return await self._settled_terminal(address)  # it settled since it was read
        outcome = await self.wait(address)
        if isinstance(outcome, WaitTimedOut):
            raise RuntimeClosed(
                f"the runtime closed before {address} handled its cancel; the cancel is "
                "recorded and the next runtime on this data directory settles the task"
            )
        assert outcome.record.terminal is not None
        return outcome.record.terminal

    async def approve(
        self, handle: str, call_id: str | None = None, *, approved: bool = True
    ) -> None:
        """Answer an ``approval.requested`` (``approve="ask"``); durable once it returns.

        Without ``call_id``, it answers the one call that waits (if only one does).

        Raises:
            ActorStopped: the task has settled.
        """
        address = task_address(handle)
        try:
            await self._rt.send(address, "approve", approve_body(call_id, approved))
        except ActorStopped:
            raise await self._refusal(address) from None

    # -- reading and waiting ----------------------------------------------------

    async def _refusal(self, address: str) -> ActorStopped:
        """The store refused a message: the task is final. Read it (after the
        refusal, so nothing can change) only to name its terminal."""
        try:
            record: TaskRecord | None = await self.record(address)
        except CallboardError:
            record = None
        return settled_refusal(address, record)

    async def _settled_terminal(self, address: str) -> Terminal:
        terminal = await self.terminal(address)
        assert terminal is not None, "a final task's record always has a terminal"
        return terminal

    async def _logged(self, address: str, index: int) -> dict[str, Any]:
        (item,) = await self._rt.read_log(address, CONVERSATION_LOG, index, 1)
        return item if isinstance(item, dict) else {}

    async def _wait_for(
        self,
        address: str,
        found: _Found,
        rereads: Callable[[Event], bool],
        timeout: float | None,  # noqa: ASYNC109
    ) -> WaitOutcome:
        """Read the snapshot, then subscribe after it and read it again after each
        event ``rereads`` picks, until ``found`` gives a record."""
        closing = self._rt.closing
        await trio.lowlevel.checkpoint()
        if closing.is_set():
            return WaitTimedOut(attached=False)
        with trio.move_on_after(math.inf if timeout is None else timeout):
            view = await self._rt.inspect(address)
            record = await found(view)
            if record is not None:
                return Settled(record)
            async with (
                self._rt.subscribe(address, after=view.head) as sub,
                trio.open_nursery() as nursery,
            ):
                nursery.start_soon(_close_when_set, closing, sub)
                try:
                    while not closing.is_set():
                        event = await _next_durable(sub)
                        if event is None or closing.is_set():
                            break
                        if rereads(event):
                            record = await found(await self._rt.inspect(address))
                            if record is not None:
                                return Settled(record)
                finally:
                    nursery.cancel_scope.cancel()
            return WaitTimedOut(attached=False)  # the runtime closed
        return WaitTimedOut(attached=await self.is_attached(address))


async def _close_when_set(closing: trio.Event, sub: Subscription) -> None:
    """End the wait reading ``sub`` at once when the runtime starts to close."""
    await closing.wait()
    sub.close()


async def _next_durable(sub: Subscription) -> Event | None:
    """The next stored event (ephemeral ones, such as deltas, change nothing);
    None at once if the subscription was closed."""
    while True:
        try:
            event = await sub.__anext__()
        except (StopAsyncIteration, RuntimeClosed):
            return None
        if event.seq is not None:
            return event
