"""Budgets: what a session or task has spent, the limits on it, and what a breach does.

The spec's limits (``callboard.views._budget_spec``) are copied into the
snapshot (`BudgetState.limits`) on the first activation, so that a
``raise_budget`` message can change them for good. What the actor spent
(`Usage`) is charged from the model's ``usage`` in the same commit as the
model's answer (`Budget.charge`, called by ``drive_turn`` before that
commit; a compaction's summarising call is charged the same way, in the
commit of its checkpoint), and a tool call is counted in the commit that
records it as started. A crash before either commit leaves nothing charged, and the step
is taken again and charged once; after either, the commit is restored and
never charged again. (A model answer cut off by a crash before its commit
was billed by the provider but is not counted here: nothing recorded it.)

A turn asks `Budget.admit` before each model call and each tool call.
Over a limit (``used >= allowed``), the breach is recorded in the snapshot
and announced once (``budget.exceeded``), and the policy acts:

- ``pause``: the turn waits, durably, for ``raise_budget`` (new limits);
- ``ask``: the same, and the breach is listed among the approvals as the
  call ``budget``; ``approve`` grants the limit's allowance once more,
  denying it fails the turn;
- ``fail``: `BudgetExceeded` (a `ModelError` that is not retryable), so a
  session's turn ends ``turn.failed`` and a task settles ``failed``, each
  with the budget error.

A restarted actor finds the recorded breach and waits again without a second
``budget.exceeded``. A breach belongs to the turn it holds: a turn that ends
otherwise (cancelled, stopped) takes it along, and the next turn over a limit
records and announces its own. A session's ``turn_deadline`` is a durable timer set when
the turn starts (a later turn's timer replaces it; one that fires for a turn
already over is ignored); when it fires the policy acts the same way: ``fail``
ends the turn at once, ``pause`` and ``ask`` hold it at its next step.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal, Protocol

import attrs
import trio

from ..actors import Context
from ..codec import JSONShapeError, structure_json
from ..errors import ModelError, SpecRefused
from ..mailbox import Message
from ..views import LIMIT_NAMES, BudgetPolicy, PendingApproval
from ._budget_state import Breach, BudgetState, Limits, RaiseBudgetBody, Usage
from ._journal import TurnJournal

__all__ = [
    "BUDGET_CALL_ID",
    "BUDGET_MESSAGES",
    "Breach",
    "Budget",
    "BudgetExceeded",
    "BudgetState",
    "Limits",
    "RaiseBudgetBody",
    "Usage",
    "budget_summary",
    "check_budget",
]

BUDGET_CALL_ID = "budget"
"""The ``call_id`` of an ``ask`` breach among the approvals (``approve`` answers it)."""

TURN_DEADLINE = "budget.turn_deadline"
"""The type of a session's own timer at the end of a turn's time."""

BUDGET_MESSAGES = ("raise_budget", TURN_DEADLINE)
"""The messages a session or task hands to its `Budget`."""

_TIMER_KEY = "turn-deadline"

Step = Literal["model", "tool"]


class BudgetExceeded(ModelError):
    """A limit of the actor's budget was reached and its policy fails the turn."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (str(self),)


class BudgetSpec(Protocol):
    """The budget fields a session's and a task's spec share."""

    @property
    def max_tokens(self) -> int | None: ...
    @property
    def max_cost(self) -> float | None: ...
    @property
    def max_model_calls(self) -> int | None: ...
    @property
    def max_tool_calls(self) -> int | None: ...
    @property
    def prices(self) -> dict[str, Any] | None: ...
    @property
    def on_budget(self) -> BudgetPolicy: ...
    @property
    def model(self) -> str | None: ...


def check_budget(spec: BudgetSpec, settings: Mapping[str, Any]) -> None:
    """Refuse, at spawn, a ``max_cost`` that no price would ever charge."""
    if spec.max_cost is None:
        return
    model = _model_in_use(spec, settings)
    if model is None:
        raise SpecRefused(
            "'max_cost' needs to know the model to price: give 'model' in the spec "
            "or start the server with --model"
        )
    if model not in _prices(spec, settings):
        raise SpecRefused(
            f"'max_cost' needs a price for the model {model!r}: give 'prices': "
            f"{{{model!r}: {{'input': PRICE, 'output': PRICE}}}} (per token) in the spec, "
            "or start the server with --prices FILE naming it"
        )


class Budget:
    """The budget of one actor instance, over its snapshot's `BudgetState`."""

    def __init__(self, spec: BudgetSpec, state: BudgetState) -> None:
        self._spec = spec
        self.state = state
        # Only a session's spec has a turn deadline.
        self._turn_deadline: float | None = getattr(spec, "turn_deadline", None)
        if state.limits is None:
            state.limits = Limits(
                spec.max_tokens, spec.max_cost, spec.max_model_calls, spec.max_tool_calls,
                self._turn_deadline,
            )  # fmt: skip
        self._changed = trio.Event()

    @property
    def limits(self) -> Limits:
        assert self.state.limits is not None  # set in __init__
        return self.state.limits

    # -- accounting (in the commit of the step it counts) ------------------------------

    def charge(self, ctx: Context, usage: Mapping[str, Any] | None, model: str | None) -> None:
        """Count one model answer and the tokens its ``usage`` reports (none if absent)."""
        spent = self.state.usage
        spent.model_calls += 1
        taken, given = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
        spent.input_tokens += taken
        spent.output_tokens += given
        price = _prices(self._spec, ctx.settings).get(model) if model else None
        if isinstance(price, Mapping):
            spent.cost += taken * float(price["input"]) + given * float(price["output"])

    def count_tool(self) -> None:
        """Count one tool call, as it is recorded as started."""
        self.state.usage.tool_calls += 1

    # -- the gate --------------------------------------------------------------------

    async def admit(self, ctx: Context, turn: TurnJournal, step: Step) -> None:
        """Return once ``step`` of ``turn`` may go ahead; wait while a breach holds it.

        Raises:
            BudgetExceeded: the policy is ``fail``, or a person denied the raise.
        """
        while True:
            breach = self.state.breach
            if breach is not None and breach.turn_id != turn.turn_id:
                self.state.breach = breach = None  # the turn it held is over: look again
            if breach is None:
                found = self._over(step)
                if found is None:
                    return
                breach = self._record(ctx, turn, *found)
                if breach.policy == "fail":
                    self.state.breach = None
                    raise BudgetExceeded(said(breach))
                await ctx.checkpoint()  # recorded, and announced, before the turn waits
            elif breach.denied:
                self.state.breach = None
                raise BudgetExceeded(f"{said(breach)}, and raising it was denied")
            else:
                await self._changed.wait()

    def start_turn(self, ctx: Context, turn: TurnJournal) -> None:
        """Set the turn's deadline timer, in the commit that starts it."""
        seconds = self.limits.turn_deadline
        if seconds is not None:
            ctx.schedule(seconds, TURN_DEADLINE, {"turn_id": turn.turn_id}, key=_TIMER_KEY)

    def deadline_passed(
        self, ctx: Context, message: Message, turn: TurnJournal | None
    ) -> str | None:
        """The turn's timer fired: record the breach if it is the running turn's.

        Returns the budget error when the policy ends the turn now (``fail``):
        the caller stops it and announces ``turn.failed`` with it.
        """
        body = message.body if isinstance(message.body, dict) else {}
        allowed = self.limits.turn_deadline
        if allowed is None or turn is None or body.get("turn_id") != turn.turn_id:
            return None  # a turn already over (its timer was not worth a commit to cancel)
        if self.state.breach is not None:
            return None  # held already: one breach at a time
        breach = self._record(ctx, turn, "turn_deadline", allowed, allowed)
        if breach.policy != "fail":
            return None
        self.state.breach = None
        return said(breach)

    def turn_over(self, turn: TurnJournal) -> None:
        """``turn`` ended (in the commit that ends it): a breach that held it ends with
        it, so the next turn over a limit records, and announces, its own."""
        breach = self.state.breach
        if breach is not None and breach.turn_id == turn.turn_id:
            self.state.breach = None

    # -- answers -----------------------------------------------------------------------

    def raise_limits(self, ctx: Context, message: Message) -> str | None:
        """``raise_budget``: set the limits it names; a refusal's reason, or None."""
        names = [*LIMIT_NAMES, "turn_deadline"]
        if isinstance(message.body, dict):
            # Bodies ignore unknown keys, but here a misspelt limit would go unraised.
            unknown = sorted(str(k) for k in message.body if k not in names)
            if unknown:
                known = ", ".join(f"'{n}'" for n in names)
                return f"'raise_budget' has no limit {unknown[0]!r}: give any of {known}"
        try:
            body = structure_json(
                message.body, RaiseBudgetBody, what=f"the body of 'raise_budget' to {ctx.address}"
            )
        except JSONShapeError as exc:
            return str(exc)
        given = {k: v for k, v in attrs.asdict(body).items() if v is not None}
        if not given:
            return f"'raise_budget' needs at least one of {', '.join(repr(n) for n in names)}"
        if "turn_deadline" in given and not hasattr(self._spec, "turn_deadline"):
            return "a task has no 'turn_deadline': its time is the spec's 'deadline'"
        for name, value in given.items():
            setattr(self.limits, name, value)
        if "turn_deadline" in given and self._holding("turn_deadline"):
            self._restart_deadline(ctx)
        self._released(ctx, "raise_budget")
        return None

    def answer(self, ctx: Context, approved: bool, reason: str | None) -> str | None:
        """``approve`` of the call ``budget``: grant the breached limit's allowance once
        more, or deny it; a refusal's reason, or None."""
        breach = self.state.breach
        if breach is None or breach.policy != "ask" or breach.denied:
            return "no budget is waiting for approval"
        answer: dict[str, Any] = {"turn_id": breach.turn_id, "call_id": BUDGET_CALL_ID}
        ctx.emit("approval.answered", {**answer, "approved": approved, "reason": reason})
        if not approved:
            breach.denied = True
            self._wake()
            return None
        if breach.limit == "turn_deadline":
            self._restart_deadline(ctx)
        else:
            allowance = getattr(self._spec, breach.limit) or breach.allowed
            setattr(self.limits, breach.limit, breach.allowed + allowance)
        self._released(ctx, "approve")
        return None

    def pending(self, address: str) -> list[PendingApproval]:
        """An ``ask`` breach as an approval (the call `BUDGET_CALL_ID`), or nothing."""
        breach = self.state.breach
        if breach is None or breach.policy != "ask" or breach.denied:
            return []
        arguments = {"limit": breach.limit, "used": breach.used, "allowed": breach.allowed}
        return [PendingApproval(address, BUDGET_CALL_ID, "raise_budget", arguments, breach.at)]

    # -- inside ------------------------------------------------------------------------

    def _over(self, step: Step) -> tuple[str, float, float] | None:
        limits, spent = self.limits, self.state.usage
        checks: list[tuple[str, float, float | None]]
        if step == "tool":
            checks = [("max_tool_calls", spent.tool_calls, limits.max_tool_calls)]
        else:
            checks = [
                ("max_tokens", spent.tokens, limits.max_tokens),
                ("max_cost", spent.cost, limits.max_cost),
                ("max_model_calls", spent.model_calls, limits.max_model_calls),
            ]
        for name, used, allowed in checks:
            if allowed is not None and used >= allowed:
                return name, used, allowed
        return None

    def _record(
        self, ctx: Context, turn: TurnJournal, limit: str, used: float, allowed: float
    ) -> Breach:
        breach = Breach(limit, used, allowed, self._spec.on_budget, turn.turn_id, ctx.now())
        self.state.breach = breach
        ctx.emit("budget.exceeded", {
            "turn_id": turn.turn_id, "prompt_id": turn.prompt_id, "limit": limit,
            "used": used, "allowed": allowed, "policy": breach.policy, "error": said(breach),
        })  # fmt: skip
        return breach

    def _holding(self, limit: str) -> bool:
        return self.state.breach is not None and self.state.breach.limit == limit

    def _restart_deadline(self, ctx: Context) -> None:
        seconds = self.limits.turn_deadline
        breach = self.state.breach
        if seconds is not None and breach is not None:
            ctx.schedule(seconds, TURN_DEADLINE, {"turn_id": breach.turn_id}, key=_TIMER_KEY)

    def _released(self, ctx: Context, by: str) -> None:
        """The limits changed: announce them and let a held turn look again."""
        ctx.emit("budget.raised", {"by": by, "limits": attrs.asdict(self.limits)})
        if self.state.breach is not None and not self.state.breach.denied:
            self.state.breach = None
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()


def said(breach: Breach) -> str:
    """The budget error, for a person: which limit, how much was used and allowed."""
    if breach.limit == "turn_deadline":
        return f"budget exceeded: the turn ran past its turn_deadline of {breach.allowed:g} seconds"
    return (
        f"budget exceeded: {breach.limit} is {_shown(breach.allowed)} and "
        f"{_shown(breach.used)} was used"
    )


def budget_summary(state: Any) -> dict[str, Any] | None:
    """What ``inspect`` shows of the budget: usage, the limits in force, a breach."""
    budget = state.get("budget") if isinstance(state, dict) else None
    if not isinstance(budget, dict):
        return None
    return {k: budget.get(k) for k in ("usage", "limits", "breach")}


def _shown(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _count(usage: Mapping[str, Any] | None, name: str) -> int:
    value = usage.get(name) if usage is not None else None
    return value if type(value) is int and value > 0 else 0


def _model_in_use(spec: BudgetSpec, settings: Mapping[str, Any]) -> str | None:
    return spec.model or settings.get("model") or os.environ.get("CALLBOARD_MODEL") or None


def _prices(spec: BudgetSpec, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The operator's prices (``serve --prices``), with the spec's over them."""
    host = settings.get("prices")
    return {**(host if isinstance(host, dict) else {}), **(spec.prices or {})}
