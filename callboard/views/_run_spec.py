"""`RunSpec`: how a task is spawned, the same type for an embedded runtime and a client.

Pure data: its validators check what a spec says (types, ranges, shapes)
and nothing that depends on the host. What the host allows or can run (a
workspace under its roots, a model URL, an ssh host it lets specs name,
ssh options it will pass on) is checked where the spec arrives, at
``spawn`` (the ``task`` kind's ``check_spec``), whoever built the spec.
"""

from __future__ import annotations

import math
import os
from datetime import timedelta
from typing import Any, Literal

import attrs

from ..codec import strict_json
from ._budget_spec import (
    BudgetPolicy,
    check_budget_policy,
    check_cost_limit,
    check_count_limit,
    check_prices,
)
from ._outage_spec import check_retry_limit, check_retry_seconds

__all__ = [
    "APPROVALS",
    "DEFAULT_TASK_SYSTEM_PROMPT",
    "SSH_EXECUTOR_KEYS",
    "Approval",
    "RunSpec",
    "check_approval_default",
    "check_approval_timeout",
    "check_context_window",
    "check_executor_shape",
    "check_keep_turns",
    "check_key_env",
    "check_provider_name",
    "executor_shape_problem",
]

Approval = Literal["always", "ask", "never"]
"""``always`` runs without asking, ``ask`` asks a person first, ``never`` refuses."""

APPROVALS: tuple[Approval, ...] = ("always", "ask", "never")
"""Every approval, for validation and for listing in error messages."""

DEFAULT_TASK_SYSTEM_PROMPT = (
    "You are an autonomous agent working in a workspace directory, with no person to ask. "
    "Use the tools to read, write, edit and list files there. When the work is done, "
    "answer with the result in a few sentences."
)

SSH_EXECUTOR_KEYS = (
    "host",
    "port",
    "user",
    "identity_file",
    "options",
    "connect_timeout",
    "op_timeout",
)
"""What an ssh executor's description may set; the rest comes from the host's confinement."""


def executor_shape_problem(description: dict[str, Any]) -> str | None:
    """What is wrong with the shape of an executor description, or None.

    An empty description is this machine; otherwise it is ``{"ssh": {"host":
    ..., ...}}`` with only `SSH_EXECUTOR_KEYS`. Whether the host side can
    build it (a host name, allowed ssh options) is the host's to check.
    """
    if not description:
        return None
    ssh = description.get("ssh")
    if not isinstance(ssh, dict) or "host" not in ssh:
        return f"a job executor is None or {{'ssh': {{'host': ...}}}}, got {description!r}"
    unknown = sorted(str(key) for key in ssh if key not in SSH_EXECUTOR_KEYS)
    if unknown:
        return (
            f"an ssh executor takes {', '.join(SSH_EXECUTOR_KEYS)}, "
            f"not {', '.join(map(repr, unknown))}"
        )
    return None


# The validators raise TypeError, as SessionSpec's do: cattrs words a
# ValueError as "invalid value" and drops its message, but keeps a TypeError's.


def check_executor_shape(instance: Any, attribute: Any, description: object) -> None:
    """An attrs validator: raise TypeError unless ``description`` has an executor's shape."""
    if description is None:
        return
    if not isinstance(description, dict):
        expected = "null or {'ssh': {'host': ...}}"
        raise TypeError(f"'executor' must be {expected}, got {description!r}")
    problem = executor_shape_problem(description)
    if problem is not None:
        raise TypeError(f"'executor': {problem}")


def check_key_env(instance: Any, attribute: Any, value: object) -> None:
    """An attrs validator: ``api_key_env`` is None or an environment variable's name."""
    if value is None:
        return
    if not isinstance(value, str) or not value.replace("_", "a").isalnum() or value[0].isdigit():
        raise TypeError(f"'api_key_env' must name an environment variable, got {value!r}")


_PROVIDERS = ("openai", "anthropic")
"""``callboard.llm.PROVIDERS``, which this lower layer may not import (a test holds them equal)."""


def check_provider_name(instance: Any, attribute: Any, value: object) -> None:
    """An attrs validator: ``provider`` is None or a provider ``callboard.llm`` speaks."""
    if value is not None and value not in _PROVIDERS:
        raise TypeError(
            f"'provider' must be 'openai' or 'anthropic' (or absent, for the configured "
            f"model's), got {value!r}"
        )


def check_context_window(instance: Any, attribute: Any, value: object) -> None:
    """An attrs validator: ``context_window`` is None or a positive number of tokens."""
    if value is not None and (type(value) is not int or value <= 0):
        raise TypeError(f"'context_window' must be a positive number of tokens, got {value!r}")


def check_keep_turns(instance: Any, attribute: Any, value: object) -> None:
    """An attrs validator: ``keep_turns`` is a number of turns, 0 or more."""
    if type(value) is not int or value < 0:
        raise TypeError(f"'keep_turns' must be a number of turns, 0 or more, got {value!r}")


def _seconds(value: timedelta | float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"'deadline' must be a timedelta or seconds, got {value!r}")


def _check_deadline(instance: RunSpec, attribute: Any, value: float | None) -> None:
    if value is not None and not value > 0:
        raise TypeError(f"'deadline' must be positive, got {value!r} seconds")


def check_approval_timeout(instance: Any, attribute: Any, value: object) -> None:
    """An attrs validator: ``approval_timeout`` is None or a positive, finite number."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"'approval_timeout' must be a number of seconds, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise TypeError(f"'approval_timeout' must be a positive number of seconds, got {value!r}")


def check_approval_default(instance: Any, attribute: Any, value: object) -> None:
    """An attrs validator: ``approval_default`` is ``deny`` or ``approve``."""
    if value not in ("deny", "approve"):
        raise TypeError(f"'approval_default' must be 'deny' or 'approve', got {value!r}")


def _check_prompt(instance: RunSpec, attribute: Any, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise TypeError(f"'prompt' must be non-empty text, got {value!r}")


def _check_approve(instance: RunSpec, attribute: Any, value: Any) -> None:
    if value not in APPROVALS:
        raise TypeError(f"'approve' must be 'always', 'ask' or 'never', got {value!r}")


def _check_workspace(instance: RunSpec, attribute: Any, value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not os.path.isabs(value)):
        raise TypeError(f"'workspace' must be an absolute path to a directory, got {value!r}")


@strict_json()
@attrs.frozen
class RunSpec:
    """How a task is spawned (JSON over the gateway; ``deadline`` in seconds there).

    ``workspace`` defaults to the runtime's ``workspace``; ``base_url`` and
    ``model`` to the runtime's ``model_url`` and ``model`` settings, then to
    ``$CALLBOARD_MODEL_URL`` and ``$CALLBOARD_MODEL``. ``deadline`` (a
    `timedelta` or seconds, kept as seconds) runs from the task's first start.
    ``approve`` is the policy for every tool call: ``always`` runs it, ``ask``
    emits ``approval.requested`` and waits (durably) for an ``approve``
    message, ``never`` refuses it and tells the model so. ``executor`` says
    where ``shell_run`` and the task's jobs run: None on the host,
    ``{"ssh": {"host": ...}}`` on another machine; here only its shape is
    checked, and the host refuses at ``spawn`` what it will not run.
    ``api_key_env``, ``provider``, ``context_window`` and ``keep_turns`` are
    as in `callboard.agent.SessionSpec`, and so are ``outage_retry_limit`` and
    ``outage_retry_for`` (a turn parked while the model server is down,
    ``_outage_spec``). ``approval_timeout`` (seconds; None: no deadline) is how
    long a call that asks waits for its answer, and ``approval_default``
    (``deny`` or ``approve``) what it becomes then. ``max_tokens``,
    ``max_cost``, ``max_model_calls``, ``max_tool_calls``, ``prices`` and
    ``on_budget`` cap what the task spends (``_budget_spec``); a task has no
    person to wait for, so a breach fails it unless ``on_budget`` says
    ``pause`` or ``ask``.
    """

    prompt: str = attrs.field(validator=_check_prompt)
    base_url: str | None = None
    model: str | None = None
    deadline: float | None = attrs.field(
        default=None, converter=_seconds, validator=_check_deadline
    )
    approve: Approval = attrs.field(default="ask", validator=_check_approve)
    workspace: str | None = attrs.field(default=None, validator=_check_workspace)
    system_prompt: str = DEFAULT_TASK_SYSTEM_PROMPT
    executor: dict[str, Any] | None = attrs.field(default=None, validator=check_executor_shape)
    api_key_env: str | None = attrs.field(default=None, validator=check_key_env)
    provider: str | None = attrs.field(default=None, validator=check_provider_name)
    approval_timeout: float | None = attrs.field(default=None, validator=check_approval_timeout)
    approval_default: Literal["deny", "approve"] = attrs.field(
        default="deny", validator=check_approval_default
    )
    context_window: int | None = attrs.field(default=None, validator=check_context_window)
    keep_turns: int = attrs.field(default=2, validator=check_keep_turns)
    max_tokens: int | None = attrs.field(default=None, validator=check_count_limit)
    max_cost: float | None = attrs.field(default=None, validator=check_cost_limit)
    max_model_calls: int | None = attrs.field(default=None, validator=check_count_limit)
    max_tool_calls: int | None = attrs.field(default=None, validator=check_count_limit)
    prices: dict[str, Any] | None = attrs.field(default=None, validator=check_prices)
    on_budget: BudgetPolicy = attrs.field(default="fail", validator=check_budget_policy)
    outage_retry_limit: int | None = attrs.field(default=None, validator=check_retry_limit)
    outage_retry_for: float | None = attrs.field(default=None, validator=check_retry_seconds)
