"""`Tasks`: spawn autonomous tasks on a live runtime, talk to them, wait for their terminal.

The facade is thin on purpose: every operation is a message to the task's
mailbox (durable before it returns) or a read of the task's last committed
snapshot, and every wait is a subscription to the task's events that reads
the snapshot again after each one. So a wait sees nothing the runtime could
forget, and it works the same for a task this runtime is driving and for one
that settled long ago.

Outcomes::

    wait(...)      -> Settled(TaskRecord) | WaitTimedOut(attached)
    terminal(...)  -> None | Succeeded(result) | Failed(error) | Cancelled()
                      | DeadlineExceeded()

``timeout=`` on the waits is part of the contract rather than a cancel scope
(ASYNC109): running out of time is an outcome that says whether the task is
still attached, not an exception.

A wait ends with `WaitTimedOut` when its timeout passes (``attached`` says
whether this runtime is still driving the task) and, at once, with
``WaitTimedOut(attached=False)`` when the runtime closes: a caller waiting
from outside the runtime's ``async with`` block is not left hanging on a
runtime that will never answer. The task itself is untouched by that: what
its turn had not committed is not recorded, and the next runtime on the data
directory takes it up.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

import attrs
import trio

from ..codec import converter
from ..errors import ActorStopped, BadAddress, BadMessage, BadRequest, RuntimeClosed, UnknownActor
from ..mailbox import Address, parse_address
from ._task_spec import (
    CONVERSATION_LOG,
    NO_WORKSPACE_HELP,
    TASK_KIND,
    RunSpec,
    TaskOutcome,
    TaskState,
    message_id_for,
)

if TYPE_CHECKING:
    from ..runtime import Runtime, Subscription

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


@attrs.frozen
class Succeeded:
    """The model answered and nothing was left to answer: ``result`` is its last answer."""

    result: str


@attrs.frozen
class Failed:
    """The task could not go on (the model could not be asked, the actor failed)."""

    error: str


@attrs.frozen
class Cancelled:
    """Cancelled (or stopped) before it settled otherwise."""


@attrs.frozen
class DeadlineExceeded:
    """The spec's deadline passed before the task settled."""


Terminal = Succeeded | Failed | Cancelled | DeadlineExceeded


@attrs.frozen
class TaskRecord:
    """A task as its last commit left it.

    ``status`` is ``running`` or the terminal's status word. ``result`` is, for
    `Tasks.wait`, the ``Succeeded`` result; for `Tasks.wait_message`, the reply
    to ``message_id`` (None if the task settled without answering it).
    """

    handle: str
    status: str
    terminal: Terminal | None
    result: str | None = None
    message_id: str | None = None


@attrs.frozen
class Settled:
    """The wait is over: the task settled, or the message it waited for was answered."""

    record: TaskRecord


@attrs.frozen
class WaitTimedOut:
    """The wait ended first; ``attached`` tells whether a live runtime still drives the task."""

    attached: bool


WaitOutcome = Settled | WaitTimedOut


# What inspect reports for an actor that still takes messages: the store
# holds "idle" until the final commit sets the status it ended with.
_LIVE = frozenset({"idle", "active", "failing"})


class Tasks:
    """Tasks on one runtime: ``Tasks(rt)``, on a runtime whose kinds include the
    agent's (`builtin_kinds`).

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
        send with the same ``key`` returns the same id and is not answered twice.

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
        ack = await self._rt.send(address, "message", {"text": text}, key=key)
        return message_id_for(ack.seq)

    async def wait(self, handle: str, timeout: float | None = None) -> WaitOutcome:  # noqa: ASYNC109
        """Wait until the task settles: `Settled` with its record, or `WaitTimedOut`.

        ``timeout`` is in seconds (None: no limit). Cancel-safe: it only reads.
        """
        address = _address(handle)

        async def settled() -> TaskRecord | None:
            record = await self.record(address)
            return record if record.terminal is not None else None

        return await self._wait_for(address, settled, timeout)

    async def wait_message(
        self,
        handle: str,
        message_id: str,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> WaitOutcome:
        """Wait for the reply to ``message_id``: `Settled` with ``record.result`` the
        reply (None when the task settled without answering it), or `WaitTimedOut`."""
        address = _address(handle)

        async def answered() -> TaskRecord | None:
            status, state, terminal = await self._load(address)
            entry = next((m for m in state.messages if m.id == message_id), None)
            if entry is not None and entry.status == "answered" and entry.reply_at is not None:
                reply = (await self._logged(address, entry.reply_at)).get("content")
                return TaskRecord(address, status, terminal, reply, message_id)
            if terminal is not None:
                return TaskRecord(address, status, terminal, None, message_id)
            return None

        return await self._wait_for(address, answered, timeout)

    async def terminal(self, handle: str) -> Terminal | None:
        """The task's terminal as last committed, or None while it runs."""
        return (await self.record(handle)).terminal

    async def record(self, handle: str) -> TaskRecord:
        """The task as last committed (``result``: its ``Succeeded`` result, if any)."""
        address = _address(handle)
        status, _, terminal = await self._load(address)
        result = terminal.result if isinstance(terminal, Succeeded) else None
        return TaskRecord(address, status, terminal, result)

    async def is_attached(self, handle: str) -> bool:
        """Whether a live runtime (this one) is driving the task: it is open, the
        task has not settled, and the task is active here."""
        address = _address(handle)
        if not self._rt.is_active(address):
            await trio.lowlevel.checkpoint()
            return False
        return (await self._rt.inspect(address)).status in _LIVE

    async def cancel(self, handle: str) -> Terminal:
        """Settle the task ``Cancelled`` (closing its model stream, stopping a running
        tool); returns its terminal, which is the earlier one if it had settled.

        Raises:
            RuntimeClosed: the runtime closed first; the cancel is durable and the
                next runtime on the data directory settles the task.
        """
        address = _address(handle)
        current = await self.terminal(address)
        if current is not None:
            await trio.lowlevel.checkpoint()
            return current
        await self._rt.send(address, "cancel")
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
        """
        body: dict[str, object] = {"approved": approved}
        if call_id is not None:
            body["call_id"] = call_id
        await self._rt.send(_address(handle), "approve", body)

    # -- reading and waiting ----------------------------------------------------

    async def _load(self, address: str) -> tuple[str, TaskState, Terminal | None]:
        try:
            view = await self._rt.inspect(address)
        except UnknownActor:
            raise UnknownActor(f"there is no task at {address!r}") from None
        state = converter.structure(view.state, TaskState)
        terminal = _terminal(state.terminal)
        final = view.status not in _LIVE
        if terminal is None and final:
            # The actor ended without settling (it failed its restarts).
            error = view.last_error or {}
            terminal = Failed(f"the task's actor {view.status}: {error.get('message', '')}")
        status = state.terminal.status if state.terminal is not None else view.status
        return (status if final else "running"), state, terminal

    async def _logged(self, address: str, index: int) -> dict[str, Any]:
        (logged,) = await self._rt.read_log(address, CONVERSATION_LOG, index, 1)
        return cast(dict[str, Any], logged)

    async def _wait_for(
        self,
        address: str,
        found: Callable[[], Awaitable[TaskRecord | None]],
        timeout: float | None,  # noqa: ASYNC109
    ) -> WaitOutcome:
        closing = self._rt.closing
        await trio.lowlevel.checkpoint()
        if closing.is_set():
            return WaitTimedOut(attached=False)
        with trio.move_on_after(math.inf if timeout is None else timeout):
            async with (
                self._rt.subscribe(address, after=await self._rt.head(address)) as sub,
                trio.open_nursery() as nursery,
            ):
                nursery.start_soon(_close_when_set, closing, sub)
                try:
                    while not closing.is_set():
                        record = await found()
                        if record is not None:
                            return Settled(record)
                        await _next_durable(sub)
                finally:
                    nursery.cancel_scope.cancel()
            return WaitTimedOut(attached=False)  # the runtime closed
        return WaitTimedOut(attached=await self.is_attached(address))


async def _close_when_set(closing: trio.Event, sub: Subscription) -> None:
    """End the wait reading ``sub`` at once when the runtime starts to close."""
    await closing.wait()
    sub.close()


async def _next_durable(sub: Subscription) -> None:
    """Wait for the next stored event (ephemeral ones, such as deltas, change nothing);
    return at once if the subscription was closed."""
    while True:
        try:
            event = await sub.__anext__()
        except (StopAsyncIteration, RuntimeClosed):
            return
        if event.seq is not None:
            return


def _terminal(outcome: TaskOutcome | None) -> Terminal | None:
    if outcome is None:
        return None
    if outcome.status == "succeeded":
        return Succeeded(outcome.result or "")
    if outcome.status == "failed":
        return Failed(outcome.error or "")
    if outcome.status == "cancelled":
        return Cancelled()
    return DeadlineExceeded()


def _address(handle: str) -> str:
    kind, _ = parse_address(str(handle))
    if kind != TASK_KIND:
        raise BadAddress(f"{handle!r} is not a task handle: a task's is 'task/<id>'")
    return str(handle)
