"""The ``session`` kind: an interactive agent with a conversation and a prompt queue.

Handlers stay short; turns run in one activity, the *runner*, which takes
the prompt at the front of the queue, runs its turn (`drive_turn`), ends
it, and goes on while the queue has prompts and the session is not paused.
Handlers keep running while a turn runs: a new prompt is queued, ``pause``
holds the queue after the running turn, ``cancel`` cancels the turn's scope
and records its end in the handler's own commit, ``approve`` answers a
pending approval and wakes the runner. A prompt's ``mode`` may instead steer
it into the running turn or interrupt that turn (``_steer``).

Background jobs: the session keeps its jobs in its
state (``_job_tools``). A job's ``job.finished`` is a *machine event*: it
waits in ``machine_events`` until a model call takes it. An idle session
starts a turn for it (every event waiting then goes into that one turn, so
two jobs finishing at once start one reply); a busy one hands it to the
running turn at its next model call (the ``before_model_call`` hook of
`drive_turn`), or, when the model has just answered with text, continues
that turn with them instead of ending it.

Recorded before announced, for free: every event goes through the commit
that holds the change it announces. So a dequeued prompt is recorded as the
active turn (with its prompt appended to the conversation) in the commit
that carries ``queue.dequeued`` and ``turn.started``, and the turn is
cleared in the commit that carries its ``turn.completed`` (or ``cancelled``,
``failed``). A dequeue whose commit fails never happened: the actor crashes,
restarts from the snapshot before it, and the prompt is still at the front.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ..actors import Context
from ..errors import ModelError
from ..llm import ChatClient
from ..mailbox import Message
from ..tools import DEFAULT_APPROVAL_POLICY
from ..views import PromptMode
from ._approval_deadlines import APPROVAL_DEADLINE, read_approvals
from ._bodies import ApproveBody, CancelBody, QueueMoveBody, QueueRemoveBody, TextBody, read_body
from ._budgets import BUDGET_MESSAGES, BudgetState, check_budget
from ._compaction import PromptSize
from ._confinement import check_executor_host, check_model, check_spawn_workspace
from ._job_owner import adopt_orphans, job_tools_for, stop_jobs_of_ending_owner
from ._job_tools import JobRecord, JobTools
from ._journal import INTERRUPTED_RESULT, TurnJournal, begin_turn
from ._outage import OUTAGE_RETRY, waiting
from ._session_spec import DEFAULT_SYSTEM_PROMPT, SessionSpec
from ._steer import Steer, announce_steer, interrupted_by, steer_into
from ._turn import AgentSettings, ConversationLog, close_turn_records
from ._turn_runner import TurnRunner, agent_settings, reject, turn_event

__all__ = ["DEFAULT_SYSTEM_PROMPT", "QueuedPrompt", "Session", "SessionSpec", "SessionState"]


@attrs.define
class QueuedPrompt:
    """A prompt waiting in the queue."""

    id: str
    text: str


@attrs.define
class SessionState:
    """The snapshot: the queue, whether it is held, the running turn's journal, the
    session's background jobs, the machine events no model call has taken yet and
    the prompts steered into the running turn that it has not taken yet (``_steer``)."""

    queue: list[QueuedPrompt] = attrs.Factory(list)
    paused: bool = False
    active: TurnJournal | None = None
    prompts: int = 0  # prompt ids issued so far
    turns: int = 0  # turn ids issued so far
    jobs: dict[str, JobRecord] = attrs.Factory(dict)
    machine_events: list[str] = attrs.Factory(list)
    steering: list[Steer] = attrs.Factory(list)
    allowed_tools: list[str] = attrs.Factory(list)  # approved for the rest of the session
    prompt_size: PromptSize = attrs.Factory(PromptSize)  # the last model request's (compaction)
    budget: BudgetState = attrs.Factory(BudgetState)  # usage and limits (`_budgets`)


class Session(TurnRunner):
    """An interactive agent session. See the module docstring.

    Messages: ``prompt`` (``{"text", "mode"}`` or a string; ``mode`` is ``queue``,
    ``steer`` or ``interrupt``, see ``_steer``), ``queue.remove`` (``{"id"}``),
    ``queue.move`` (``{"id", "to"}``), ``pause``, ``resume``, ``cancel``
    (optionally ``{"turn_id"}``), ``approve`` (``{"call_id", "approved", "reason",
    "scope"}``; ``approved`` defaults to true; the call ``budget`` answers a
    budget's ``ask``), ``raise_budget`` (new limits, `_budgets`), ``job.finished``
    from one of its jobs, and ``approval.deadline`` (its own timer).
    A message that cannot apply is answered with a ``message.rejected`` event
    saying why, and changes nothing.
    """

    kind = "session"
    state_type = SessionState
    spec_type = SessionSpec
    state: SessionState
    spec: SessionSpec

    @classmethod
    def check_spec(cls, spec: SessionSpec, settings: Mapping[str, Any]) -> None:
        check_spawn_workspace(spec.workspace, spec.executor, settings)
        check_model(spec.base_url, spec.api_key_env, settings)
        check_executor_host(spec.executor, settings)
        check_budget(spec, settings)

    def __init__(self, address: str, spec: Any, state: Any) -> None:
        super().__init__(address, spec, state)
        self._chat = ConversationLog()

    def is_busy(self) -> bool:
        waiting = bool(self.state.queue) or bool(self.state.machine_events)
        return self.state.active is not None or (waiting and not self.state.paused)

    async def on_start(self, ctx: Context) -> None:
        await self._chat.load(ctx)
        turn = self.state.active
        if turn is not None:
            # A turn parked through a model outage was cut off from nothing: it waits
            # on (and an activation by its own timer, after passivation, is no restart).
            if self.spec.on_restart == "interrupt" and not waiting(turn):
                close_turn_records(ctx, turn, self._chat, INTERRUPTED_RESULT)
                self.state.active = None
                ctx.emit("turn.interrupted", turn_event(turn, prompt=turn.prompt))
                self._unsteer(ctx)
                if not self.state.paused:
                    self.state.paused = True
                    ctx.emit("session.paused", {"reason": "a turn was interrupted by a restart"})
            else:
                ctx.emit("turn.resumed", turn_event(turn, prompt=turn.prompt))
        await adopt_orphans(ctx, self._job_tools(ctx))
        self._wake(ctx)

    async def on_stop(self, ctx: Context) -> None:
        await self._chat.load(ctx)  # on_start is skipped when it starts stopping
        turn = self.state.active
        if turn is not None:
            self._stop_turn(ctx, turn)
            ctx.emit("turn.cancelled", turn_event(turn, reason="the session was stopped"))
        # A stopped session takes no more messages: nothing would read its jobs' ends.
        stop_jobs_of_ending_owner(ctx, self.state.jobs)

    async def handle(self, ctx: Context, message: Message) -> None:
        if message.type == "prompt":
            if (prompt := read_body(ctx, message, TextBody)) is None:
                return
            if not prompt.text.strip():
                reject(ctx, message, "a prompt needs non-empty text: {'text': '...'}")
                return
            self._prompt(ctx, prompt.text, prompt.mode)
        elif message.type == "queue.remove":
            if (removal := read_body(ctx, message, QueueRemoveBody)) is not None:
                self._remove(ctx, message, removal.id)
        elif message.type == "queue.move":
            if (move := read_body(ctx, message, QueueMoveBody)) is not None:
                self._move(ctx, message, move.id, move.to)
        elif message.type == "pause":
            if not self.state.paused:
                self.state.paused = True
                ctx.emit("session.paused", {"reason": "asked"})
        elif message.type == "resume":
            if self.state.paused:
                self.state.paused = False
                ctx.emit("session.resumed", {})
            self._wake(ctx)
        elif message.type == "cancel":
            if (cancel := read_body(ctx, message, CancelBody)) is not None:
                self._cancel(ctx, message, cancel.turn_id)
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
            reject(ctx, message, f"a session does not handle {message.type!r} messages")

    # -- the queue ----------------------------------------------------------------

    def _prompt(self, ctx: Context, text: str, mode: PromptMode) -> None:
        """A prompt meets the running turn as its ``mode`` says; with none running, it is queued."""
        self.state.prompts += 1
        entry = QueuedPrompt(f"p{self.state.prompts}", text)
        turn = self.state.active
        if turn is None or mode == "queue":
            self._queue_at(ctx, len(self.state.queue), [entry])
        elif mode == "steer":
            steer = Steer(entry.id, text)
            self.state.steering.append(steer)
            announce_steer(ctx, turn, steer)
        else:
            self._stop_turn(ctx, turn)
            ctx.emit("turn.interrupted", interrupted_by(turn, entry.id))
            self._unsteer(ctx)
            self._queue_at(ctx, 0, [entry])  # first in line: the runner starts it next
        self._wake(ctx)

    def _queue_at(self, ctx: Context, position: int, entries: list[QueuedPrompt]) -> None:
        for at, entry in enumerate(entries, start=position):
            self.state.queue.insert(at, entry)
            ctx.emit("queue.enqueued", {"id": entry.id, "text": entry.text, "position": at})

    def _remove(self, ctx: Context, message: Message, prompt_id: str) -> None:
        index = self._index(prompt_id)
        if index is None:
            reject(ctx, message, f"no queued prompt has the id {prompt_id!r}")
            return
        entry = self.state.queue.pop(index)
        ctx.emit("queue.removed", {"id": entry.id})

    def _move(self, ctx: Context, message: Message, prompt_id: str, to: int) -> None:
        index = self._index(prompt_id)
        if index is None:
            reject(ctx, message, f"no queued prompt has the id {prompt_id!r}")
            return
        entry = self.state.queue.pop(index)
        position = max(0, min(to, len(self.state.queue)))
        self.state.queue.insert(position, entry)
        ctx.emit("queue.moved", {"id": entry.id, "position": position})

    def _index(self, prompt_id: object) -> int | None:
        for index, entry in enumerate(self.state.queue):
            if entry.id == prompt_id:
                return index
        return None

    # -- background jobs -----------------------------------------------------------

    def _job_tools(self, ctx: Context) -> JobTools:
        return job_tools_for(
            ctx,
            self.state.jobs,
            background_on_timeout=self.spec.background_on_timeout,
            executor=self.spec.executor,
        )

    # -- the running turn ------------------------------------------------------------

    def _take_steers(self, ctx: Context, turn: TurnJournal) -> list[dict[str, Any]]:
        steers, self.state.steering = self.state.steering, []
        return steer_into(ctx, turn, self._chat, steers)

    def _unsteer(self, ctx: Context) -> None:
        steers, self.state.steering = self.state.steering, []
        self._queue_at(ctx, 0, [QueuedPrompt(s.id, s.text) for s in steers])

    def _cancel(self, ctx: Context, message: Message, turn_id: str | None) -> None:
        turn = self.state.active
        if turn is None or (turn_id is not None and turn_id != turn.turn_id):
            what = "no turn is running" if turn is None else f"turn {turn_id!r} is not running"
            reject(ctx, message, f"nothing to cancel: {what}")
            return
        self._stop_turn(ctx, turn)
        ctx.emit("turn.cancelled", turn_event(turn))
        self._unsteer(ctx)
        self._wake(ctx)  # a turn parked through an outage had no runner to go on

    def _start_next(self, ctx: Context) -> bool:
        """Start a turn: for the waiting machine events (all of them), else the next
        prompt; False while the queue is held or nothing waits."""
        if self.state.paused or not (self.state.queue or self.state.machine_events):
            return False
        events, self.state.machine_events = self.state.machine_events, []
        entry = None if events else self.state.queue.pop(0)
        self.state.turns += 1
        turn, items = begin_turn(
            f"turn-{self.state.turns}",
            "\n\n".join(events) if entry is None else entry.text,
            prompt_id="" if entry is None else entry.id,
            log_length=len(self._chat.items(ctx)),
        )
        self._chat.append(ctx, items)
        self.state.active = turn
        self._budget.start_turn(ctx, turn)
        if entry is not None:
            ctx.emit("queue.dequeued", {"id": entry.id, "turn_id": turn.turn_id})
        else:
            ctx.emit("machine_event.delivered", {**turn_event(turn), "count": len(events)})
        ctx.emit("turn.started", turn_event(turn, prompt=turn.prompt))
        return True

    async def _run_turn(self, ctx: Context, turn: TurnJournal, client: ChatClient) -> None:
        try:
            answer = await self._drive(ctx, turn, client)
        except ModelError as exc:
            self.state.active = None
            error = {"error": str(exc), "retryable": exc.retryable, "status": exc.status}
            ctx.emit("turn.failed", {**turn_event(turn), **error})
            self._unsteer(ctx)
            await ctx.checkpoint()
            return
        if answer is None:
            return  # the cancel was recorded by the handler that cancelled it
        self.state.active = None
        ctx.emit("turn.completed", {**turn_event(turn), "answer": answer})
        await ctx.checkpoint()

    def _settings(self, ctx: Context) -> AgentSettings:
        spec = self.spec
        policy, deadlines = read_approvals(
            spec.approvals, spec.approval_timeout, spec.approval_default
        )
        return agent_settings(
            ctx, spec, workspace=spec.workspace, policy=policy or DEFAULT_APPROVAL_POLICY,
            deadlines=deadlines,
        )  # fmt: skip
