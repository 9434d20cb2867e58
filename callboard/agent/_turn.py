"""Driving one turn through its actor: model calls, tool calls, approvals, checkpoints.

`drive_turn` runs inside an activity (``ctx.start_activity``). It asks the
journal (`_journal.next_step`) what comes next, does it, applies the result
to the journal, appends the conversation items and emits the events, and
commits with ``await ctx.checkpoint()`` before the next step. The journal
object is the one in the actor's snapshot, so each commit records exactly
how far the turn got.

Cancellation is the caller's: it runs `drive_turn` inside a
`trio.CancelScope` that a handler may cancel. That closes the model stream
(the HTTP request is abandoned) and stops a running tool; what the turn had
committed stays, and the handler records the end of the turn with
`close_turn_records`. A runtime that shuts down cancels the activity the
same way and records nothing: the next activation takes the turn up again.

The owner takes part through two explicit arguments: ``jobs`` (its
`JobTools`, handed to every tool call) and ``before_model_call``, a hook
that may append messages to the conversation (machine events: a background
job finished; prompts steered into the turn) right before the model is
asked; what it appends is committed before the model is asked, so it is
announced at once and read by the model once. The start of a model call is
the one moment that is always a step boundary (between an assistant message
with tool calls and its tool results nothing may stand). The hook is also
called when the model answers with text: if it appends anything, the turn
is not over, the model is asked again with it, and one reply covers every
event that arrived while the turn ran.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import attrs

from ..actors import Context
from ..errors import ModelError, SpecRefused
from ..llm import AssistantReply, ChatClient, Provider, StreamDelta
from ..tools import ApprovalPolicy, Confinement, tool_schemas
from ._approval_deadlines import ApprovalDeadlines, ask_approval, cancel_deadlines
from ._budgets import Budget, BudgetExceeded
from ._compaction import Compaction, PromptSize, ask_compacting, model_messages, summariser
from ._confinement import confined_workspace
from ._job_tools import JobTools
from ._journal import (
    CANCELLED_RESULT,
    INTERRUPTED_RESULT,
    AskModel,
    AwaitApproval,
    CallRecord,
    Refuse,
    ReportInterrupted,
    RequestApproval,
    RunTool,
    TurnJournal,
    close_turn,
    next_step,
    record_reply,
    record_result,
    record_started,
)
from ._tools import SESSION_TOOLS, run_tool

__all__ = [
    "MODEL_CALL_ATTEMPTS",
    "NO_MODEL_HELP",
    "AgentSettings",
    "ConversationLog",
    "ModelCallHook",
    "close_turn_records",
    "drive_turn",
]

NO_MODEL_HELP = (
    'no model is configured for this session: spawn it with "base_url" and "model" in '
    "its spec, or start the server with `callboard serve --model-url URL --model NAME` "
    "(which sets CALLBOARD_MODEL_URL and CALLBOARD_MODEL)"
)

MODEL_CALL_ATTEMPTS = 2
"""How often a turn asks the model for one answer when the call fails in a way
that may pass (each attempt has the client's own retries before the answer begins)."""

_LOG_PAGE = 1000

ModelCallHook = Callable[[TurnJournal], list[dict[str, Any]]]
"""Called right before a turn asks the model (and when the model answered with
text); returns the conversation items it appended, if any."""


@attrs.frozen
class AgentSettings:
    """What a turn needs besides its journal: the model, the tools and their policy.

    ``jobs_root`` is where ``shell_run`` keeps a running command's files: an
    actor's ``ctx.settings["jobs_dir"]``. ``provider`` is the model server's
    wire, for the client alone: the turn reads and writes one conversation
    shape whatever it is. ``deadlines`` say how long an approval waits.
    ``compaction`` says when the conversation is summarised to fit the
    model's context (``_compaction``).
    """

    workspace: Path
    base_url: str | None
    model: str | None
    system_prompt: str
    policy: ApprovalPolicy
    jobs_root: Path
    tools: tuple[str, ...] = SESSION_TOOLS
    provider: Provider = "openai"
    deadlines: ApprovalDeadlines = attrs.Factory(ApprovalDeadlines)
    compaction: Compaction = attrs.field(factory=Compaction)


@attrs.define(eq=False)
class ConversationLog:
    """The conversation log of one actor, with an in-memory copy of what it holds.

    Every append goes through here, so the copy is the committed log plus what
    this activation appended (and will commit). The copy is loaded from the
    log on first use; it is lost with the actor instance, never stored.
    """

    log: str = "conversation"
    _items: list[dict[str, Any]] | None = None

    async def load(self, ctx: Context) -> None:
        """Read the committed log into memory (once per activation, in ``on_start``)."""
        if self._items is None:
            loaded: list[dict[str, Any]] = []
            while True:
                page = await ctx.read_log(self.log, len(loaded), _LOG_PAGE)
                loaded.extend(page)
                if len(page) < _LOG_PAGE:
                    break
            self._items = loaded

    def items(self, ctx: Context) -> list[dict[str, Any]]:
        """Everything in the conversation, in order (after `load`)."""
        if self._items is None:
            raise RuntimeError(f"the {self.log} log of {ctx.address} was read before load()")
        return self._items

    def append(self, ctx: Context, entries: Iterable[dict[str, Any]]) -> None:
        """Append ``entries`` to the log in the actor's next commit."""
        items = self.items(ctx)
        for entry in entries:
            ctx.append(self.log, entry)
            items.append(entry)


async def drive_turn(
    ctx: Context,
    turn: TurnJournal,
    settings: AgentSettings,
    chat: ConversationLog,
    client: ChatClient,
    wait_approval: Callable[[], Awaitable[None]],
    *,
    jobs: JobTools | None = None,
    before_model_call: ModelCallHook | None = None,
    approval_for: Callable[[str], str] | None = None,
    prompt_size: PromptSize | None = None,
    budget: Budget | None = None,
) -> str:
    """Drive ``turn`` until the model answers with text; return the answer.

    Every step is committed before the next begins, except the last: the
    final answer is recorded in the journal and the log (and announced as
    ``assistant.message``) but not committed, so that the caller ends the turn
    in the same commit. ``wait_approval`` returns once an ``approve`` message
    may have answered a pending call. ``jobs`` go to every tool call;
    ``before_model_call`` is the owner's hook (module docstring): what it
    appends after a text answer continues the turn. ``approval_for`` gives a
    tool's approval word, read at every call (the owner's tools allowed for
    the session); by default the policy's. ``prompt_size`` is the owner's
    record of the last request's size (in its snapshot), which compaction reads
    (``_compaction``); None estimates every request by its bytes. ``budget``
    admits each model and tool call and is charged in the commit of each
    (`_budgets`).

    Raises:
        ModelError: the model could not be asked (not configured, refused the
            request, or failed after the client's retries).
    """
    word = approval_for or settings.policy.for_tool
    while True:
        step = next_step(turn, word)
        if step is None:
            return turn.answer or ""
        if isinstance(step, AskModel):
            if budget is not None:
                await budget.admit(ctx, turn, "model")
            if before_model_call is not None and before_model_call(turn):
                # What joined the turn is recorded (and announced) before the model reads it.
                await ctx.checkpoint()
            began = time.monotonic()
            reply = await _ask_compacting(ctx, turn, settings, chat, client, prompt_size, budget)
            elapsed = time.monotonic() - began
            # A refusal comes instead of content: it is the answer the user sees.
            content = reply.content or reply.refusal
            chat.append(ctx, record_reply(turn, content, reply.tool_calls))
            if budget is not None:
                budget.charge(ctx, reply.usage, settings.model)  # in the answer's commit
            ctx.emit("assistant.message", _assistant_event(turn, reply, elapsed))
            if turn.phase == "answered":
                # Synchronous up to the caller's end of the turn: an event that
                # arrives later finds the turn over and starts its own.
                if before_model_call is None or not before_model_call(turn):
                    return turn.answer or ""
                _reopen(turn)
                await ctx.checkpoint()  # the answer and what came after it, before asking again
        elif isinstance(step, RunTool):
            call = step.call
            if budget is not None:
                try:
                    await budget.admit(ctx, turn, "tool")
                except BudgetExceeded:
                    chat.append(ctx, close_turn(turn))  # each call gets its answer
                    raise
                budget.count_tool()  # in the commit that records it as started
            record_started(turn, call.id)
            ctx.emit("tool.started", _call_event(turn, call.id, call.name, call.arguments))
            await ctx.checkpoint()  # recorded as started before it runs
            # Checked again at every use, resolved: a directory under a root may have
            # been swapped for a link to elsewhere since the spawn checked its path.
            try:
                workspace = confined_workspace(settings.workspace, ctx.settings)
            except SpecRefused as refused:
                result, status = f"error: {refused}", "error"
            else:
                result, status = await run_tool(
                    call.name,
                    call.arguments,
                    workspace=workspace,
                    offered=settings.tools,
                    owner=ctx.address,
                    jobs_root=settings.jobs_root,
                    confinement=Confinement.from_settings(ctx.settings),
                    jobs=jobs,
                )
            _record(ctx, turn, chat, call, result, status)
        elif isinstance(step, Refuse):
            _record(ctx, turn, chat, step.call, step.reason, "refused")
        elif isinstance(step, ReportInterrupted):
            _record(ctx, turn, chat, step.call, INTERRUPTED_RESULT, "interrupted", cut=True)
        elif isinstance(step, RequestApproval):
            call = step.call
            deadline = ask_approval(ctx, turn, call, settings.deadlines)
            asked = _call_event(turn, call.id, call.name, call.arguments)
            ctx.emit("approval.requested", {**asked, **deadline})
        elif isinstance(step, AwaitApproval):
            await wait_approval()
            continue
        await ctx.checkpoint()


def close_turn_records(
    ctx: Context, turn: TurnJournal, chat: ConversationLog, result: str = CANCELLED_RESULT
) -> None:
    """End ``turn`` where it stands: answer its open calls with ``result``.

    For a handler that cancels a turn (or an actor that will not continue one
    after a restart); the caller emits the turn's end and commits. A call that
    had started is announced as finished, so a client showing it running
    sees it end. The deadlines of its calls still waiting for approval go.
    """
    cancel_deadlines(ctx, turn)
    started = {c.id for c in turn.calls if c.status == "started"}
    open_calls = [(c.id, c.name) for c in turn.calls if not c.finished]
    chat.append(ctx, close_turn(turn, result))
    for call_id, name in open_calls:
        if call_id in started:
            ctx.emit("tool.finished", _finished_event(turn, call_id, name, result, "interrupted"))


def _reopen(turn: TurnJournal) -> None:
    """The model answered with text, and messages came after it: ask it again."""
    turn.phase = "model"
    turn.answer = None


def _record(
    ctx: Context,
    turn: TurnJournal,
    chat: ConversationLog,
    call: CallRecord,
    result: str,
    status: str,
    *,
    cut: bool = False,
) -> None:
    """Record what the model is told about ``call`` and announce it as ``tool.finished``."""
    chat.append(ctx, record_result(turn, call.id, result, interrupted=cut))
    ctx.emit("tool.finished", _finished_event(turn, call.id, call.name, result, status))


async def _ask_compacting(
    ctx: Context,
    turn: TurnJournal,
    settings: AgentSettings,
    chat: ConversationLog,
    client: ChatClient,
    prompt_size: PromptSize | None,
    budget: Budget | None,
) -> AssistantReply:
    """Ask the model, compacting the conversation first or after an overflow (``_compaction``).

    The summarising call is charged to ``budget`` like any model answer, in the
    commit of the checkpoint it makes (a crash before it charges nothing).
    """
    if not settings.base_url or not settings.model:
        raise ModelError(NO_MODEL_HELP, retryable=False)
    summarise = summariser(client, base_url=settings.base_url, model=settings.model)

    async def charged(messages: list[dict[str, Any]]) -> AssistantReply:
        reply = await summarise(messages)
        if budget is not None:
            budget.charge(ctx, reply.usage, settings.model)
        return reply

    return await ask_compacting(
        ctx, turn, chat, PromptSize() if prompt_size is None else prompt_size,
        settings.compaction, charged,
        lambda: _ask_model(ctx, turn, settings, chat, client),
        system_prompt=settings.system_prompt, tools=tool_schemas(settings.tools),
    )  # fmt: skip


async def _ask_model(
    ctx: Context,
    turn: TurnJournal,
    settings: AgentSettings,
    chat: ConversationLog,
    client: ChatClient,
) -> AssistantReply:
    assert settings.base_url and settings.model  # checked by _ask_compacting
    turn_id = turn.turn_id

    def on_delta(text: str) -> None:
        ctx.emit("turn.delta", {"turn_id": turn_id, "text": text}, ephemeral=True)

    def on_stream_delta(delta: StreamDelta) -> None:
        # The model's thinking, shown apart from its answer and never sent back.
        if delta.kind == "reasoning":
            ctx.emit("turn.reasoning", {"turn_id": turn_id, "text": delta.text}, ephemeral=True)

    attempt = 1
    while True:
        try:
            return await client.stream_chat(
                base_url=settings.base_url,
                model=settings.model,
                messages=model_messages(settings.system_prompt, chat.items(ctx)),
                tools=tool_schemas(settings.tools),
                on_delta=on_delta,
                on_stream_delta=on_stream_delta,
            )
        except ModelError as exc:
            # The client retries only until the answer begins; a stream broken
            # after that is asked again here, and the client told to drop the
            # text it was shown (``turn.retrying``).
            if not exc.retryable or attempt >= MODEL_CALL_ATTEMPTS:
                raise
            retrying = {"turn_id": turn_id, "attempt": attempt, "error": str(exc)}
            ctx.emit("turn.retrying", retrying, ephemeral=True)
            attempt += 1


def _assistant_event(turn: TurnJournal, reply: AssistantReply, elapsed: float) -> dict[str, Any]:
    event = {
        "turn_id": turn.turn_id,
        "content": reply.content or reply.refusal,
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in turn.calls],
        "finish_reason": reply.finish_reason,
        "usage": reply.usage,
        # Seconds from asking the model to its whole answer, its retries included.
        "elapsed": round(elapsed, 6),
    }
    if reply.refusal:
        event["refusal"] = reply.refusal  # the model declined: say so, beside the text
    if reply.reasoning:
        event["reasoning"] = reply.reasoning  # kept in the event, not in the conversation
    return event


def _call_event(turn: TurnJournal, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"turn_id": turn.turn_id, "call_id": call_id, "name": name, "arguments": arguments}


def _finished_event(
    turn: TurnJournal, call_id: str, name: str, result: str, status: str
) -> dict[str, Any]:
    return {
        "turn_id": turn.turn_id,
        "call_id": call_id,
        "name": name,
        "status": status,
        "result": result,
    }
