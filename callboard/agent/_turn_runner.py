"""`TurnRunner`: the base of the agent kinds (``session``, ``task``) whose turns run in a runner.

A session and a task differ in what starts a turn and what follows its end;
how the turn runs is the same. One activity, the *runner*, runs the active
turn through `drive_turn` or asks the kind to start the next; a handler can
cancel the running turn through the scope kept on the actor, and an
``approve`` message answers a pending approval and wakes the turn waiting
for it; a job's ``job.finished`` is recorded alike, and an approval's
deadline (``_approval_deadlines``) too. The kind writes
`_start_next` and `_run_turn` (with `_drive` at its heart), `_settings`
(with `agent_settings`) and `_job_tools`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import trio

from ..actors import Actor, Context, Logs
from ..errors import ModelError
from ..llm import ChatClient, Provider, check_provider
from ..mailbox import Message
from ..tools import ApprovalPolicy
from ..views import PendingApproval
from ._approval_deadlines import (
    ApprovalDeadlines,
    Scope,
    allow_for_session,
    approval_for,
    cancel_deadline,
    deadline_fields,
    expire_approval,
)
from ._budgets import BUDGET_CALL_ID, Budget, budget_summary
from ._compaction import Compaction
from ._confinement import configured_model_url, jobs_dir, model_key, same_url
from ._job_owner import record_job_end, take_machine_events
from ._job_tools import JobTools
from ._journal import TurnJournal
from ._journal_approvals import answer_approval
from ._outage import client_attempts, forget, outage_policy, park, take_retry, waiting
from ._session_spec import SessionSpec
from ._summary import conversation_summary
from ._task_spec import RunSpec
from ._turn import AgentSettings, ConversationLog, close_turn_records, drive_turn

__all__ = ["TurnRunner", "agent_settings", "reject", "turn_event"]

_CLIENT_CLOSE_TIMEOUT = 5.0  # seconds to close the model client's connections


class TurnRunner(Actor):
    """An agent actor whose turns run in one activity, the runner, while `is_busy`.

    The state has ``active`` (the running turn's journal or None),
    ``machine_events``, ``jobs``, ``allowed_tools`` and ``prompt_size``
    (``_compaction``); ``_chat`` is set by the kind's ``__init__``.
    """

    _chat: ConversationLog

    @classmethod
    async def summarize(cls, state: Any, logs: Logs) -> dict[str, Any] | None:
        """The conversation's length, its last turn and the running one (`_summary`),
        and the budget: usage, limits and a breach (`_budgets`)."""
        return {**await conversation_summary(state, logs), "budget": budget_summary(state)}

    def __init__(self, address: str, spec: Any, state: Any) -> None:
        super().__init__(address, spec, state)
        self._runner = False
        self._scope: trio.CancelScope | None = None
        self._approvals = trio.Event()
        self._budget_of = Budget(spec, state.budget)

    @property
    def _budget(self) -> Budget:
        """The budget over the state's `BudgetState`: a new one once the state was
        replaced (live attach's ``set_state``), so that charges go to the new state."""
        if self._budget_of.state is not self.state.budget:
            self._budget_of = Budget(self.spec, self.state.budget)
        return self._budget_of

    # -- what the kind writes ------------------------------------------------------

    def _start_next(self, ctx: Context) -> bool:
        """Start the next turn, or end the work, for the runner's next commit;
        False, changing nothing, when there is nothing to do until a message comes."""
        raise NotImplementedError

    async def _run_turn(self, ctx: Context, turn: TurnJournal, client: ChatClient) -> None:
        """Run ``turn`` (`_drive`) and record its end."""
        raise NotImplementedError

    def _settings(self, ctx: Context) -> AgentSettings:
        raise NotImplementedError

    def _job_tools(self, ctx: Context) -> JobTools:
        raise NotImplementedError

    def _take_steers(self, ctx: Context, turn: TurnJournal) -> list[dict[str, Any]]:
        """Append the prompts steered into ``turn`` to its conversation (``_steer``)."""
        return []

    def _unsteer(self, ctx: Context) -> None:
        """The turn ended without taking its steers: hand them back as prompts (after
        the turn's end is emitted, in its commit)."""

    # -- the runner ------------------------------------------------------------------

    def _wake(self, ctx: Context) -> None:
        """Start the runner if there is work and none runs."""
        if self._runner or not self.is_busy():
            return
        self._runner = True
        ctx.start_activity(self._run, ctx, name="turns")

    async def _run(self, ctx: Context) -> None:
        # The key is the host's to choose: the server's own goes to the configured
        # model URL only, whatever URL the spec names (see _confinement).
        settings = self._settings(ctx)
        key = model_key(settings.base_url, self.spec.api_key_env, ctx.settings, settings.provider)
        client = ChatClient(
            api_key=key, key_from_env=False, provider=settings.provider,
            max_attempts=client_attempts(ctx.settings),
        )  # fmt: skip
        try:
            while self.is_busy():
                turn = self.state.active
                if turn is None:
                    if not self._start_next(ctx):
                        return
                    await ctx.checkpoint()
                    continue
                if waiting(turn):
                    return  # parked through a model outage: its timer wakes the runner
                await self._run_turn(ctx, turn, client)
        finally:
            self._runner = False
            # Shielded: the runner is often ending because the actor is being cancelled.
            with trio.move_on_after(_CLIENT_CLOSE_TIMEOUT, shield=True):
                await client.aclose()

    async def _drive(self, ctx: Context, turn: TurnJournal, client: ChatClient) -> str | None:
        """Drive ``turn`` to the model's answer; None when a handler ended the turn
        meanwhile (the handler recorded its end), or when the model server is down
        and the turn is parked until it is asked again (``_outage``, committed).

        Raises:
            ModelError: the model could not be asked, and the turn is still the
                runner's to end.
        """
        policy = outage_policy(self.spec, ctx.settings)

        def take_events(turn: TurnJournal) -> list[dict[str, Any]]:
            events = take_machine_events(ctx, self.state.machine_events, turn, self._chat)
            return events + self._take_steers(ctx, turn)

        answer, failure = "", None
        settings = self._settings(ctx)
        # Read at every call: an answer may allow a tool for the session meanwhile.
        word = approval_for(settings.policy, lambda: self.state.allowed_tools)
        with trio.CancelScope() as scope:
            self._scope = scope
            try:
                answer = await drive_turn(
                    ctx, turn, settings, self._chat, client, self._wait_approval,
                    jobs=self._job_tools(ctx), before_model_call=take_events, approval_for=word,
                    prompt_size=self.state.prompt_size, budget=self._budget,
                )  # fmt: skip
            except ModelError as exc:
                failure = exc
            finally:
                self._scope = None
        self._budget.turn_over(turn)
        if scope.cancelled_caught or self.state.active is not turn:
            return None
        if failure is not None:
            park(ctx, turn, failure, policy)  # raises when the turn is not to wait
            await ctx.checkpoint()
            return None
        return answer

    def _stop_turn(self, ctx: Context, turn: TurnJournal) -> None:
        """End the running ``turn`` in this handler's commit: cancel it where it stands
        (closing the model stream, stopping a running tool) and answer its open calls."""
        if self._scope is not None:
            self._scope.cancel()
        forget(ctx, turn)  # a parked turn's retry timer
        close_turn_records(ctx, turn, self._chat)
        self._budget.turn_over(turn)
        self.state.active = None

    def _job_finished(self, ctx: Context, message: Message, body: dict[str, Any]) -> None:
        """Record the end of one of the actor's jobs (a ``job.finished`` message)."""
        refused = record_job_end(
            ctx, self.state.jobs, self.state.machine_events,
            busy=self.state.active is not None, sender=message.sender, body=body,
        )  # fmt: skip
        if refused is not None:
            reject(ctx, message, refused)
        self._wake(ctx)

    # -- budgets -----------------------------------------------------------------------

    def _budget_message(self, ctx: Context, message: Message) -> None:
        """``raise_budget``, or the running turn's deadline timer (`_budgets`)."""
        if message.type == "raise_budget":
            refused = self._budget.raise_limits(ctx, message)
            if refused is not None:
                reject(ctx, message, refused)
            return
        turn = self.state.active
        error = self._budget.deadline_passed(ctx, message, turn)
        if error is not None and turn is not None:
            self._stop_turn(ctx, turn)
            failed = {"error": error, "retryable": False, "status": None}
            ctx.emit("turn.failed", {**turn_event(turn), **failed})

    def _retry_model(self, ctx: Context, message: Message) -> None:
        """The retry timer of a turn parked through a model outage fired (`OUTAGE_RETRY`)."""
        if take_retry(self.state.active, message):
            self._wake(ctx)

    # -- approvals -------------------------------------------------------------------

    def pending_approvals(self) -> list[PendingApproval]:
        """The calls of the running turn that wait for a person's answer (see `Actor`)."""
        turn = self.state.active
        if turn is None:
            return []
        return [
            PendingApproval(
                self.address, c.id, c.name, _arguments(c.arguments), c.asked_at,
                c.deadline_at, c.on_expiry if c.deadline_at is not None else None,
            )
            for c in turn.awaiting_approval()
        ] + self._budget.pending(self.address)  # fmt: skip

    def waits_for_person(self) -> bool:
        """A call waits for approval, or a budget holds the turn for a person to raise it."""
        breach = self._budget.state.breach
        return super().waits_for_person() or (breach is not None and breach.policy == "pause")

    def _approve(
        self, ctx: Context, message: Message, call_id: object, approved: object,
        reason: str | None = None, scope: Scope = "call",
    ) -> None:  # fmt: skip
        """Record a person's answer; ``scope`` ``session`` also allows the tool for
        the rest of the session."""
        if call_id is None and [p.call_id for p in self.pending_approvals()] == [BUDGET_CALL_ID]:
            call_id = BUDGET_CALL_ID  # the one answer waiting, as for a tool call
        if call_id == BUDGET_CALL_ID and isinstance(approved, bool):
            if scope == "session":
                reject(ctx, message, "'scope': 'session' allows a tool for the rest of the "
                       "session, and the call 'budget' is no tool: each raise is answered "
                       "by itself (or set the limits with raise_budget)")  # fmt: skip
                return
            refused = self._budget.answer(ctx, approved, reason)
            if refused is not None:
                reject(ctx, message, refused)
            return
        turn = self.state.active
        if scope == "session" and approved is not True:
            reject(ctx, message, "'scope': 'session' allows a tool for the rest of the "
                   "session, so it goes only with 'approved': true")  # fmt: skip
            return
        try:
            answered = answer_approval(turn, call_id, approved, reason)
        except ValueError as refused:
            reject(ctx, message, str(refused))
            return
        assert turn is not None
        call = turn.call(answered)
        cancel_deadline(ctx, turn, call)
        answer: dict[str, Any] = {"call_id": answered, "approved": approved}
        if reason is not None:
            answer["reason"] = reason
        if scope == "session":
            allow_for_session(self.state.allowed_tools, call.name)
            answer["scope"] = "session"
        ctx.emit("approval.answered", {**turn_event(turn), **answer})
        self._wake_approvals()

    def _approval_deadline(self, ctx: Context, message: Message) -> None:
        """An approval's deadline passed (its timer, sent by the actor to itself):
        the call takes its ``on_expiry`` answer unless someone answered first."""
        if message.sender != ctx.address:
            reject(ctx, message, f"{message.type!r} is the actor's own timer; answer an "
                   "approval with an 'approve' message")  # fmt: skip
            return
        turn = self.state.active
        call = expire_approval(turn, message.body)
        if call is None or turn is None:
            return  # answered, or its turn ended, before the timer was handled
        expired = {"call_id": call.id, "name": call.name, "approved": call.approval == "approved"}
        ctx.emit("approval.expired", {**turn_event(turn), **expired, **deadline_fields(call)})
        self._wake_approvals()

    def _wake_approvals(self) -> None:
        # A fresh event for the next approval; the turn waiting on this one wakes.
        self._approvals.set()
        self._approvals = trio.Event()

    async def _wait_approval(self) -> None:
        await self._approvals.wait()


def _arguments(text: str) -> Any:
    """A call's arguments as the model sent them: the JSON they spell, or the
    text itself when it is no JSON (a model may send broken arguments)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def agent_settings(
    ctx: Context, spec: SessionSpec | RunSpec, *, workspace: str, policy: ApprovalPolicy,
    deadlines: ApprovalDeadlines | None = None,
) -> AgentSettings:  # fmt: skip
    """The settings of a turn of the actor at ``ctx``: the model is the spec's, else
    the runtime's settings, else ``$CALLBOARD_MODEL_URL`` and ``$CALLBOARD_MODEL``.

    The provider goes with the URL: the spec's, else, for the configured model
    URL, the runtime's ``provider`` setting (else ``$CALLBOARD_PROVIDER``), else
    ``openai``. So does the context window: the spec's ``context_window``,
    else, for the configured model URL, the runtime's ``context_window`` setting.
    """
    host = ctx.settings
    base_url = spec.base_url or configured_model_url(host)
    return AgentSettings(
        workspace=Path(workspace),
        base_url=base_url,
        model=spec.model or host.get("model") or os.environ.get("CALLBOARD_MODEL") or None,
        system_prompt=spec.system_prompt,
        policy=policy,
        jobs_root=jobs_dir(host),
        provider=_provider(spec.provider, base_url, host),
        deadlines=deadlines or ApprovalDeadlines(),
        compaction=Compaction(
            _context_window(spec.context_window, base_url, host), spec.keep_turns
        ),
    )


def _context_window(named: int | None, base_url: str | None, host: Mapping[str, Any]) -> int | None:
    if named is not None:
        return named
    configured = configured_model_url(host)
    window = host.get("context_window")
    if base_url is None or (configured is not None and same_url(base_url, configured)):
        return window if type(window) is int and window > 0 else None
    return None


def _provider(named: str | None, base_url: str | None, host: Mapping[str, Any]) -> Provider:
    if named is not None:
        return check_provider(named)
    configured = configured_model_url(host)
    if base_url is None or (configured is not None and same_url(base_url, configured)):
        return check_provider(
            host.get("provider") or os.environ.get("CALLBOARD_PROVIDER") or "openai"
        )
    return "openai"


def turn_event(turn: TurnJournal, **extra: Any) -> dict[str, Any]:
    """The payload of an event about ``turn``: its ids, then ``extra``."""
    return {"turn_id": turn.turn_id, "prompt_id": turn.prompt_id, **extra}


def reject(ctx: Context, message: Message, reason: str) -> None:
    """Answer ``message`` with a ``message.rejected`` event saying why it changed nothing."""
    ctx.emit("message.rejected", {"seq": message.seq, "type": message.type, "reason": reason})
