"""Approvals with deadlines, and tools a person allowed for the rest of a session.

A spec may give an approval a deadline: ``approval_timeout`` (seconds) for
every tool that asks, and, for a session, per tool in its ``approvals``
mapping, where a tool's entry may be an object instead of a word::

    {"shell_run": {"approval": "ask", "timeout": 60, "default": "approve"}, "*": "ask"}

At the deadline an unanswered approval takes the spec's ``approval_default``
(``deny`` unless said otherwise), or the tool entry's ``default``. The
deadline is a durable timer (`Context.schedule`) set in the commit that
records the request, so it fires after a restart, at once if it fell due
while no runtime ran. An answer cancels it in the answer's own commit; a
timer that had already fired by then finds the call answered and changes
nothing, so an answered approval never expires.

An ``approve`` answer with ``"scope": "session"`` also allows the tool for
the rest of the session (of the task): its name joins the state's
``allowed_tools``, and later calls of it run without asking (`approval_for`),
after a restart too, since the list is in the snapshot. It widens only a
tool that asks: one the policy never allows stays refused.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal, TypeGuard

import attrs

from ..actors import Context
from ..tools import APPROVALS, ApprovalPolicy
from ._journal import CallRecord, OnExpiry, TurnJournal
from ._journal_approvals import record_approval_asked

__all__ = [
    "APPROVAL_DEADLINE",
    "ON_EXPIRY",
    "ApprovalDeadlines",
    "Scope",
    "ToolDeadline",
    "allow_for_session",
    "approval_for",
    "ask_approval",
    "cancel_deadline",
    "cancel_deadlines",
    "check_on_expiry",
    "check_timeout",
    "deadline_fields",
    "expire_approval",
    "read_approvals",
]

APPROVAL_DEADLINE = "approval.deadline"
"""The type of the timer message an actor sends itself at an approval's deadline."""

ON_EXPIRY: tuple[OnExpiry, ...] = ("deny", "approve")
"""What an unanswered approval may become at its deadline."""

Scope = Literal["call", "session"]
"""What an ``approve`` answer covers: this call, or the tool for the rest of the session."""

_ENTRY_KEYS = ("approval", "timeout", "default")


def _is_on_expiry(value: object) -> TypeGuard[OnExpiry]:
    return isinstance(value, str) and value in ON_EXPIRY


def check_timeout(value: object, what: str) -> float | None:
    """``value`` as seconds (None for none); ValueError naming ``what`` unless it
    is a positive, finite number."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} must be a number of seconds, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{what} must be a positive number of seconds, got {value!r}")
    return float(value)


def check_on_expiry(value: object, what: str) -> OnExpiry:
    """``value`` as an expiry decision; ValueError naming ``what`` unless it is one."""
    if not _is_on_expiry(value):
        raise ValueError(f"{what} must be 'deny' or 'approve', got {value!r}")
    return value


@attrs.frozen
class ToolDeadline:
    """How long a call of one tool waits for its approval, and what it becomes then."""

    timeout: float | None = None
    on_expiry: OnExpiry = "deny"


@attrs.frozen
class ApprovalDeadlines:
    """The deadlines of a spec: ``default`` for every tool, ``tools`` for those whose
    policy entry gave its own (``"*"`` among them, for the tools not named)."""

    default: ToolDeadline = attrs.Factory(ToolDeadline)
    tools: tuple[tuple[str, ToolDeadline], ...] = ()

    def for_tool(self, name: str) -> ToolDeadline:
        held = dict(self.tools)
        return held.get(name) or held.get("*") or self.default


def read_approvals(
    value: object, timeout: float | None = None, on_expiry: OnExpiry = "deny"
) -> tuple[ApprovalPolicy | None, ApprovalDeadlines]:
    """A spec's ``approvals`` (None: the default policy), ``approval_timeout`` and
    ``approval_default`` as the policy and the deadlines.

    Raises:
        ValueError: a word, a tool name, or a tool entry's timeout or default is
            wrong; the message names it.
    """
    default = ToolDeadline(timeout, on_expiry)
    if not isinstance(value, Mapping):
        return (None if value is None else ApprovalPolicy.from_json(value)), ApprovalDeadlines(
            default
        )
    words: dict[str, object] = {}
    tools: list[tuple[str, ToolDeadline]] = []
    for name, entry in value.items():
        if not isinstance(entry, Mapping):
            words[name] = entry
            continue
        unknown = sorted(str(key) for key in entry if key not in _ENTRY_KEYS)
        if unknown:
            raise ValueError(
                f"the entry for tool {name!r} takes {', '.join(_ENTRY_KEYS)}, "
                f"not {', '.join(map(repr, unknown))}"
            )
        word = entry.get("approval", "ask")
        words[name] = word
        if "timeout" not in entry and "default" not in entry:
            continue
        if word != "ask" and word in APPROVALS:
            raise ValueError(
                f"the approval for tool {name!r} is {word!r}: a timeout or a default "
                "is only for a tool that asks"
            )
        own_timeout = check_timeout(entry.get("timeout"), f"the timeout for tool {name!r}")
        own_default = check_on_expiry(
            entry.get("default", on_expiry), f"the default for tool {name!r}"
        )
        tools.append((name, ToolDeadline(own_timeout or timeout, own_default)))
    return ApprovalPolicy.from_json(words), ApprovalDeadlines(default, tuple(sorted(tools)))


def approval_for(
    policy: ApprovalPolicy, allowed: Callable[[], Collection[str]]
) -> Callable[[str], str]:
    """The policy word for a tool, with the tools ``allowed()`` for the session
    running at once: a tool that would ask does not."""

    def word(name: str) -> str:
        said = policy.for_tool(name)
        return "always" if said == "ask" and name in allowed() else said

    return word


def allow_for_session(allowed: list[str], tool: str) -> None:
    """Add ``tool`` to the state's ``allowed_tools`` (in place, kept sorted)."""
    if tool not in allowed:
        allowed.append(tool)
        allowed.sort()


def _timer_key(turn: TurnJournal, call: CallRecord) -> str:
    return f"approval:{turn.turn_id}:{call.id}"


def ask_approval(
    ctx: Context, turn: TurnJournal, call: CallRecord, deadlines: ApprovalDeadlines
) -> dict[str, Any]:
    """Record that ``call`` waits for a person, set its deadline's timer if it has
    one, and return what ``approval.requested`` says of the deadline."""
    now = ctx.now()
    rule = deadlines.for_tool(call.name)
    if rule.timeout is None:
        record_approval_asked(turn, call.id, now)
        return {}
    deadline_at = now + rule.timeout
    record_approval_asked(turn, call.id, now, deadline_at=deadline_at, on_expiry=rule.on_expiry)
    body = {"turn_id": turn.turn_id, "call_id": call.id}
    ctx.schedule(rule.timeout, APPROVAL_DEADLINE, body, key=_timer_key(turn, call))
    return {"deadline_at": deadline_at, "timeout": rule.timeout, "on_expiry": rule.on_expiry}


def deadline_fields(call: CallRecord) -> dict[str, Any]:
    """The deadline of ``call``'s approval for an event: nothing when it has none."""
    if call.deadline_at is None:
        return {}
    return {"deadline_at": call.deadline_at, "on_expiry": call.on_expiry}


def cancel_deadline(ctx: Context, turn: TurnJournal, call: CallRecord) -> None:
    """``call`` was answered: its deadline's timer goes, in the same commit."""
    if call.deadline_at is not None:
        ctx.cancel_timer(_timer_key(turn, call))


def cancel_deadlines(ctx: Context, turn: TurnJournal) -> None:
    """``turn`` ends: the timers of its calls still waiting go with it."""
    for call in turn.awaiting_approval():
        cancel_deadline(ctx, turn, call)


def expire_approval(turn: TurnJournal | None, body: object) -> CallRecord | None:
    """Give the call a deadline's timer names (``body``) its ``on_expiry`` answer.

    None, changing nothing, when it no longer waits (it was answered, or its
    turn ended): a timer may have fired just before the answer that cancelled it.
    """
    if turn is None or not isinstance(body, dict) or body.get("turn_id") != turn.turn_id:
        return None
    try:
        call = turn.call(str(body.get("call_id")))
    except KeyError:
        return None
    if call.approval != "asked" or call.status != "pending" or call.deadline_at is None:
        return None
    call.approval = "approved" if call.on_expiry == "approve" else "denied"
    call.expired = True
    return call
