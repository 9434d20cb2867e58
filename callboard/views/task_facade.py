"""`TaskFacade`: the task operations once, over a transport's few reads and writes.

`callboard.agent.Tasks` (an embedded runtime) and `callboard.client.RemoteTasks`
(a gateway client) are both a `TaskFacade`: each hands it a `TaskHost` (the
`Runtime` or the `Client`, whose ``inspect`` and ``send`` are the same) and
says how to subscribe to a task's stored events; this class does the rest
the same way for both, with the decisions of ``callboard.views.task_logic``:

- ``send``, ``approve``, ``cancel``, ``record``, ``terminal``, and the
  rewording of a settled task's refusal (`ActorStopped`);
- the waiting loop (`_wait_for`): read the snapshot, subscribe after it,
  read it again after each event that may end the wait, and say on a
  timeout whether the task is still attached.

What is left to each side is what really differs: ``spawn`` (where a spec
without a workspace takes one), ``is_attached``, and the waits themselves,
which pick what ends them (``wait_message`` reads its reply from the
conversation log on a runtime, from the stored ``message.answered`` event
through a gateway).
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import trio

from ..errors import ActorStopped, CallboardError
from ..mailbox import Ack, Event
from ._actors import ActorView
from ._modes import PromptMode, check_mode
from ._tasks import (
    Settled,
    TaskOperations,
    TaskRecord,
    Terminal,
    WaitOutcome,
    WaitTimedOut,
    message_id_for,
)
from .task_logic import (
    approve_body,
    check_text,
    might_settle,
    settled_record,
    settled_refusal,
    task_address,
    task_record,
)

__all__ = ["Found", "TaskFacade", "TaskHost"]

Found = Callable[[ActorView, Event | None], Awaitable[TaskRecord | None]]
"""What ends a wait: given a snapshot and the event it was read again for (None
for the first read), the record to settle with, or None to go on waiting."""


class TaskHost(Protocol):
    """What the operations read and write through: ``rt`` or ``client``."""

    async def inspect(self, address: str) -> ActorView:
        """The actor's last committed snapshot."""
        ...

    async def send(self, to: str, type: str, body: Any = None, *, key: str | None = None) -> Ack:
        """Deliver a message; returns once it is durable. `ActorStopped` when the
        store refuses it (the actor is final)."""
        ...


class TaskFacade(TaskOperations):
    """The task operations over ``host``; see the module docstring.

    A subclass gives `_events` (and may say, with `_host_closing`, that its
    host stops answering), plus ``spawn``, ``is_attached``, ``wait`` and
    ``wait_message``.
    """

    _attached_within: float = math.inf
    """Seconds a timed-out wait gives ``is_attached``; past them, not attached."""

    def __init__(self, host: TaskHost) -> None:
        self._host = host

    # -- the transport ----------------------------------------------------------

    @abstractmethod
    def _events(
        self, address: str, after: int
    ) -> AbstractAsyncContextManager[AsyncIterator[Event]]:
        """The task's events after seq ``after``, stored ones first, then live ones;
        the iteration may end when the host stops answering."""

    def _host_closing(self) -> bool:
        """Whether the host is closing: a wait then ends at once, not attached."""
        return False

    # -- the operations ---------------------------------------------------------

    async def send(
        self, handle: str, text: str, *, key: str | None = None, mode: PromptMode = "queue"
    ) -> str:
        """Send a follow-up message; returns its id once it is durable.

        The task answers it in its own turn (see `wait_message`); with ``mode``
        ``"steer"`` it joins the running turn at its next model call and its
        reply is that turn's answer, and with ``"interrupt"`` it cancels the
        running turn and its own turn runs next. A repeated
        send with the same ``key`` returns the same id and is not answered
        twice, even once the task has settled. A message that became durable
        just before the task settled is not answered (`wait_message` ends
        with no reply).

        Raises:
            ActorStopped: the task has settled and takes no more messages (the
                store refused the message: there is no window between a check
                and the send).
            BadMessage: the text is empty, or ``mode`` is none of `PROMPT_MODES`;
                nothing was sent.
        """
        address = task_address(handle)
        check_text(address, text)
        body: dict[str, str] = {"text": text}
        if check_mode(mode) != "queue":
            body["mode"] = mode
        try:
            ack = await self._host.send(address, "message", body, key=key)
        except ActorStopped:
            raise await self._refusal(address) from None
        return message_id_for(ack.seq)

    async def terminal(self, handle: str) -> Terminal | None:
        """The task's terminal as last committed, or None while it runs."""
        return (await self.record(handle)).terminal

    async def record(self, handle: str) -> TaskRecord:
        """The task as last committed (``result``: its ``Succeeded`` result, if any)."""
        return task_record(await self._host.inspect(task_address(handle)))

    async def cancel(self, handle: str) -> Terminal:
        """Settle the task ``Cancelled`` (closing its model stream, stopping a running
        tool); returns its terminal, which is the earlier one if it had settled.

        Raises:
            RuntimeClosed: (`Tasks`) the runtime closed first; the cancel is durable
                and the next runtime on the data directory settles the task.
        """
        address = task_address(handle)
        current = await self.terminal(address)
        if current is not None:
            return current
        try:
            await self._host.send(address, "cancel")
        except ActorStopped:
            return await self._settled_terminal(address)  # it settled since it was read
        outcome = await self.wait(address)
        if isinstance(outcome, WaitTimedOut):
            self._cancel_unsettled(address)
        assert isinstance(outcome, Settled), "a wait without a timeout ends settled"
        assert outcome.record.terminal is not None
        return outcome.record.terminal

    async def approve(
        self, handle: str, call_id: str | None = None, *, approved: bool = True,
        reason: str | None = None, always: bool = False,
    ) -> None:  # fmt: skip
        """Answer an ``approval.requested`` (``approve="ask"``); durable once it returns.

        Without ``call_id``, it answers the one call that waits (if only one does).
        ``reason`` reaches the model in the tool result it sees with a denial;
        ``always`` also lets the tool run without asking for the rest of the task.

        Raises:
            ActorStopped: the task has settled.
        """
        address = task_address(handle)
        try:
            await self._host.send(
                address, "approve", approve_body(call_id, approved, reason, always)
            )
        except ActorStopped:
            raise await self._refusal(address) from None

    # -- refusals ---------------------------------------------------------------

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

    def _cancel_unsettled(self, address: str) -> None:
        """``cancel``'s wait, which has no timeout, ended unsettled: only a host that
        stopped answering ends it so. Raise what the caller should learn of it."""

    # -- waiting ----------------------------------------------------------------

    async def _wait_settled(self, address: str, timeout: float | None) -> WaitOutcome:  # noqa: ASYNC109
        """``wait``: until the snapshot holds a terminal."""
        return await self._wait_for(address, _settled, might_settle, timeout)

    async def _wait_for(
        self,
        address: str,
        found: Found,
        rereads: Callable[[Event], bool],
        timeout: float | None,  # noqa: ASYNC109
        *,
        from_start: bool = False,
    ) -> WaitOutcome:
        """Read the snapshot, then subscribe after it (``from_start``: after seq 0)
        and read it again after each event ``rereads`` picks, until ``found``
        gives a record."""
        await trio.lowlevel.checkpoint()
        if self._host_closing():
            return WaitTimedOut(attached=False)
        with trio.move_on_after(math.inf if timeout is None else timeout):
            view = await self._host.inspect(address)
            record = await found(view, None)
            if record is not None:
                return Settled(record)
            async with self._events(address, 0 if from_start else view.head) as events:
                async for event in events:
                    if rereads(event):
                        record = await found(await self._host.inspect(address), event)
                        if record is not None:
                            return Settled(record)
            if self._host_closing():
                return WaitTimedOut(attached=False)  # the events ended with the host
        return await self._timed_out(address)

    async def _timed_out(self, address: str) -> WaitTimedOut:
        """The outcome of a wait whose time ran out: ``attached`` is False when the
        host cannot say within `_attached_within`."""
        with trio.move_on_after(self._attached_within):
            return WaitTimedOut(attached=await self.is_attached(address))
        return WaitTimedOut(attached=False)


async def _settled(view: ActorView, event: Event | None) -> TaskRecord | None:
    await trio.lowlevel.checkpoint()
    return settled_record(view)
