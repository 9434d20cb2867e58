"""What a caller is told about actors: the same types in the runtime and the client."""

from __future__ import annotations

from typing import Any

import attrs

from ..mailbox import format_at

__all__ = ["ActorInfo", "ActorView", "MessageOutcome", "PendingApproval"]


@attrs.frozen
class ActorView:
    """What `Runtime.inspect` tells about one actor.

    ``spec`` is the spec it was spawned with, its secrets masked
    (`mask_secrets`); ``summary`` what its kind adds (a session's
    conversation length and last turn), or None.
    """

    actor: str
    kind: str
    status: str
    state: Any
    cursor: int
    mailbox: int
    head: int
    restarts: int
    last_error: dict[str, Any] | None
    spec: Any = None
    summary: dict[str, Any] | None = None
    owner: str | None = None
    """The node it is active on (several nodes on one store); None on one node."""


@attrs.frozen
class ActorInfo:
    """One row of `Runtime.list`."""

    actor: str
    status: str
    mailbox: int
    restarts: int
    owner: str | None = None
    """The node it is active on (several nodes on one store); None on one node."""


@attrs.frozen
class PendingApproval:
    """A tool call that waits for a person's answer (`Runtime.approvals`).

    ``arguments`` are the call's arguments as JSON (the text the model sent
    when it is no JSON); ``requested_at`` is when it was asked (wall time,
    seconds), None for a call asked before callboard recorded it;
    ``deadline_at`` is when it expires unanswered (None: it waits for ever),
    becoming ``on_expiry`` (``deny`` or ``approve``).
    """

    actor: str
    call_id: str
    tool: str
    arguments: Any
    requested_at: float | None
    deadline_at: float | None = None
    on_expiry: str | None = None

    def to_json(self) -> dict[str, Any]:
        """As docs/protocol.md's ``approvals`` reply has it (the deadline only when
        there is one)."""
        at = self.requested_at
        row = {
            "actor": self.actor,
            "call_id": self.call_id,
            "tool": self.tool,
            "arguments": self.arguments,
            "requested_at": format_at(at) if at is not None else None,
        }
        if self.deadline_at is not None:
            row["deadline_at"] = format_at(self.deadline_at)
            row["on_expiry"] = self.on_expiry
        return row


@attrs.frozen
class MessageOutcome:
    """How a message came out once its actor handled it (`Runtime.wait_outcome`,
    ``send --wait``): ``handled``; ``rejected`` (the actor said why, in a
    ``message.rejected`` event); ``dead_lettered`` (it failed too often); or
    ``not_handled`` (the actor ended first). ``reason`` unless handled."""

    status: str
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "handled"
