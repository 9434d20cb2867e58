"""The approval policy: which tool calls run at once, which wait for a person, which never run.

``always`` runs the call without asking; ``ask`` asks a person first (the
agent emits ``approval.requested`` and waits, durably, for the answer);
``never`` refuses the call and tells the model so.

A policy is written in JSON either as one word for every tool (``"ask"``) or
as a mapping from tool name to word, where ``"*"`` covers the tools not named.
A mapping without ``"*"`` changes only the tools it names and leaves the rest
as ``DEFAULT_APPROVAL_POLICY`` has them: writing ``{"shell_run": "never"}``
should not start asking before every ``read_file``. Tool names are checked
against the registry, because a misspelt ``"shel_run": "never"`` that silently
did nothing would be a safety hole.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

import attrs

from ..views import APPROVALS, Approval
from ._registry import TOOL_NAMES

# The words themselves are in `callboard.views`: a task's spec (`RunSpec`) uses
# them, and the client builds specs without loading the tools.
__all__ = ["APPROVALS", "DEFAULT_APPROVAL_POLICY", "Approval", "ApprovalPolicy"]

_CHOICES = "'always', 'ask' or 'never'"


def _is_approval(value: object) -> TypeGuard[Approval]:
    return isinstance(value, str) and value in APPROVALS


def _sorted_rules(rules: Iterable[tuple[str, Approval]]) -> tuple[tuple[str, Approval], ...]:
    return tuple(sorted(dict(rules).items()))


def _check_default(instance: ApprovalPolicy, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not _is_approval(value):
        raise ValueError(f"the approval for '*' is {value!r}; expected {_CHOICES}")


def _check_rules(instance: ApprovalPolicy, attribute: attrs.Attribute[Any], value: Any) -> None:
    for name, approval in value:
        if not isinstance(name, str) or not name or name == "*":
            raise ValueError(f"{name!r} is not a tool name an approval can be given for")
        if not _is_approval(approval):
            raise ValueError(f"the approval for tool {name!r} is {approval!r}; expected {_CHOICES}")


@attrs.frozen
class ApprovalPolicy:
    """What to do before each tool call: ``always``, ``ask`` or ``never``.

    ``rules`` names tools one by one (kept sorted, so equal policies compare
    equal); ``default`` is the ``"*"`` entry, for every tool not named. Build
    one from configuration with ``from_json``.
    """

    default: Approval = attrs.field(default="ask", validator=_check_default)
    rules: tuple[tuple[str, Approval], ...] = attrs.field(
        default=(), converter=_sorted_rules, validator=_check_rules
    )

    @classmethod
    def from_json(cls, value: object) -> ApprovalPolicy:
        """Build a policy from one approval word or a ``{tool: approval}`` mapping.

        Raises:
            ValueError: the value is neither, an approval word is not one of
                ``APPROVALS``, or a tool name is not a tool; the message names it.
        """
        if isinstance(value, str):
            if not _is_approval(value):
                raise ValueError(f"the approval policy {value!r} is not {_CHOICES}")
            return cls(default=value)
        if not isinstance(value, Mapping):
            raise ValueError(
                f"an approval policy is one of {_CHOICES} or a mapping from tool name to "
                f"one of them, got {value!r}"
            )
        rules: dict[str, Approval] = dict(DEFAULT_APPROVAL_POLICY.rules)
        default: Approval = DEFAULT_APPROVAL_POLICY.default
        if "*" in value:
            # "*" means every tool not named here, the default's own rules included.
            rules = {}
            star = value["*"]
            if not _is_approval(star):
                raise ValueError(f"the approval for '*' is {star!r}; expected {_CHOICES}")
            default = star
        for name, approval in value.items():
            if name == "*":
                continue
            if name not in TOOL_NAMES:
                raise ValueError(
                    f"the approval policy names the tool {name!r}, which does not exist; "
                    f"the tools are {', '.join(TOOL_NAMES)}"
                )
            if not _is_approval(approval):
                raise ValueError(
                    f"the approval for tool {name!r} is {approval!r}; expected {_CHOICES}"
                )
            rules[name] = approval
        return cls(default=default, rules=tuple(rules.items()))

    def for_tool(self, name: str) -> Approval:
        """Return the approval for a call of the tool ``name``."""
        for rule_name, approval in self.rules:
            if rule_name == name:
                return approval
        return self.default

    def to_json(self) -> str | dict[str, str]:
        """Return the policy as ``from_json`` reads it back: one word when no tool is named."""
        if not self.rules:
            return self.default
        return {"*": self.default, **dict(self.rules)}


DEFAULT_APPROVAL_POLICY = ApprovalPolicy(
    default="ask",
    rules=(
        ("edit_file", "ask"),
        ("job_list", "always"),
        ("job_output", "always"),
        ("job_stop", "ask"),
        ("list_dir", "always"),
        ("read_file", "always"),
        ("shell_run", "ask"),
        ("write_file", "ask"),
    ),
)
"""Reading runs at once; anything that changes files or processes asks first.

Tools without a rule (any added later) ask: the safe side.
"""
