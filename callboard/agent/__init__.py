"""Agents: the turn, its journal, and the ``session`` kind.

General layout, bottom up:

- ``_approval_deadlines``: an approval's deadline (a durable timer) and the
  tools a person allowed for the rest of a session.
- ``_journal``: the turn journal, a pure state machine (no trio): where a turn
  stands, what to do next, and what each step appends to the conversation.
  Shared by sessions and tasks.
- ``_turn``: `drive_turn`, which runs a turn inside an actor's activity (model
  calls, tool calls, approvals), committing after every step.
- ``_compaction``: when a conversation outgrows its model's context, older
  turns summarised into a checkpoint in the log (`Compaction`, `PromptSize`).
- ``_job_tools``, ``_job_owner``: the background jobs a session or task owns
  (its records, the job tools, machine events); ``_executor_spec``: where
  their commands run (this machine, or another over ssh).
- ``_budget_state``, ``_budgets``: what a session or task spent, its limits,
  and what a breach does (``pause``, ``ask``, ``fail``); charged in the
  commit of each model answer and tool call.
- ``_bodies``: the bodies of the messages a session and a task take, as
  strict types (a body that does not fit is rejected naming the field).
- ``_steer``: a prompt's mode against a running turn: ``steer`` joins it at its
  next model call, ``interrupt`` cancels it and goes first (sessions and tasks).
- ``_session_spec``, ``_session``: the `Session` actor kind (``session``): a
  conversation and a prompt queue driven by messages.
- ``_task_spec``: what a task is made of: `TaskState`, the stored terminal (its
  spec, `RunSpec`, is in `callboard.views`, which the client shares).
- ``_task``: the `Task` actor kind (``task``): an autonomous run from a
  `RunSpec` to a typed terminal, answering follow-up messages on the way.
- ``_kinds``: `builtin_kinds`, the kinds this layer offers the runtime.
- ``_tasks_api``: `Tasks`, the caller's side of tasks (spawn, send, wait,
  cancel) on this runtime; the outcome types and what a read of a task means
  are in `callboard.views`, shared with `callboard.client.RemoteTasks`.
"""

from ._approval_deadlines import ApprovalDeadlines as ApprovalDeadlines
from ._approval_deadlines import ToolDeadline as ToolDeadline
from ._compaction import CHECKPOINT_TYPE as CHECKPOINT_TYPE
from ._compaction import SUMMARY_HEADER as SUMMARY_HEADER
from ._compaction import SUMMARY_INSTRUCTION as SUMMARY_INSTRUCTION
from ._compaction import Compaction as Compaction
from ._compaction import PromptSize as PromptSize
from ._compaction import model_messages as model_messages
from ._journal import CANCELLED_RESULT as CANCELLED_RESULT
from ._journal import INTERRUPTED_RESULT as INTERRUPTED_RESULT
from ._journal import NOT_RUN_RESULT as NOT_RUN_RESULT
from ._journal import AskModel as AskModel
from ._journal import AwaitApproval as AwaitApproval
from ._journal import CallRecord as CallRecord
from ._journal import Refuse as Refuse
from ._journal import ReportInterrupted as ReportInterrupted
from ._journal import RequestApproval as RequestApproval
from ._journal import RunTool as RunTool
from ._journal import Step as Step
from ._journal import TurnJournal as TurnJournal
from ._journal import begin_turn as begin_turn
from ._journal import close_turn as close_turn
from ._journal import conversation as conversation
from ._journal import next_step as next_step
from ._journal import record_reply as record_reply
from ._journal import record_result as record_result
from ._journal import record_started as record_started
from ._journal_approvals import answer_approval as answer_approval
from ._journal_approvals import record_approval as record_approval
from ._journal_approvals import record_approval_asked as record_approval_asked
from ._kinds import builtin_kinds as builtin_kinds
from ._session import DEFAULT_SYSTEM_PROMPT as DEFAULT_SYSTEM_PROMPT
from ._session import QueuedPrompt as QueuedPrompt
from ._session import Session as Session
from ._session import SessionSpec as SessionSpec
from ._session import SessionState as SessionState
from ._task import Task as Task
from ._task_spec import DEFAULT_TASK_SYSTEM_PROMPT as DEFAULT_TASK_SYSTEM_PROMPT
from ._task_spec import NO_WORKSPACE_HELP as NO_WORKSPACE_HELP
from ._task_spec import RunSpec as RunSpec
from ._task_spec import TaskState as TaskState
from ._tasks_api import Cancelled as Cancelled
from ._tasks_api import DeadlineExceeded as DeadlineExceeded
from ._tasks_api import Failed as Failed
from ._tasks_api import Settled as Settled
from ._tasks_api import Succeeded as Succeeded
from ._tasks_api import TaskRecord as TaskRecord
from ._tasks_api import Tasks as Tasks
from ._tasks_api import Terminal as Terminal
from ._tasks_api import WaitOutcome as WaitOutcome
from ._tasks_api import WaitTimedOut as WaitTimedOut
from ._turn import MODEL_CALL_ATTEMPTS as MODEL_CALL_ATTEMPTS
from ._turn import NO_MODEL_HELP as NO_MODEL_HELP
from ._turn import AgentSettings as AgentSettings
from ._turn import ConversationLog as ConversationLog
from ._turn import ModelCallHook as ModelCallHook
from ._turn import close_turn_records as close_turn_records
from ._turn import drive_turn as drive_turn

__all__ = [
    "CANCELLED_RESULT",
    "CHECKPOINT_TYPE",
    "DEFAULT_SYSTEM_PROMPT",
    "DEFAULT_TASK_SYSTEM_PROMPT",
    "INTERRUPTED_RESULT",
    "MODEL_CALL_ATTEMPTS",
    "NOT_RUN_RESULT",
    "NO_MODEL_HELP",
    "NO_WORKSPACE_HELP",
    "SUMMARY_HEADER",
    "SUMMARY_INSTRUCTION",
    "AgentSettings",
    "ApprovalDeadlines",
    "AskModel",
    "AwaitApproval",
    "CallRecord",
    "Cancelled",
    "Compaction",
    "ConversationLog",
    "DeadlineExceeded",
    "Failed",
    "ModelCallHook",
    "PromptSize",
    "QueuedPrompt",
    "Refuse",
    "ReportInterrupted",
    "RequestApproval",
    "RunSpec",
    "RunTool",
    "Session",
    "SessionSpec",
    "SessionState",
    "Settled",
    "Step",
    "Succeeded",
    "Task",
    "TaskRecord",
    "TaskState",
    "Tasks",
    "Terminal",
    "ToolDeadline",
    "TurnJournal",
    "WaitOutcome",
    "WaitTimedOut",
    "answer_approval",
    "begin_turn",
    "builtin_kinds",
    "close_turn",
    "close_turn_records",
    "conversation",
    "drive_turn",
    "model_messages",
    "next_step",
    "record_approval",
    "record_approval_asked",
    "record_reply",
    "record_result",
    "record_started",
]
