"""The budget fields of a session's or task's spec, and their validators (pure data).

A spec may cap what its actor spends over its whole life: ``max_tokens``
(input and output summed), ``max_cost`` (priced by ``prices``, per token,
or the operator's ``serve --prices FILE``), ``max_model_calls`` and
``max_tool_calls``; a session also ``turn_deadline`` (seconds per turn).
``on_budget`` says what a breach does: ``pause`` (the turn waits for a
``raise_budget`` message), ``ask`` (an approval-like request to raise it),
``fail`` (the turn, or the task, fails with a budget error). The
accounting and the policy are the agent layer's (``callboard.agent._budgets``);
here is only what a spec may say, checked the same for a client and a server.
"""

from __future__ import annotations

import math
from typing import Any, Literal

__all__ = [
    "BUDGET_POLICIES",
    "LIMIT_NAMES",
    "BudgetPolicy",
    "check_budget_policy",
    "check_cost_limit",
    "check_count_limit",
    "check_prices",
    "check_turn_deadline",
    "prices_problem",
]

BudgetPolicy = Literal["pause", "ask", "fail"]
"""What a breach of a budget does (module docstring)."""

BUDGET_POLICIES: tuple[BudgetPolicy, ...] = ("pause", "ask", "fail")

LIMIT_NAMES = ("max_tokens", "max_cost", "max_model_calls", "max_tool_calls")
"""The limits on what an actor spends over its life, as spec fields and in ``raise_budget``."""

# The validators raise TypeError, as the specs' others do: cattrs words a
# ValueError as "invalid value" and drops its message, but keeps a TypeError's.


def check_count_limit(instance: Any, attribute: Any, value: object) -> None:
    """An attrs validator: None or a whole number above zero (named by the field)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise TypeError(f"'{attribute.name}' must be a whole number above 0, got {value!r}")


def check_cost_limit(instance: Any, attribute: Any, value: object) -> None:
    """An attrs validator: None or a finite number above zero."""
    if value is None:
        return
    if not _number(value) or not float(value) > 0:  # type: ignore[arg-type]
        raise TypeError(f"'{attribute.name}' must be a number above 0, got {value!r}")


def check_turn_deadline(instance: Any, attribute: Any, value: object) -> None:
    """An attrs validator: None or seconds above zero."""
    if value is None:
        return
    if not _number(value) or not float(value) > 0:  # type: ignore[arg-type]
        raise TypeError(f"'{attribute.name}' must be seconds above 0, got {value!r}")


def check_budget_policy(instance: Any, attribute: Any, value: object) -> None:
    """An attrs validator: one of `BUDGET_POLICIES`."""
    if value not in BUDGET_POLICIES:
        raise TypeError(f"'{attribute.name}' must be 'pause', 'ask' or 'fail', got {value!r}")


def check_prices(instance: Any, attribute: Any, value: object) -> None:
    """An attrs validator: None or ``{model: {"input": per token, "output": per token}}``."""
    if value is None:
        return
    problem = prices_problem(value)
    if problem is not None:
        raise TypeError(f"'{attribute.name}' {problem}")


def prices_problem(prices: object) -> str | None:
    """What is wrong with a price table (the rest of a sentence about it), or None.

    Shared by the spec's field and the operator's ``--prices FILE``.
    """
    shape = "{'MODEL': {'input': PRICE, 'output': PRICE}} with prices per token"
    if not isinstance(prices, dict):
        return f"must be {shape}, got {prices!r}"
    for model, price in prices.items():
        if not isinstance(model, str) or not model:
            return f"must name each model, got {model!r}"
        if not isinstance(price, dict) or set(price) != {"input", "output"}:
            return f"must give {model!r} exactly 'input' and 'output' ({shape}), got {price!r}"
        for side in ("input", "output"):
            if not _number(price[side]) or price[side] < 0:
                return f"must give {model!r} a price of 0 or more for {side!r}, got {price[side]!r}"
    return None


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
