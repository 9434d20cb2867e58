"""`RemoteTasks`: the `callboard.agent.Tasks` operations, through a gateway `Client`.

``client.tasks`` speaks to tasks on a server as ``rt.tasks`` does to tasks
of an embedded runtime, with the same handles (``task/<id>``), the same spec
(`RunSpec`) and the same outcome types (`Settled`, `WaitTimedOut`,
`Succeeded`, `Failed`, `Cancelled`, `DeadlineExceeded`, `TaskRecord`)::

    async with callboard.client.connect(url) as client:
        handle = await client.tasks.spawn(RunSpec("write the note", approve="always"))
        outcome = await client.tasks.wait(handle, timeout=60)

The differences, all because the snapshot is on the other side of a network:

- ``terminal``, ``record`` and ``is_attached`` are async (each is one
  ``inspect``), where the embedded ones read the local store synchronously.
- ``is_attached`` is true when the server reports the task ``active``: it
  says the server drives it, not that this client is connected to it.
- A spec without ``workspace`` takes the *server's* workspace
  (``callboard serve --workspace``), and without ``base_url``/``model`` the
  server's ``--model-url``/``--model``.
- ``wait_message`` reads the reply from the task's stored
  ``message.answered`` event (the conversation log is not on the wire), so it
  replays the task's stored events from the first one.

Every wait is a subscription that replays the stored events after the last
snapshot it read, so it misses nothing that settled in between and survives
the client's reconnections. Waits only read: they are cancel-safe.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from ..agent import (
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
from ..agent._task_spec import message_id_for
from ..codec import converter
from ..errors import ActorStopped, BadAddress, BadMessage
from ..mailbox import Address, Event, parse_address
from ..views import ActorView

if TYPE_CHECKING:
    from ._client import Client

__all__ = ["RemoteTasks"]

_KIND = "task"
_ATTACHED_TIMEOUT = 5.0  # seconds to ask whether a timed-out task is attached
# Events after which the snapshot may hold a terminal: read it again.
_ENDINGS = frozenset({"task.settled", "actor.failed", "actor.stopped"})


class RemoteTasks:
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
        return await self._client.spawn(_KIND, converter.unstructure(spec), name=name)

    async def send(self, handle: str, text: str, *, key: str | None = None) -> str:
        """Send a follow-up message; returns its id once it is durable.

        Raises:
            ActorStopped: the task has settled and takes no more messages.
        """
        address = _address(handle)
        if not isinstance(text, str) or not text.strip():
            raise BadMessage(f"a message to {address} needs non-empty text, got {text!r}")
        record = await self.record(address)
        if record.terminal is not None:
            raise ActorStopped(
                f"{address} has settled ({record.status}) and takes no more messages; "
                "spawn a new task to go on"
            )
        ack = await self._client.send(address, "message", {"text": text}, key=key)
        return message_id_for(ack.seq)

    async def wait(self, handle: str, timeout: float | None = None) -> WaitOutcome:  # noqa: ASYNC109
        """Wait until the task settles: `Settled` with its record, or `WaitTimedOut`.

        ``timeout`` is in seconds (None: no limit).
        """
        address = _address(handle)
        with trio.move_on_after(math.inf if timeout is None else timeout):
            view = await self._client.inspect(address)
            record = _record(view)
            if record.terminal is not None:
                return Settled(record)
            async with self._client.subscribe(address, after=view.head) as events:
                async for event in events:
                    if event.type in _ENDINGS:
                        record = _record(await self._client.inspect(address))
                        if record.terminal is not None:
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
        address = _address(handle)
        with trio.move_on_after(math.inf if timeout is None else timeout):
            view = await self._client.inspect(address)
            entry = _message(view, message_id)
            record = _record(view)
            if (entry is None or entry.get("status") == "unanswered") and record.terminal:
                return Settled(_replied(record, message_id, None))
            # The reply is only in the stored events: read them from the first.
            async with self._client.subscribe(address, after=0) as events:
                async for event in events:
                    reply = _answer(event, message_id)
                    if reply is not None:
                        record = _record(await self._client.inspect(address))
                        return Settled(_replied(record, message_id, reply))
                    if event.type in _ENDINGS:
                        record = _record(await self._client.inspect(address))
                        if record.terminal is not None:
                            return Settled(_replied(record, message_id, None))
        return await self._timed_out(address)

    async def terminal(self, handle: str) -> Terminal | None:
        """The task's terminal as last committed, or None while it runs.

        Async, unlike `Tasks.terminal`: it asks the server (one ``inspect``).
        """
        return (await self.record(handle)).terminal

    async def record(self, handle: str) -> TaskRecord:
        """The task as last committed (``result``: its ``Succeeded`` result, if any)."""
        return _record(await self._client.inspect(_address(handle)))

    async def is_attached(self, handle: str) -> bool:
        """Whether the server is driving the task: its status is ``active``.

        Async, unlike `Tasks.is_attached`: it asks the server (one ``inspect``).
        """
        view = await self._client.inspect(_address(handle))
        return view.status == "active"

    async def cancel(self, handle: str) -> Terminal:
        """Settle the task ``Cancelled`` (closing its model stream, stopping a running
        tool); returns its terminal, which is the earlier one if it had settled."""
        address = _address(handle)
        current = await self.terminal(address)
        if current is not None:
            return current
        await self._client.send(address, "cancel")
        outcome = await self.wait(address)
        assert isinstance(outcome, Settled), "a wait without a timeout ends settled"
        assert outcome.record.terminal is not None
        return outcome.record.terminal

    async def approve(
        self, handle: str, call_id: str | None = None, *, approved: bool = True
    ) -> None:
        """Answer an ``approval.requested`` (``approve="ask"``); durable once it returns.

        Without ``call_id``, it answers the one call that waits (if only one does).
        """
        body: dict[str, object] = {"approved": approved}
        if call_id is not None:
            body["call_id"] = call_id
        await self._client.send(_address(handle), "approve", body)

    async def _timed_out(self, address: str) -> WaitTimedOut:
        """The outcome of a wait whose time ran out: ``attached`` is False when the
        server cannot say within a few seconds."""
        with trio.move_on_after(_ATTACHED_TIMEOUT):
            return WaitTimedOut(attached=await self.is_attached(address))
        return WaitTimedOut(attached=False)


# -- reading the snapshot, as the server's ``inspect`` reports it -----------------


def _record(view: ActorView) -> TaskRecord:
    state = view.state if isinstance(view.state, dict) else {}
    outcome = state.get("terminal")
    outcome = outcome if isinstance(outcome, dict) else {}
    terminal = _terminal(outcome)
    status = str(outcome["status"]) if terminal is not None else "running"
    if terminal is None and view.status in ("failed", "stopped"):
        # The actor ended without settling (it failed its restarts).
        error = view.last_error or {}
        terminal = Failed(f"the task's actor {view.status}: {error.get('message', '')}")
        status = view.status
    result = terminal.result if isinstance(terminal, Succeeded) else None
    return TaskRecord(view.actor, status, terminal, result)


def _terminal(outcome: dict[str, Any]) -> Terminal | None:
    makers: dict[str, Callable[[], Terminal]] = {
        "succeeded": lambda: Succeeded(outcome.get("result") or ""),
        "failed": lambda: Failed(outcome.get("error") or ""),
        "cancelled": Cancelled,
        "deadline_exceeded": DeadlineExceeded,
    }
    make = makers.get(outcome.get("status", ""))
    return make() if make is not None else None


def _message(view: ActorView, message_id: str) -> dict[str, Any] | None:
    state = view.state if isinstance(view.state, dict) else {}
    for entry in state.get("messages") or []:
        if isinstance(entry, dict) and entry.get("id") == message_id:
            return entry
    return None


def _answer(event: Event, message_id: str) -> str | None:
    data = event.data if isinstance(event.data, dict) else {}
    if event.type == "message.answered" and data.get("message_id") == message_id:
        result = data.get("result")
        return result if isinstance(result, str) else ""
    return None


def _replied(record: TaskRecord, message_id: str, reply: str | None) -> TaskRecord:
    return TaskRecord(record.handle, record.status, record.terminal, reply, message_id)


def _address(handle: str) -> str:
    kind, _ = parse_address(str(handle))
    if kind != _KIND:
        raise BadAddress(f"{handle!r} is not a task handle: a task's is 'task/<id>'")
    return str(handle)
