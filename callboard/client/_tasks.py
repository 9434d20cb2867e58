"""`RemoteTasks`: the task operations (`callboard.views.TaskOperations`) through a `Client`.

``client.tasks`` speaks to tasks on a server as ``rt.tasks`` does to tasks
of an embedded runtime, with the same handles (``task/<id>``), the same spec
(`RunSpec`) and the same outcome types (`Settled`, `WaitTimedOut`,
`Succeeded`, `Failed`, `Cancelled`, `DeadlineExceeded`, `TaskRecord`)::

    async with callboard.client.connect(url) as client:
        handle = await client.tasks.spawn(RunSpec("write the note", approve="always"))
        outcome = await client.tasks.wait(handle, timeout=60)

Both are `TaskOperations`, every operation async, and both draw their
conclusions from ``callboard.views.task_logic``; this module is only the
transport (``inspect``, ``subscribe`` and ``send`` through the client).
The differences, all because the snapshot is on the other side of a network:

- ``is_attached`` is true when the server reports the task in memory
  (``active``, or ``failing``): it says the server drives it, not that this
  client is connected to it.
- A spec without ``workspace`` takes the *server's* workspace
  (``callboard serve --workspace``), and without ``base_url``/``model`` the
  server's ``--model-url``/``--model``.
- ``wait_message`` reads the reply from the task's stored
  ``message.answered`` event (the conversation log is not on the wire), so it
  replays the task's stored events from the first one.

Every wait is a subscription that replays the stored events after the last
snapshot it read, so it misses nothing that settled in between and survives
the client's reconnections. Waits only read: they are cancel-safe.

``send`` is one ``send`` request: a settled task's actor is final, and the
server's store refuses the message with `ActorStopped` (reworded here for
tasks), so there is no window between a check and the send.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import trio

from ..codec import converter
from ..errors import ActorStopped, CallboardError
from ..mailbox import Address
from ..views import (
    TASK_KIND,
    RunSpec,
    Settled,
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

if TYPE_CHECKING:
    from ._client import Client

__all__ = ["RemoteTasks"]

_ATTACHED_TIMEOUT = 5.0  # seconds to ask whether a timed-out task is attached


class RemoteTasks(TaskOperations):
    """Tasks on a server, through ``client`` (``client.tasks``). See the module docstring.

    Every method is a checkpoint and raises what `Client` raises
    (`ConnectionFailed`, `UnknownActor`, ...).
    """

    def __init__(self, client: Client) -> None:
        self._client = client

    async def spawn(self, spec: RunSpec, *, name: str | None = None) -> Address:
        """Create a task on the server and start it; returns its handle once the spawn is durable.

        Without ``spec.workspace`` the task works in the server's workspace.
        """
        return await self._client.spawn(TASK_KIND, converter.unstructure(spec), name=name)

    async def send(self, handle: str, text: str, *, key: str | None = None) -> str:
        """Send a follow-up message; returns its id once it is durable.

        Raises:
            ActorStopped: the task has settled and takes no more messages.
        """
        address = task_address(handle)
        check_text(address, text)
        try:
            ack = await self._client.send(address, "message", {"text": text}, key=key)
        except ActorStopped:
            raise await self._refusal(address) from None
        return message_id_for(ack.seq)

    async def wait(self, handle: str, timeout: float | None = None) -> WaitOutcome:  # noqa: ASYNC109
        """Wait until the task settles: `Settled` with its record, or `WaitTimedOut`.

        ``timeout`` is in seconds (None: no limit).
        """
        address = task_address(handle)
        with trio.move_on_after(math.inf if timeout is None else timeout):
            view = await self._client.inspect(address)
            record = settled_record(view)
            if record is not None:
                return Settled(record)
            async with self._client.subscribe(address, after=view.head) as events:
                async for event in events:
                    if might_settle(event):
                        record = settled_record(await self._client.inspect(address))
                        if record is not None:
                            return Settled(record)
        return await self._timed_out(address)

    async def wait_message(
        self,
        handle: str,
        message_id: str,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> WaitOutcome:
        """Wait for the reply to ``message_id``: `Settled` with ``record.result`` the
        reply (None when the task settled without answering it), or `WaitTimedOut`."""
        address = task_address(handle)
        with trio.move_on_after(math.inf if timeout is None else timeout):
            progress = message_progress(await self._client.inspect(address), message_id)
            if progress.unanswered:
                return Settled(replied(progress.record, message_id, None))
            # The reply is only in the stored events: read them from the first.
            async with self._client.subscribe(address, after=0) as events:
                async for event in events:
                    reply = answer_in(event, message_id)
                    if reply is not None:
                        record = task_record(await self._client.inspect(address))
                        return Settled(replied(record, message_id, reply))
                    if might_settle(event):
                        # Its message.answered, if any, came before: it was not answered.
                        record = task_record(await self._client.inspect(address))
                        if record.terminal is not None:
                            return Settled(replied(record, message_id, None))
        return await self._timed_out(address)

    async def terminal(self, handle: str) -> Terminal | None:
        """The task's terminal as last committed, or None while it runs (one ``inspect``)."""
        return (await self.record(handle)).terminal

    async def record(self, handle: str) -> TaskRecord:
        """The task as last committed (``result``: its ``Succeeded`` result, if any)."""
        return task_record(await self._client.inspect(task_address(handle)))

    async def is_attached(self, handle: str) -> bool:
        """Whether the server is driving the task: it is in memory there (one ``inspect``)."""
        return is_attached_view(await self._client.inspect(task_address(handle)))

    async def cancel(self, handle: str) -> Terminal:
        """Settle the task ``Cancelled`` (closing its model stream, stopping a running
        tool); returns its terminal, which is the earlier one if it had settled."""
        address = task_address(handle)
        current = await self.terminal(address)
        if current is not None:
            return current
        try:
            await self._client.send(address, "cancel")
        except ActorStopped:
            return await self._settled_terminal(address)  # it settled since it was read
        outcome = await self.wait(address)
        assert isinstance(outcome, Settled), "a wait without a timeout ends settled"
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
            await self._client.send(address, "approve", approve_body(call_id, approved))
        except ActorStopped:
            raise await self._refusal(address) from None

    async def _refusal(self, address: str) -> ActorStopped:
        """The server refused a message: the task is final. Read it (after the
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

    async def _timed_out(self, address: str) -> WaitTimedOut:
        """The outcome of a wait whose time ran out: ``attached`` is False when the
        server cannot say within a few seconds."""
        with trio.move_on_after(_ATTACHED_TIMEOUT):
            return WaitTimedOut(attached=await self.is_attached(address))
        return WaitTimedOut(attached=False)
