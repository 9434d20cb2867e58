"""`AgentMetrics`: model calls, tokens, tool calls, approvals and turns, counted
from the events the agent's actors commit.

The agent layer knows nothing of metrics: it records what happened in its
events (``assistant.message`` carries the model's ``usage`` and ``elapsed``;
``tool.finished`` the tool and its status; ``approval.*``; ``turn.*``), and
this module taps those event types on the runtime (`Runtime.tap`). A tap
hears each committed event once, right after its commit, and never a
replay: restarting the process starts every counter at zero again (as
Prometheus expects of a counter), and nothing recorded before is counted
twice. What it counts is what was *recorded*: a model answer lost with a
killed process, and asked again after the restart, counts once.

Turn durations are measured from the ``turn.started`` event to the event
that ends the turn, by their timestamps; a turn that began before this
process started is counted by its end but not timed. An approval *expires*
when its deadline passes (``approval.expired``) or when its turn ends
(cancelled, failed, stopped, a task's deadline) before it was answered. The
model call that summarises a conversation (``conversation.compacted``, with
its ``usage`` and ``elapsed``) is a model call like any other. A budget
breach (``budget.exceeded``) counts once, by its limit and policy, as it is
recorded once; each park of a turn through a model outage
(``turn.waiting_for_model``, one per failed ask) counts as one wait.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from ..mailbox import Event
from ..store import Buckets, Histogram
from ..views import BUDGET_POLICIES, LIMIT_NAMES

__all__ = ["TAPPED", "AgentMetrics"]

TAPPED = (
    "assistant.message",
    "tool.finished",
    "approval.requested",
    "approval.answered",
    "approval.expired",
    "conversation.compacted",
    "budget.exceeded",
    "turn.waiting_for_model",
    "turn.started",
    "turn.completed",
    "turn.failed",
    "turn.cancelled",
    "turn.interrupted",
    "task.settled",
)
"""The event types `AgentMetrics` counts."""

MODEL_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
TURN_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)

_TURN_ENDS = {
    "turn.completed": "completed",
    "turn.failed": "failed",
    "turn.cancelled": "cancelled",
    "turn.interrupted": "interrupted",
}

# Label values come from what a model wrote (a tool's name): past these, "other",
# so that a model inventing names cannot grow the series without bound.
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_MAX_TOOLS = 64
# Turns and approvals open at once that are remembered (an actor removed mid-turn
# never ends its turn); the oldest is forgotten past this.
_MAX_OPEN = 100_000


def _label(value: object, known: tuple[str, ...]) -> str:
    """A label from one of ``known`` names (a limit's, a policy's); anything else is
    "other", so that the series stay bounded whatever an event holds."""
    return value if isinstance(value, str) and value in known else "other"


def _tokens(usage: Any, *names: str) -> int:
    """The first of ``names`` that ``usage`` holds as a count (OpenAI's
    ``prompt_tokens``/``completion_tokens``, or ``input_tokens``/``output_tokens``)."""
    if isinstance(usage, dict):
        for name in names:
            value = usage.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
    return 0


class AgentMetrics:
    """The counters and histograms; `observe` is the tap (see the module)."""

    def __init__(self) -> None:
        self.model_calls = 0
        self.tokens_in = 0
        self.tokens_out = 0
        self.tool_calls: Counter[tuple[str, str]] = Counter()
        self.approvals_requested = 0
        self.approvals_answered: Counter[str] = Counter()
        self.approvals_expired = 0
        self.turns: Counter[str] = Counter()
        self.budget_breaches: Counter[tuple[str, str]] = Counter()  # (limit, policy)
        self.outage_waits = 0
        self._model_seconds = Buckets(MODEL_BUCKETS)
        self._turn_seconds = Buckets(TURN_BUCKETS)
        self._open_turns: dict[str, tuple[str, float]] = {}  # actor: (turn_id, started at)
        self._pending: dict[str, set[str]] = {}  # actor: the call ids waiting for an answer
        self._tools: set[str] = set()

    @property
    def model_seconds(self) -> Histogram:
        return self._model_seconds.snapshot()

    @property
    def turn_seconds(self) -> Histogram:
        return self._turn_seconds.snapshot()

    def observe(self, event: Event) -> None:
        data = event.data if isinstance(event.data, dict) else {}
        kind = event.type
        if kind in ("assistant.message", "conversation.compacted"):
            self.model_calls += 1
            usage = data.get("usage")
            self.tokens_in += _tokens(usage, "prompt_tokens", "input_tokens")
            self.tokens_out += _tokens(usage, "completion_tokens", "output_tokens")
            elapsed = data.get("elapsed")
            if isinstance(elapsed, int | float) and elapsed >= 0:
                self._model_seconds.observe(float(elapsed))
        elif kind == "tool.finished":
            self.tool_calls[self._tool(data.get("name")), str(data.get("status"))[:32]] += 1
        elif kind == "approval.requested":
            self.approvals_requested += 1
            waiting = self._pending.pop(event.actor, set())
            waiting.add(str(data.get("call_id")))
            self._remember(self._pending, event.actor, waiting)
        elif kind == "approval.answered":
            self.approvals_answered["true" if data.get("approved") is True else "false"] += 1
            self._pending.get(event.actor, set()).discard(str(data.get("call_id")))
        elif kind == "approval.expired":
            self.approvals_expired += 1
            self._pending.get(event.actor, set()).discard(str(data.get("call_id")))
        elif kind == "budget.exceeded":
            limit = _label(data.get("limit"), (*LIMIT_NAMES, "turn_deadline"))
            policy = _label(data.get("policy"), BUDGET_POLICIES)
            self.budget_breaches[limit, policy] += 1
        elif kind == "turn.waiting_for_model":
            self.outage_waits += 1
        elif kind == "turn.started":
            self._remember(self._open_turns, event.actor, (str(data.get("turn_id")), event.at))
        elif kind in _TURN_ENDS:
            self._turn_ended(event, _TURN_ENDS[kind])
        elif kind == "task.settled" and event.actor in self._open_turns:
            # A task settled mid-turn (failed, cancelled, timed out): the turn ends too.
            self._turn_ended(event, str(data.get("status"))[:32])

    def _turn_ended(self, event: Event, outcome: str) -> None:
        self.turns[outcome] += 1
        opened = self._open_turns.pop(event.actor, None)
        if opened is not None:
            self._turn_seconds.observe(max(0.0, event.at - opened[1]))
        self.approvals_expired += len(self._pending.pop(event.actor, ()))

    def _tool(self, name: object) -> str:
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            return "other"
        if name not in self._tools:
            if len(self._tools) >= _MAX_TOOLS:
                return "other"
            self._tools.add(name)
        return name

    @staticmethod
    def _remember(table: dict[Any, Any], key: Any, value: Any) -> None:
        table.pop(key, None)
        table[key] = value
        if len(table) > _MAX_OPEN:
            del table[next(iter(table))]
