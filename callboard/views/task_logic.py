"""What the task operations decide, with no I/O: shared by `Tasks` and `RemoteTasks`.

Both sides read a task the same way: an `ActorView` (from ``inspect``,
``state`` the snapshot's JSON) and the task's events. Everything they
conclude from those is here, so each side is only its transport:

- `task_address`, `check_text`: what a handle and a message must be;
- `task_record`: the record and terminal a snapshot holds (or a `Failed`
  for an actor that ended without settling);
- `settled_record`, `message_progress`, `answer_in`, `might_settle`: the
  decisions of the waits (is it over; where is the reply; which events are
  worth reading the snapshot again for);
- `is_attached_view`: whether the host still drives the task;
- `settled_refusal`: the `ActorStopped` a settled task's mailbox answers
  with, in the words of tasks.

A task settles in one commit: the terminal in its snapshot, the
``task.settled`` event and the actor's final status. So a snapshot with no
terminal is a task that may still take messages, and the store refuses a
message to a settled one by itself, atomically; nothing here has to
inspect before a send.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ..errors import ActorStopped, BadAddress, BadMessage
from ..mailbox import Event, parse_address
from ._actors import ActorView
from ._tasks import (
    TASK_KIND,
    Cancelled,
    DeadlineExceeded,
    Failed,
    Succeeded,
    TaskRecord,
    Terminal,
)

__all__ = [
    "ENDINGS",
    "LIVE_STATUSES",
    "MessageProgress",
    "answer_in",
    "approve_body",
    "check_text",
    "is_attached_view",
    "message_progress",
    "might_settle",
    "replied",
    "settled_record",
    "settled_refusal",
    "task_address",
    "task_record",
]

ENDINGS = frozenset({"task.settled", "actor.failed", "actor.stopped"})
"""Events after which the snapshot may hold a terminal: the waits read it again."""

LIVE_STATUSES = frozenset({"active", "waiting", "paused", "failing", "idle"})
"""The statuses ``inspect`` gives an actor that is not final (docs/protocol.md);
every other one (``stopped``, ``failed``, a task's terminal) is final."""

_ATTACHED = frozenset({"active", "waiting", "failing"})  # in memory on the host, driven by it

_TERMINALS: dict[str, Callable[[dict[str, Any]], Terminal]] = {
    "succeeded": lambda outcome: Succeeded(outcome.get("result") or ""),
    "failed": lambda outcome: Failed(outcome.get("error") or ""),
    "cancelled": lambda outcome: Cancelled(),
    "deadline_exceeded": lambda outcome: DeadlineExceeded(),
}


def task_address(handle: str) -> str:
    """The address a task handle stands for; `BadAddress` for anything but ``task/<id>``."""
    kind, _ = parse_address(str(handle))
    if kind != TASK_KIND:
        raise BadAddress(f"{handle!r} is not a task handle: a task's is 'task/<id>'")
    return str(handle)


def check_text(address: str, text: object) -> None:
    """A follow-up message needs non-empty text (`BadMessage`)."""
    if not isinstance(text, str) or not text.strip():
        raise BadMessage(f"a message to {address} needs non-empty text, got {text!r}")


def _state(view: ActorView) -> dict[str, Any]:
    return view.state if isinstance(view.state, dict) else {}


def task_record(view: ActorView) -> TaskRecord:
    """The task as the snapshot in ``view`` left it (``result``: the `Succeeded` result)."""
    outcome = _state(view).get("terminal")
    outcome = outcome if isinstance(outcome, dict) else {}
    make = _TERMINALS.get(str(outcome.get("status")))
    terminal = make(outcome) if make is not None else None
    if terminal is not None:
        status = str(outcome["status"])
    elif view.status not in LIVE_STATUSES:
        # The actor ended without settling (it failed its restarts).
        error = view.last_error or {}
        terminal = Failed(f"the task's actor {view.status}: {error.get('message', '')}")
        status = view.status
    else:
        status = "running"
    result = terminal.result if isinstance(terminal, Succeeded) else None
    return TaskRecord(view.actor, status, terminal, result)


def settled_record(view: ActorView) -> TaskRecord | None:
    """The end of ``wait``: the record once the task has settled, else None."""
    record = task_record(view)
    return record if record.terminal is not None else None


@attrs.frozen
class MessageProgress:
    """Where the follow-up message a ``wait_message`` waits for stands in one snapshot.

    ``reply_at`` is the reply's index in the task's conversation log once the
    message is answered; ``unanswered`` is true when the task settled without
    answering it (the wait is over, with no reply).
    """

    record: TaskRecord
    reply_at: int | None

    @property
    def unanswered(self) -> bool:
        return self.reply_at is None and self.record.terminal is not None


def message_progress(view: ActorView, message_id: str) -> MessageProgress:
    """How far the message ``message_id`` got, as the snapshot in ``view`` says."""
    reply_at = None
    for entry in _state(view).get("messages") or []:
        if isinstance(entry, dict) and entry.get("id") == message_id:
            at = entry.get("reply_at")
            if entry.get("status") == "answered" and isinstance(at, int):
                reply_at = at
            break
    return MessageProgress(task_record(view), reply_at)


def replied(record: TaskRecord, message_id: str, reply: str | None) -> TaskRecord:
    """``record`` as the end of a ``wait_message``: ``result`` is the reply (or None)."""
    return TaskRecord(record.handle, record.status, record.terminal, reply, message_id)


def answer_in(event: Event, message_id: str) -> str | None:
    """The reply to ``message_id`` if ``event`` is its ``message.answered``, else None."""
    data = event.data if isinstance(event.data, dict) else {}
    if event.type == "message.answered" and data.get("message_id") == message_id:
        result = data.get("result")
        return result if isinstance(result, str) else ""
    return None


def might_settle(event: Event) -> bool:
    """Whether the task may have settled with ``event``: read its snapshot again."""
    return event.type in ENDINGS


def is_attached_view(view: ActorView) -> bool:
    """Whether the host that answered ``view`` drives the task: it is in memory there
    (``active``, ``waiting`` for an approval, or ``failing`` while the store refuses
    its commits) and not final."""
    return view.status in _ATTACHED


def settled_refusal(address: str, record: TaskRecord | None) -> ActorStopped:
    """What a message to a settled task raises: the store refused it (the actor is
    final); ``record``, read after the refusal, names the terminal if it could be read."""
    status = f" ({record.status})" if record is not None else ""
    return ActorStopped(
        f"{address} has settled{status} and takes no more messages; spawn a new task to go on"
    )


def approve_body(
    call_id: str | None, approved: bool, reason: str | None = None, always: bool = False
) -> dict[str, object]:
    """The body of an ``approve`` message (``always``: the tool for the rest of the task)."""
    body: dict[str, object] = {"approved": approved}
    if call_id is not None:
        body["call_id"] = call_id
    if reason is not None:
        body["reason"] = reason
    if always:
        body["scope"] = "session"
    return body
