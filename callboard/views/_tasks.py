"""What the task operations answer, and the operations themselves as a `Protocol`.

``rt.tasks`` (`callboard.agent.Tasks`, on an embedded runtime) and
``client.tasks`` (`callboard.client.RemoteTasks`, through a gateway) both
offer `TaskOperations`, every one of them async, and answer with these
types::

    wait(...)      -> Settled(TaskRecord) | WaitTimedOut(attached)
    terminal(...)  -> None | Succeeded(result) | Failed(error) | Cancelled()
                      | DeadlineExceeded()
"""

from __future__ import annotations

from typing import Protocol

import attrs

from ..mailbox import Address
from ._modes import PromptMode
from ._run_spec import RunSpec

__all__ = [
    "TASK_KIND",
    "Cancelled",
    "DeadlineExceeded",
    "Failed",
    "Settled",
    "Succeeded",
    "TaskOperations",
    "TaskRecord",
    "Terminal",
    "WaitOutcome",
    "WaitTimedOut",
    "message_id_for",
]

TASK_KIND = "task"
"""The kind of tasks: their addresses are ``task/<id>``."""


def message_id_for(seq: int) -> str:
    """The id of the follow-up message at mailbox position ``seq``: stable across
    restarts, and the same for a repeated send with one idempotency key."""
    return f"msg-{seq}"


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
    ``wait``, the ``Succeeded`` result; for ``wait_message``, the reply to
    ``message_id`` (None if the task settled without answering it).
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


class TaskOperations(Protocol):
    """The task operations, the same on an embedded runtime and through a gateway.

    Handles are task addresses (``task/<id>``); any ``str`` of one works, and
    anything else is a `BadAddress`. ``timeout=`` on the waits is part of the
    contract rather than a cancel scope (ASYNC109): running out of time is an
    outcome that says whether the task is still attached, not an exception.
    Waits only read, so they are cancel-safe.
    """

    async def spawn(self, spec: RunSpec, *, name: str | None = None) -> Address:
        """Create a task and start it; returns its handle once the spawn is durable."""
        ...

    async def send(
        self, handle: str, text: str, *, key: str | None = None, mode: PromptMode = "queue"
    ) -> str:
        """Send a follow-up message; returns its id once it is durable.

        ``mode``: ``queue`` (its own turn, after those before it), ``steer``
        (join the running turn) or ``interrupt`` (cancel the running turn, then
        its own). A repeated send with the same ``key`` returns the same id and
        is not answered twice. A task that has settled refuses it with `ActorStopped`.
        """
        ...

    async def wait(self, handle: str, timeout: float | None = None) -> WaitOutcome:  # noqa: ASYNC109
        """Wait until the task settles: `Settled` with its record, or `WaitTimedOut`."""
        ...

    async def wait_message(
        self,
        handle: str,
        message_id: str,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> WaitOutcome:
        """Wait for the reply to ``message_id``: `Settled` with ``record.result`` the
        reply (None when the task settled without answering it), or `WaitTimedOut`."""
        ...

    async def terminal(self, handle: str) -> Terminal | None:
        """The task's terminal as last committed, or None while it runs."""
        ...

    async def record(self, handle: str) -> TaskRecord:
        """The task as last committed (``result``: its ``Succeeded`` result, if any)."""
        ...

    async def is_attached(self, handle: str) -> bool:
        """Whether a live runtime is driving the task."""
        ...

    async def cancel(self, handle: str) -> Terminal:
        """Settle the task `Cancelled`; returns its terminal (the earlier one if it had
        settled)."""
        ...

    async def approve(
        self, handle: str, call_id: str | None = None, *, approved: bool = True,
        reason: str | None = None, always: bool = False,
    ) -> None:  # fmt: skip
        """Answer an ``approval.requested``; durable once it returns. ``reason``
        reaches the model with a denial; ``always`` allows the tool for the rest
        of the task."""
        ...
