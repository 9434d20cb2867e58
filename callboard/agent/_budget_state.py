"""What budgets keep in a session's or task's snapshot, and the ``raise_budget`` body.

Pure data (no trio), for `callboard.agent._budgets`, which charges usage and
acts on a breach.
"""

from __future__ import annotations

import attrs

from ..codec import strict_json
from ..views import BudgetPolicy, check_cost_limit, check_count_limit, check_turn_deadline

__all__ = ["Breach", "BudgetState", "Limits", "RaiseBudgetBody", "Usage"]


@attrs.define
class Usage:
    """What the actor spent over its life, charged from committed model answers."""

    input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0
    tool_calls: int = 0
    cost: float = 0.0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@attrs.define
class Limits:
    """The limits in force (None: no limit), the spec's until ``raise_budget`` changes them."""

    max_tokens: int | None = None
    max_cost: float | None = None
    max_model_calls: int | None = None
    max_tool_calls: int | None = None
    turn_deadline: float | None = None


@attrs.define
class Breach:
    """A limit that was reached and not raised yet; ``denied`` once a person said no."""

    limit: str
    used: float
    allowed: float
    policy: BudgetPolicy
    turn_id: str
    at: float
    denied: bool = False


@attrs.define
class BudgetState:
    """The part of a session's or task's snapshot that budgets keep."""

    usage: Usage = attrs.Factory(Usage)
    limits: Limits | None = None
    breach: Breach | None = None


@strict_json()
@attrs.frozen
class RaiseBudgetBody:
    """``raise_budget``: the limits to set (the others stay); at least one."""

    max_tokens: int | None = attrs.field(default=None, validator=check_count_limit)
    max_cost: float | None = attrs.field(default=None, validator=check_cost_limit)
    max_model_calls: int | None = attrs.field(default=None, validator=check_count_limit)
    max_tool_calls: int | None = attrs.field(default=None, validator=check_count_limit)
    turn_deadline: float | None = attrs.field(default=None, validator=check_turn_deadline)
