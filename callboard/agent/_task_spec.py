"""What a task is made of: its `RunSpec`, its snapshot (`TaskState`) and its stored terminal.

Pure data (no trio), shared by the ``task`` kind (``_task``) and the callers'
facade (``_tasks_api``), which reads a task's snapshot to answer a wait.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any, Literal

import attrs

from ..tools import APPROVALS, Approval
from ._executor_spec import check_executor, check_key_env
from ._journal import TurnJournal

__all__ = [
    "CONVERSATION_LOG",
    "DEFAULT_TASK_SYSTEM_PROMPT",
    "NO_WORKSPACE_HELP",
    "PROMPT_ID",
    "TASK_KIND",
    "RunSpec",
    "TaskMessage",
    "TaskOutcome",
    "TaskState",
    "TerminalStatus",
    "message_id_for",
]

DEFAULT_TASK_SYSTEM_PROMPT = (
    "You are an autonomous agent working in a workspace directory, with no person to ask. "
    "Use the tools to read, write, edit and list files there. When the work is done, "
    "answer with the result in a few sentences."
)

PROMPT_ID = "prompt"
"""The ``prompt_id`` of the task's first turn (a message's turn carries the message id)."""

CONVERSATION_LOG = "conversation"
"""The log holding a task's conversation (one OpenAI message per item)."""

TASK_KIND = "task"
"""The kind of tasks: their addresses are ``task/<id>``."""

NO_WORKSPACE_HELP = (
    "a task needs a workspace: give RunSpec(workspace=...) or open the runtime with "
    "the agent's kinds bound to one: kinds=builtin_kinds({'workspace': ...})"
)

TerminalStatus = Literal["succeeded", "failed", "cancelled", "deadline_exceeded"]
"""The actor status a task settles with (``ctx.stop``)."""


def message_id_for(seq: int) -> str:
    """The id of the follow-up message at mailbox position ``seq``: stable across
    restarts, and the same for a repeated send with one idempotency key."""
    return f"msg-{seq}"


# The validators raise TypeError, as SessionSpec's do: cattrs words a
# ValueError as "invalid value" and drops its message, but keeps a TypeError's.


def _seconds(value: timedelta | float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"'deadline' must be a timedelta or seconds, got {value!r}")


def _check_deadline(instance: RunSpec, attribute: Any, value: float | None) -> None:
    if value is not None and not value > 0:
        raise TypeError(f"'deadline' must be positive, got {value!r} seconds")


def _check_prompt(instance: RunSpec, attribute: Any, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise TypeError(f"'prompt' must be non-empty text, got {value!r}")


def _check_approve(instance: RunSpec, attribute: Any, value: Any) -> None:
    if value not in APPROVALS:
        raise TypeError(f"'approve' must be 'always', 'ask' or 'never', got {value!r}")


def _check_workspace(instance: RunSpec, attribute: Any, value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not os.path.isabs(value)):
        raise TypeError(f"'workspace' must be an absolute path to a directory, got {value!r}")


@attrs.frozen
class RunSpec:
    """How a task is spawned (JSON over the gateway; ``deadline`` in seconds there).

    ``workspace`` defaults to the runtime's ``workspace``; ``base_url`` and
    ``model`` to the runtime's ``model_url`` and ``model`` settings, then to
    ``$CALLBOARD_MODEL_URL`` and ``$CALLBOARD_MODEL``. ``deadline`` (a
    `timedelta` or seconds, kept as seconds) runs from the task's first start.
    ``approve`` is the policy for every tool call: ``always`` runs it, ``ask``
    emits ``approval.requested`` and waits (durably) for an ``approve``
    message, ``never`` refuses it and tells the model so. ``executor`` says
    where ``shell_run`` and the task's jobs run (``_executor_spec``): None on
    this machine, ``{"ssh": {"host": ...}}`` on another. ``api_key_env``
    is as in `SessionSpec`.
    """

    prompt: str = attrs.field(validator=_check_prompt)
    base_url: str | None = None
    model: str | None = None
    deadline: float | None = attrs.field(
        default=None, converter=_seconds, validator=_check_deadline
    )
    approve: Approval = attrs.field(default="ask", validator=_check_approve)
    workspace: str | None = attrs.field(default=None, validator=_check_workspace)
    system_prompt: str = DEFAULT_TASK_SYSTEM_PROMPT
    executor: dict[str, Any] | None = attrs.field(default=None, validator=check_executor)
    api_key_env: str | None = attrs.field(default=None, validator=check_key_env)


@attrs.define
class TaskMessage:
    """A follow-up message: ``queued``, ``running`` (its turn began), then
    ``answered``, or ``unanswered`` when the task settled first.

    The snapshot stays small however long the texts are: ``text`` is kept only
    while the message waits (its turn logs it), and the reply is the item
    ``reply_at`` of the conversation log.
    """

    id: str
    text: str = ""
    status: Literal["queued", "running", "answered", "unanswered"] = "queued"
    reply_at: int | None = None


@attrs.define
class TaskOutcome:
    """The terminal as stored: ``result`` for ``succeeded``, ``error`` for ``failed``."""

    status: TerminalStatus
    result: str | None = None
    error: str | None = None


@attrs.define
class TaskState:
    """The snapshot: the running turn, the follow-up messages and, once settled, the terminal."""

    started: bool = False  # the first activation set the workspace and the deadline
    workspace: str = ""
    deadline_at: float | None = None  # wall time (epoch seconds)
    active: TurnJournal | None = None
    asked: bool = False  # the prompt's turn has begun
    messages: list[TaskMessage] = attrs.Factory(list)
    turns: int = 0
    answer: str | None = None  # the last turn's answer
    terminal: TaskOutcome | None = None
