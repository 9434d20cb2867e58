"""What a session is spawned with: `SessionSpec` and its checks (JSON over the gateway)."""

from __future__ import annotations

import os
from typing import Any, Literal

import attrs

from ..codec import strict_json
from ..views import (
    BudgetPolicy,
    check_approval_default,
    check_approval_timeout,
    check_budget_policy,
    check_context_window,
    check_cost_limit,
    check_count_limit,
    check_keep_turns,
    check_prices,
    check_provider_name,
    check_retry_limit,
    check_retry_seconds,
    check_turn_deadline,
)
from ._approval_deadlines import read_approvals
from ._executor_spec import check_executor, check_key_env

__all__ = ["DEFAULT_SYSTEM_PROMPT", "SessionSpec"]

DEFAULT_SYSTEM_PROMPT = (
    "You are a coding agent working in a workspace directory. Use the tools to read, "
    "write, edit and list files there. Answer briefly once the work is done."
)

# The validators raise TypeError, not ValueError, only because the store's
# structure_error (cattrs' default formatter) words a ValueError as "invalid
# value" and drops its message, while it keeps a TypeError's.


def _check_workspace(instance: SessionSpec, attribute: Any, value: Any) -> None:
    if not isinstance(value, str) or not value or not os.path.isabs(value):
        raise TypeError(f"'workspace' must be an absolute path to a directory, got {value!r}")


def _check_approvals(instance: SessionSpec, attribute: Any, value: Any) -> None:
    if value is not None:
        try:
            read_approvals(value)
        except ValueError as exc:
            raise TypeError(f"'approvals': {exc}") from None


@strict_json()
@attrs.frozen
class SessionSpec:
    """How a session is spawned (JSON over the gateway).

    ``model`` and ``base_url`` default, at each turn, to the runtime's settings
    ``model`` and ``model_url``, else ``$CALLBOARD_MODEL`` and
    ``$CALLBOARD_MODEL_URL``. ``background_on_timeout``: a command still running
    at its timeout goes on as a background job (true) or is stopped (false).
    ``approvals`` is a policy word or a mapping (`ApprovalPolicy.from_json`),
    where a tool's entry may also be ``{"approval", "timeout", "default"}``
    (``_approval_deadlines``); None means `DEFAULT_APPROVAL_POLICY`.
    ``approval_timeout`` (seconds; None: no deadline) is how long a call waits
    for its approval, and ``approval_default`` (``deny`` or ``approve``) what
    it becomes then, unless the tool's entry says otherwise.
    ``on_restart`` says what happens to a turn cut off by a crash: ``continue``
    it, or report it as ``turn.interrupted`` and pause the queue.
    ``executor`` says where ``shell_run`` and the jobs run: None on this
    machine, ``{"ssh": {"host", "port", "user", "identity_file", "options"}}``
    on another, through the system ``ssh`` (`callboard.tools.SshExecutor`);
    the workspace and the jobs directory are paths on that machine.
    ``api_key_env`` names the server's environment variable holding the key
    for ``base_url``, when that is not the configured model URL (which gets
    the server's own key); the operator must allow it (``_confinement``).
    ``provider`` is the wire of the model server: ``openai`` (chat
    completions) or ``anthropic`` (the Messages API); None means the
    runtime's ``provider`` setting (``serve --provider``) for the configured
    model URL, and ``openai`` for a URL of the spec's own.
    ``context_window`` is the size in tokens a model request may reach (as
    estimated: ``callboard.agent._compaction``) before the turns older than the
    last ``keep_turns`` are summarised into a checkpoint; None means the
    runtime's ``context_window`` setting for the configured model URL, else
    compaction only when the server says the conversation overflows.
    ``max_tokens``, ``max_cost``, ``max_model_calls``, ``max_tool_calls``,
    ``prices``, ``turn_deadline`` and ``on_budget`` cap what the session
    spends and what a breach does (``callboard.views._budget_spec``); a
    session has a person, so a breach pauses the turn by default.
    ``outage_retry_limit`` and ``outage_retry_for`` bound how long a turn waits,
    parked, for a model server that is down (``_outage``); None: the host's.
    """

    workspace: str = attrs.field(validator=_check_workspace)
    model: str | None = None
    base_url: str | None = None
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    approvals: Any = attrs.field(default=None, validator=_check_approvals)
    on_restart: Literal["continue", "interrupt"] = "continue"
    background_on_timeout: bool = True
    executor: dict[str, Any] | None = attrs.field(default=None, validator=check_executor)
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
    turn_deadline: float | None = attrs.field(default=None, validator=check_turn_deadline)
    on_budget: BudgetPolicy = attrs.field(default="pause", validator=check_budget_policy)
    outage_retry_limit: int | None = attrs.field(default=None, validator=check_retry_limit)
    outage_retry_for: float | None = attrs.field(default=None, validator=check_retry_seconds)
