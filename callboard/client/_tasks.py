"""`RemoteTasks`: the task operations (`callboard.views.TaskOperations`) through a `Client`.

``client.tasks`` speaks to tasks on a server as ``rt.tasks`` does to tasks
of an embedded runtime, with the same handles (``task/<id>``), the same spec
(`RunSpec`) and the same outcome types (`Settled`, `WaitTimedOut`,
`Succeeded`, `Failed`, `Cancelled`, `DeadlineExceeded`, `TaskRecord`)::

    async with callboard.client.connect(url) as client:
        handle = await client.tasks.spawn(RunSpec("write the note", approve="always"))
        outcome = await client.tasks.wait(handle, timeout=60)

Both are `TaskOperations`, every operation async, and both draw their
conclusions from ``callboard.views.task_logic``, and both are a
`callboard.views.task_facade.TaskFacade`, which does every operation the
same way on either; this module is only the transport (``inspect``,
``subscribe`` and ``send`` through the client).
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

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

import trio

from ..codec import converter
from ..mailbox import Address, Event
from ..views import TASK_KIND, ActorView, RunSpec, TaskRecord, WaitOutcome
from ..views.task_facade import TaskFacade
from ..views.task_logic import (
    answer_in,
    is_attached_view,
    message_progress,
    might_settle,
    replied,
    task_address,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from ._client import Client

__all__ = ["RemoteTasks"]

_ATTACHED_TIMEOUT = 5.0  # seconds to ask whether a timed-out task is attached


class RemoteTasks(TaskFacade):
    """Tasks on a server, through ``client`` (``client.tasks``). See the module docstring.

    Every method is a checkpoint and raises what `Client` raises
    (`ConnectionFailed`, `UnknownActor`, ...). ``send``, ``approve`` and
    ``cancel`` are `TaskFacade`'s, over ``client.send``; ``record``,
    ``terminal`` and ``is_attached`` are one ``inspect`` each.
    """

    _attached_within = _ATTACHED_TIMEOUT

    def __init__(self, client: Client) -> None:
        super().__init__(client)
        self._client = client

    async def spawn(self, spec: RunSpec, *, name: str | None = None) -> Address:
        """Create a task on the server and start it; returns its handle once the spawn is durable.

        Without ``spec.workspace`` the task works in the server's workspace.
        """
        return await self._client.spawn(TASK_KIND, converter.unstructure(spec), name=name)

    async def wait(self, handle: str, timeout: float | None = None) -> WaitOutcome:  # noqa: ASYNC109
        """Wait until the task settles: `Settled` with its record, or `WaitTimedOut`.

        ``timeout`` is in seconds (None: no limit).
        """
        return await self._wait_settled(task_address(handle), timeout)

    async def wait_message(
        self,
        handle: str,
        message_id: str,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> WaitOutcome:
        """Wait for the reply to ``message_id``: `Settled` with ``record.result`` the
        reply (None when the task settled without answering it), or `WaitTimedOut`."""

        async def answered(view: ActorView, event: Event | None) -> TaskRecord | None:
            await trio.lowlevel.checkpoint()
            progress = message_progress(view, message_id)
            if event is None:  # the first read: over only if it settled unanswered
                return replied(progress.record, message_id, None) if progress.unanswered else None
            reply = answer_in(event, message_id)
            if reply is not None or progress.record.terminal is not None:
                # Its message.answered, if any, came before the settling: it was not answered.
                return replied(progress.record, message_id, reply)
            return None

        def rereads(event: Event) -> bool:
            return answer_in(event, message_id) is not None or might_settle(event)

        # The reply is only in the stored events: read them from the first.
        return await self._wait_for(
            task_address(handle), answered, rereads, timeout, from_start=True
        )

    async def is_attached(self, handle: str) -> bool:
        """Whether the server is driving the task: it is in memory there (one ``inspect``)."""
        return is_attached_view(await self._client.inspect(task_address(handle)))

    # -- the transport: the client ----------------------------------------------

    def _events(
        self, address: str, after: int
    ) -> AbstractAsyncContextManager[AsyncIterator[Event]]:
        return self._client.subscribe(address, after=after)
