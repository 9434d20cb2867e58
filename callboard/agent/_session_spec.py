"""What a session is spawned with: `SessionSpec` and its checks (JSON over the gateway)."""

from __future__ import annotations

import os
from typing import Any, Literal

import attrs

from ..codec import strict_json
from ..tools import ApprovalPolicy
from ..views import check_provider_name
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
            ApprovalPolicy.from_json(value)
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
    ``approvals`` is a policy word or a mapping (`ApprovalPolicy.from_json`);
    None means `DEFAULT_APPROVAL_POLICY`.
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
