"""What a task is made of: its snapshot (`TaskState`) and its stored terminal.

Pure data (no trio), for the ``task`` kind (``_task``). The spec (`RunSpec`),
the task kind's name and `message_id_for` are in `callboard.views`, which the
client shares; they are named here too, for the kind.
"""

from __future__ import annotations

from typing import Literal

import attrs

from ..views import DEFAULT_TASK_SYSTEM_PROMPT, TASK_KIND, RunSpec, message_id_for
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

PROMPT_ID = "prompt"
"""The ``prompt_id`` of the task's first turn (a message's turn carries the message id)."""

CONVERSATION_LOG = "conversation"
"""The log holding a task's conversation (one OpenAI message per item)."""

NO_WORKSPACE_HELP = (
    "a task needs a workspace: give RunSpec(workspace=...) or open the runtime with "
    "the agent's kinds bound to one: kinds=builtin_kinds({'workspace': ...})"
)

TerminalStatus = Literal["succeeded", "failed", "cancelled", "deadline_exceeded"]
"""The actor status a task settles with (``ctx.stop``)."""


@attrs.define
class TaskMessage:
    """A follow-up message: ``queued``, ``running`` (its turn began), then
    ``answered``, or ``unanswered`` when the task settled first. A steered one
    is ``steering`` until the running turn takes it, then ``running`` in that
    turn (``_steer``); every ``running`` message is answered by the turn that
    completes next, so one whose turn was interrupted by another message gets
    the reply of the turn that replaced it.

    The snapshot stays small however long the texts are: ``text`` is kept only
    while the message waits (its turn logs it), and the reply is the item
    ``reply_at`` of the conversation log.
    """

    id: str
    text: str = ""
    status: Literal["queued", "steering", "running", "answered", "unanswered"] = "queued"
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
