"""The ``task`` kind: an autonomous model run from a `RunSpec` to a typed terminal.

A task runs without a person. Its first turn asks the prompt; each follow-up
``message`` gets its own turn (one at a time, in the order they arrived) and
its own reply (or, by its ``mode``, joins the running turn or interrupts it:
``_steer``); when a turn ends and no message waits, the task settles
``succeeded`` with that turn's answer. ``cancel`` settles ``cancelled`` at
once (closing the model stream, stopping a running tool), the deadline timer
``deadline_exceeded``, a model that cannot be asked ``failed``. Settling is
one commit: the terminal in the state, the ``task.settled`` event and the
actor's final status (``ctx.stop``), so nothing can see a half-settled task.

Turns run in one activity, the *runner*, through `drive_turn` and the turn
journal, exactly as a session's do: after a crash the runner takes the
active turn up where its last commit left it (the prompt is not asked again
and a tool that ran is not run again); after a clean close the turn that
committed nothing is asked once more. The deadline is a durable timer set in
the first commit; a task whose deadline passed while no runtime ran settles
in ``on_start``, before the runner could call the model.

Background jobs work as in a session (``_job_owner``): ``shell_run`` can put
a command in the background (asked, or at its timeout), the job tools are
the task's own, and a job's end is a machine event, taken by the running
turn or, when the task is idle, by a turn of its own. A task with a job
still running does not settle when its turn ends: it waits for the job's
machine event, and its result is the answer of the turn that took it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ..actors import Context
from ..errors import ModelError
from ..llm import ChatClient
from ..mailbox import Message
from ..tools import ApprovalPolicy
from ..views import PromptMode
from ._approval_deadlines import APPROVAL_DEADLINE, ApprovalDeadlines, ToolDeadline
from ._bodies import ApproveBody, TextBody, read_body
from ._budgets import BUDGET_MESSAGES, BudgetState, check_budget
from ._compaction import PromptSize
from ._confinement import (
    check_directory,
    check_executor_host,
    check_model,
    check_spawn_workspace,
    host_workspace,
)
from ._job_owner import adopt_orphans, job_tools_for, stop_jobs_of_ending_owner
from ._job_tools import JobRecord, JobTools
from ._journal import TurnJournal, begin_turn
from ._outage import OUTAGE_RETRY
from ._steer import Steer, announce_steer, interrupted_by, steer_into
from ._task_spec import (
    CONVERSATION_LOG,
    NO_WORKSPACE_HELP,
    PROMPT_ID,
    RunSpec,
    TaskMessage,
    TaskOutcome,
    TaskState,
    message_id_for,
)
from ._tasks_api import Tasks
from ._turn import AgentSettings, ConversationLog
from ._turn_runner import TurnRunner, agent_settings, reject, turn_event

__all__ = ["Task", "TaskJobsState"]

_OWN_TIMERS = ("deadline", APPROVAL_DEADLINE, OUTAGE_RETRY)
"""Timers a settled task ignores without a word: they were set before it settled."""


@attrs.define
class TaskJobsState(TaskState):
    """A task's snapshot (`TaskState`), plus its background jobs and the machine
    events no model call has taken yet."""

    jobs: dict[str, JobRecord] = attrs.Factory(dict)
    machine_events: list[str] = attrs.Factory(list)
    allowed_tools: list[str] = attrs.Factory(list)  # approved for the rest of the task
    prompt_size: PromptSize = attrs.Factory(PromptSize)  # the last model request's (compaction)
    budget: BudgetState = attrs.Factory(BudgetState)  # usage and limits (`_budgets`)


class Task(TurnRunner):
    """An autonomous agent run. See the module docstring.

    Messages: ``message`` (``{"text", "mode"}`` or a string; its id is
    `message_id_for` its seq; ``mode`` is ``queue``, ``steer`` or ``interrupt``,
    see ``_steer``), ``cancel``, ``approve`` (``{"call_id", "approved", "reason",
    "scope"}``; the call ``budget`` answers a budget's ``ask``), ``raise_budget``
    (new limits, `_budgets`), ``deadline`` and ``approval.deadline`` (the task's
    own timers), and ``job.finished`` from one of its jobs. After the task
    settled, a message is answered with ``message.rejected``.
    """

    kind = "task"
    state_type = TaskJobsState
    spec_type = RunSpec
    state: TaskJobsState
    spec: RunSpec

    @classmethod
    def caller(cls, runtime: Any) -> Any:
        """``rt.tasks``: `Tasks` over ``runtime``."""
        return Tasks(runtime)

    @classmethod
    def check_spec(cls, spec: RunSpec, settings: Mapping[str, Any]) -> None:
        # No workspace means the host's own (open_runtime's or serve's --workspace).
        if spec.workspace is not None:
            check_spawn_workspace(spec.workspace, spec.executor, settings)
        elif (host := host_workspace(settings)) is not None and not spec.executor:
            check_directory(host, "the host's workspace")
        check_model(spec.base_url, spec.api_key_env, settings)
        check_executor_host(spec.executor, settings)
        check_budget(spec, settings)

    def __init__(self, address: str, spec: Any, state: Any) -> None:
        super().__init__(address, spec, state)
        self._chat = ConversationLog(CONVERSATION_LOG)

    def is_busy(self) -> bool:
        return self.state.terminal is None

    async def on_start(self, ctx: Context) -> None:
        await self._chat.load(ctx)
        state = self.state
        if not state.started:
            state.started = True
            state.workspace = self.spec.workspace or host_workspace(ctx.settings) or ""
            if self.spec.deadline is not None:
                state.deadline_at = ctx.now() + self.spec.deadline
                ctx.schedule(self.spec.deadline, "deadline", key="deadline")
            ctx.emit("task.started", {"prompt": self.spec.prompt, "deadline_at": state.deadline_at})
            if not state.workspace:
                self._settle(ctx, TaskOutcome("failed", error=NO_WORKSPACE_HELP))
                return
        elif state.deadline_at is not None and ctx.now() >= state.deadline_at:
            # It passed while no runtime ran: settle before anything calls the model.
            self._settle(ctx, TaskOutcome("deadline_exceeded"))
            return
        elif state.active is not None:
            ctx.emit("turn.resumed", turn_event(state.active))
        await adopt_orphans(ctx, self._job_tools(ctx))
        self._wake(ctx)

    async def on_stop(self, ctx: Context) -> None:
        await self._chat.load(ctx)  # on_start is skipped when it starts stopping
        if self.state.terminal is None:
            self._settle(ctx, TaskOutcome("cancelled", error="the task was stopped"))

    async def handle(self, ctx: Context, message: Message) -> None:
        if self.state.terminal is not None and message.type not in _OWN_TIMERS:
            if message.type == "message":
                self.state.messages.append(
                    TaskMessage(message_id_for(message.seq), status="unanswered")
                )
            reason = f"the task has settled ({self.state.terminal.status})"
            reject(ctx, message, reason)
        elif message.type == "message":
            if (follow_up := read_body(ctx, message, TextBody)) is None:
                return
            if not follow_up.text.strip():
                reject(ctx, message, "a message needs non-empty text: {'text': '...'}")
                return
            self._follow_up(ctx, TaskMessage(message_id_for(message.seq), follow_up.text),
                            follow_up.mode)  # fmt: skip
        elif message.type == "cancel":
            self._settle(ctx, TaskOutcome("cancelled"))
        elif message.type == "deadline":
            if self.state.terminal is None:
                self._settle(ctx, TaskOutcome("deadline_exceeded"))
        elif message.type == "approve":
            if (answer := read_body(ctx, message, ApproveBody)) is not None:
                self._approve(
                    ctx, message, answer.call_id, answer.approved, answer.reason, answer.scope
                )
        elif message.type == APPROVAL_DEADLINE:
            self._approval_deadline(ctx, message)
        elif message.type == "job.finished":
            body = message.body if isinstance(message.body, dict) else {}
            self._job_finished(ctx, message, body)
        elif message.type in BUDGET_MESSAGES:
            self._budget_message(ctx, message)
        elif message.type == OUTAGE_RETRY:
            self._retry_model(ctx, message)
        else:
            reject(ctx, message, f"a task does not handle {message.type!r} messages")

    def _follow_up(self, ctx: Context, entry: TaskMessage, mode: PromptMode) -> None:
        """A follow-up meets the running turn as its ``mode`` says; with none running,
        it is queued."""
        messages, turn = self.state.messages, self.state.active
        if turn is not None and mode == "steer":
            entry.status = "steering"
            messages.append(entry)
            announce_steer(ctx, turn, Steer(entry.id, entry.text))
            return
        at = len(messages)
        if turn is not None and mode == "interrupt":
            self._stop_turn(ctx, turn)
            ctx.emit("turn.interrupted", interrupted_by(turn, entry.id))
            self._unsteer(ctx)
            # Before every message still waiting: the runner starts its turn next.
            at = next((i for i, m in enumerate(messages) if m.status == "queued"), at)
        messages.insert(at, entry)
        ctx.emit("message.queued", {"message_id": entry.id, "text": entry.text})
        self._wake(ctx)

    def _take_steers(self, ctx: Context, turn: TurnJournal) -> list[dict[str, Any]]:
        steering = [m for m in self.state.messages if m.status == "steering"]
        items = steer_into(ctx, turn, self._chat, [Steer(m.id, m.text) for m in steering])
        for entry in steering:
            entry.status, entry.text = "running", ""  # from here on, the log holds it
        return items

    def _unsteer(self, ctx: Context) -> None:
        for entry in self.state.messages:
            if entry.status == "steering":
                entry.status = "queued"
                ctx.emit("message.queued", {"message_id": entry.id, "text": entry.text})

    # -- settling --------------------------------------------------------------

    def _settle(self, ctx: Context, outcome: TaskOutcome) -> None:
        """End the task in the next commit: the terminal, its event and the final status.

        A running turn is cancelled where it stands (the model stream closes, a
        running tool stops) and its open calls answered, as a session's cancel does;
        the task's running jobs are told to stop.
        """
        state = self.state
        if state.terminal is not None:
            return
        turn = state.active
        if turn is not None:
            self._stop_turn(ctx, turn)
        for entry in state.messages:
            if entry.status in ("queued", "steering", "running"):
                entry.status, entry.text = "unanswered", ""
        stop_jobs_of_ending_owner(ctx, state.jobs)
        if state.deadline_at is not None:
            ctx.cancel_timer("deadline")  # a due timer would wake a settled task for nothing
        state.terminal = outcome
        ctx.emit("task.settled", attrs.asdict(outcome))
        ctx.stop(outcome.status)

    # -- the runner ----------------------------------------------------------------

    def _start_next(self, ctx: Context) -> bool:
        """Start the next turn (the prompt, a message, the machine events) or settle;
        False, changing nothing, while only a running job is left to wait for."""
        state = self.state
        entry = next((m for m in state.messages if m.status == "queued"), None)
        count = 0  # machine events the turn takes
        if not state.asked:
            state.asked = True
            prompt, prompt_id = self.spec.prompt, PROMPT_ID
        elif entry is not None:
            prompt, prompt_id = entry.text, entry.id
            entry.status, entry.text = "running", ""  # from here on, the log holds it
        elif state.machine_events:
            prompt, prompt_id = "\n\n".join(state.machine_events), ""
            count, state.machine_events = len(state.machine_events), []
        elif any(r.status == "running" for r in state.jobs.values()):
            return False
        else:
            self._settle(ctx, TaskOutcome("succeeded", result=state.answer or ""))
            return True
        state.turns += 1
        turn, items = begin_turn(
            f"turn-{state.turns}",
            prompt,
            prompt_id=prompt_id,
            log_length=len(self._chat.items(ctx)),
        )
        self._chat.append(ctx, items)
        state.active = turn
        if not prompt_id:
            ctx.emit("machine_event.delivered", {**turn_event(turn), "count": count})
        ctx.emit("turn.started", {**turn_event(turn), "prompt": prompt})
        return True

    async def _run_turn(self, ctx: Context, turn: TurnJournal, client: ChatClient) -> None:
        try:
            answer = await self._drive(ctx, turn, client)
        except ModelError as exc:
            self._settle(ctx, TaskOutcome("failed", error=str(exc)))
            await ctx.checkpoint()
            return
        if answer is None:
            return  # settled by the handler that cancelled it
        state = self.state
        state.active = None
        state.answer = answer
        ctx.emit("turn.completed", {**turn_event(turn), "answer": answer})
        for entry in state.messages:
            if entry.status == "running":  # its own message, and those steered into it
                # drive_turn logged the answer last; the reply is read from there.
                entry.status, entry.reply_at = "answered", len(self._chat.items(ctx)) - 1
                ctx.emit("message.answered", {"message_id": entry.id, "result": answer})
        # The turn's end and what follows (the next turn, or settling) share one commit.
        self._start_next(ctx)
        await ctx.checkpoint()

    def _job_tools(self, ctx: Context) -> JobTools:
        return job_tools_for(
            ctx, self.state.jobs, background_on_timeout=True, executor=self.spec.executor
        )

    def _settings(self, ctx: Context) -> AgentSettings:
        spec = self.spec
        policy = ApprovalPolicy(default=spec.approve)
        deadlines = ApprovalDeadlines(ToolDeadline(spec.approval_timeout, spec.approval_default))
        return agent_settings(
            ctx, spec, workspace=self.state.workspace, policy=policy, deadlines=deadlines
        )
