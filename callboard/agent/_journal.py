"""The turn journal: what a turn has done so far, as a pure state machine (no trio).

A turn is: ask the model; run each tool call it asked for; ask it again with
the results; ... until it answers with text. The journal records where a turn
stands so that a restarted actor can take it up again without repeating a
side effect and without asking the model the same question twice:

- ``TurnJournal`` lives in the actor's snapshot: the turn's id and prompt,
  its phase, and the tool calls of the last assistant message, each with its
  status (``pending`` → ``started`` → ``done``, or ``interrupted``), its
  approval and its result.
- The conversation itself (user prompt, assistant messages with their tool
  calls, tool results) goes to an append-only log, one OpenAI message per
  item, appended in the same commit that records the step. A commit's size
  does not grow with the conversation's length.

The functions here change a journal and return the log items that belong in
the same commit; the driver (``_turn``) appends them, emits the events and
commits. The rules:

- a turn whose prompt was recorded but nothing after it asks the model again,
  with the prompt in the conversation exactly once (it was logged once);
- a finished model response is recorded before any of its calls runs;
- a call is recorded as ``started`` (a commit) before it runs, and its result
  (a commit) right after; a call found ``started`` with no result when the
  turn is taken up again ran into a crash: it is reported to the model as
  interrupted and is never run a second time;
- a turn continued after a crash mid tool round runs only the calls that
  have no result yet, and then asks the model with the recorded results.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, Protocol

import attrs

__all__ = [
    "CANCELLED_RESULT",
    "INTERRUPTED_RESULT",
    "NOT_RUN_RESULT",
    "AskModel",
    "AwaitApproval",
    "CallRecord",
    "ModelOutage",
    "Refuse",
    "ReportInterrupted",
    "RequestApproval",
    "RunTool",
    "Step",
    "TurnJournal",
    "begin_turn",
    "close_turn",
    "conversation",
    "denial",
    "next_step",
    "pending_call",
    "record_reply",
    "record_result",
    "record_started",
]

CallStatus = Literal["pending", "started", "done", "interrupted"]
"""``pending``: not run yet; ``started``: recorded before running, no result yet;
``done``: its result is recorded; ``interrupted``: it was cut off (by a crash or a
cancel) and the model was told so instead of a result."""

ApprovalMark = Literal["none", "asked", "approved", "denied"]
"""Where the call's approval stands: not needed or not asked yet, asked and
waiting, or answered."""

OnExpiry = Literal["deny", "approve"]
"""What an approval that nobody answered before its deadline becomes."""

Phase = Literal["model", "tools", "answered"]
"""``model``: the model is (to be) asked; ``tools``: the calls of its last answer
are being run; ``answered``: it answered with text and the turn is over."""

INTERRUPTED_RESULT = (
    "interrupted: the runtime stopped while this tool call was running, so it may or "
    "may not have taken effect. It was not run again; check its effect before repeating it."
)
CANCELLED_RESULT = "cancelled: the user cancelled the turn before this tool call finished."
NOT_RUN_RESULT = "not run: the turn ended before this tool call could run."


class CallLike(Protocol):
    """A tool call as the model client returns it (``callboard.llm.ToolCall``)."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def arguments(self) -> str: ...


@attrs.define
class CallRecord:
    """One tool call of the last assistant message and how far it got."""

    id: str
    name: str
    arguments: str
    status: CallStatus = "pending"
    approval: ApprovalMark = "none"
    result: str | None = None
    asked_at: float | None = None
    """When the approval was asked (wall time); None when it never was."""
    reason: str | None = None
    """What the person said with their answer; it reaches the model with a denial."""
    deadline_at: float | None = None
    """When an unanswered approval expires (wall time); None: it waits for ever."""
    on_expiry: OnExpiry = "deny"
    """What the approval becomes at ``deadline_at`` if nobody answered."""
    expired: bool = False
    """The answer is ``on_expiry``'s, given by the deadline and not by a person."""

    @property
    def finished(self) -> bool:
        """Whether the model will be told something for it (a result or why there is none)."""
        return self.status in ("done", "interrupted")


@attrs.define
class ModelOutage:
    """The model server could not be reached: the turn is parked until ``retry_at``.

    ``since`` is when the first ask of this outage failed (wall time),
    ``failures`` how many asks have failed since, ``error`` and ``status`` the
    last failure's; ``waiting`` holds until the retry timer fires (``_outage``).
    """

    since: float
    failures: int
    retry_at: float
    error: str
    status: int | None = None
    waiting: bool = True


@attrs.define
class TurnJournal:
    """Where one turn stands; kept in the actor's snapshot while the turn runs.

    ``responses`` counts the model answers recorded in this turn, and
    ``started_at`` is the length of the conversation log before the prompt
    (where this turn's messages begin).
    """

    turn_id: str
    prompt: str
    prompt_id: str = ""
    phase: Phase = "model"
    calls: list[CallRecord] = attrs.Factory(list)
    responses: int = 0
    started_at: int = 0
    answer: str | None = None
    outage: ModelOutage | None = None
    """Set while the turn is parked through a model outage (``_outage``)."""

    def call(self, call_id: str) -> CallRecord:
        """The call ``call_id`` of the current tool round; KeyError if there is none."""
        for record in self.calls:
            if record.id == call_id:
                return record
        raise KeyError(f"turn {self.turn_id} has no tool call {call_id!r} in its current round")

    def awaiting_approval(self) -> list[CallRecord]:
        """The calls asked about and not answered yet."""
        return [c for c in self.calls if c.approval == "asked" and c.status == "pending"]


# -- what the driver does next ------------------------------------------------


@attrs.frozen
class AskModel:
    """Send the conversation to the model and record its answer."""


@attrs.frozen
class RunTool:
    """Record ``call`` as started (commit), run it, record its result (commit)."""

    call: CallRecord


@attrs.frozen
class RequestApproval:
    """Record that ``call`` waits for a person (commit) and announce it."""

    call: CallRecord


@attrs.frozen
class AwaitApproval:
    """Wait until an ``approve`` message answers ``call``; the request is already recorded."""

    call: CallRecord


@attrs.frozen
class Refuse:
    """Record ``reason`` as the result of ``call`` without running it."""

    call: CallRecord
    reason: str


@attrs.frozen
class ReportInterrupted:
    """``call`` started and never got a result: tell the model, do not run it again."""

    call: CallRecord


Step = AskModel | RunTool | RequestApproval | AwaitApproval | Refuse | ReportInterrupted


def next_step(turn: TurnJournal, approval_for: Callable[[str], str]) -> Step | None:
    """What to do next in ``turn``; None once the model has answered with text.

    ``approval_for(tool_name)`` gives the policy word: ``always``, ``ask`` or
    ``never``. Calls are taken in the order the model sent them, because tool
    results must follow in that order.
    """
    if turn.phase == "answered":
        return None
    if turn.phase == "model":
        return AskModel()
    for call in turn.calls:
        if call.finished:
            continue
        if call.status == "started":
            return ReportInterrupted(call)
        if call.approval == "approved":
            return RunTool(call)
        if call.approval == "denied":
            return Refuse(call, denial(call))
        if call.approval == "asked":
            return AwaitApproval(call)
        policy = approval_for(call.name)
        if policy == "always":
            return RunTool(call)
        if policy == "never":
            return Refuse(call, f"refused: the approval policy here never allows {call.name}.")
        return RequestApproval(call)
    # Every call has its answer: the journal moves on when the last one is recorded.
    turn.phase = "model"
    return AskModel()


# -- transitions: each returns the log items of its commit ----------------------


def begin_turn(
    turn_id: str, prompt: str, *, prompt_id: str = "", log_length: int = 0
) -> tuple[TurnJournal, list[dict[str, Any]]]:
    """A new turn for ``prompt``, and the user message that records the prompt."""
    turn = TurnJournal(turn_id, prompt, prompt_id=prompt_id, started_at=log_length)
    return turn, [{"role": "user", "content": prompt}]


def record_reply(
    turn: TurnJournal, content: str, tool_calls: Sequence[CallLike] = ()
) -> list[dict[str, Any]]:
    """Record a finished model answer: text ends the turn, tool calls start a round.

    Call ids the model left empty or repeated are made unique
    (``call_<response>_<index>``), since results are matched to calls by id.
    """
    if turn.phase != "model":
        raise ValueError(f"turn {turn.turn_id} is not waiting for the model (phase {turn.phase})")
    turn.responses += 1
    turn.outage = None  # the model answered: an outage it was parked through is over
    seen: set[str] = set()
    calls: list[CallRecord] = []
    for index, call in enumerate(tool_calls):
        call_id = call.id
        if not call_id or call_id in seen:
            call_id = f"call_{turn.responses}_{index}"
        seen.add(call_id)
        calls.append(CallRecord(call_id, call.name, call.arguments))
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ]
        turn.calls = calls
        turn.phase = "tools"
    else:
        turn.calls = []
        turn.phase = "answered"
        turn.answer = content
        message["content"] = content
    return [message]


def denial(call: CallRecord) -> str:
    """What the model is told of a denied ``call``: that it was denied, and the
    person's reason when they gave one."""
    if call.expired:
        return (
            f"denied: nobody answered the approval request for this {call.name} call "
            "before its deadline, so it was not run."
        )
    said = f"denied: the user did not approve this {call.name} call."
    return f"{said} Their reason: {call.reason}" if call.reason else said


def record_started(turn: TurnJournal, call_id: str) -> None:
    """``call_id`` is about to run: commit this before running it."""
    call = pending_call(turn, call_id)
    call.status = "started"


def record_result(
    turn: TurnJournal, call_id: str, result: str, *, interrupted: bool = False
) -> list[dict[str, Any]]:
    """Record what the model is told about ``call_id``: its result, or why there is none.

    Once every call of the round has its answer, the turn goes back to the model.
    """
    call = turn.call(call_id)
    if call.finished:
        raise ValueError(f"tool call {call_id!r} of turn {turn.turn_id} already has its result")
    call.status = "interrupted" if interrupted else "done"
    call.result = result
    if all(c.finished for c in turn.calls):
        turn.phase = "model"
    return [{"role": "tool", "tool_call_id": call.id, "content": result}]


def close_turn(turn: TurnJournal, result: str = CANCELLED_RESULT) -> list[dict[str, Any]]:
    """End ``turn`` where it stands (cancelled or interrupted).

    Every call of the round without an answer is answered, so the conversation
    stays well formed (each tool call is followed by its result): one that had
    started with ``result``, one that never ran with ``NOT_RUN_RESULT``.
    """
    items: list[dict[str, Any]] = []
    if turn.phase == "tools":
        for call in turn.calls:
            if not call.finished:
                said = result if call.status == "started" else NOT_RUN_RESULT
                items += record_result(turn, call.id, said, interrupted=True)
    return items


def conversation(system_prompt: str, logged: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``messages`` of a model request: the system prompt, then the log."""
    messages: list[dict[str, Any]] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    messages.extend(logged)
    return messages


def pending_call(turn: TurnJournal, call_id: str) -> CallRecord:
    call = turn.call(call_id)
    if call.status != "pending":
        raise ValueError(
            f"tool call {call_id!r} of turn {turn.turn_id} is {call.status}, not pending"
        )
    return call
