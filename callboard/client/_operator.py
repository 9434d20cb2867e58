"""`OperatorOps`: the gateway's operator ops as `Client` methods (docs/protocol.md,
"Operator ops"), returning the embedded runtime's types.

A mixin of `Client`, over its ``_request``. ``approvals`` and
``dead_letters`` are reads, repeated on a new connection like ``list``;
``requeue``, ``delete`` and ``send_and_wait`` are not (the first attempt
may have been applied).
"""

from __future__ import annotations

from typing import Any

from ..errors import CrashReason
from ..mailbox import Ack, DeadLetter
from ..views import MessageOutcome, PendingApproval
from ._wire import field, parse_at

__all__ = ["READS", "OperatorOps"]

READS = frozenset({"approvals", "dead_letters"})
"""The operator ops a client may repeat after a lost connection."""


class OperatorOps:
    async def _request(self, op: str, fields: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError  # the client's own

    async def approvals(self, address: str | None = None) -> list[PendingApproval]:
        """The tool calls waiting for a person's answer (of ``address``), as
        `Runtime.approvals` gives them; a scoped token sees only its actors'."""
        fields = {} if address is None else {"actor": address}
        reply = await self._request("approvals", fields)
        return [_approval(row) for row in field(reply, "approvals", list)]

    async def approve(
        self, address: str, call_id: str | None = None, *, approved: bool = True,
        reason: str | None = None, always: bool = False,
    ) -> MessageOutcome:  # fmt: skip
        """Answer a waiting approval (``call_id`` may be left out when one call
        waits) and return how the actor took it: ``rejected`` with the reason
        when the answer could not apply. ``reason`` reaches the model;
        ``always`` also allows the tool for the rest of the session."""
        body: dict[str, Any] = {"approved": approved}
        if call_id is not None:
            body["call_id"] = call_id
        if reason is not None:
            body["reason"] = reason
        if always:
            body["scope"] = "session"
        _, outcome = await self.send_and_wait(address, "approve", body)
        return outcome

    async def send_and_wait(
        self, to: str, type: str, body: Any = None, key: str | None = None
    ) -> tuple[Ack, MessageOutcome]:
        """``send`` that returns once the actor has handled the message: its ack,
        and how it came out (`MessageOutcome`: handled, rejected, dead-lettered,
        or not handled because the actor ended first)."""
        fields: dict[str, Any] = {"to": to, "type": type, "body": body, "wait": True}
        if key is not None:
            fields["key"] = key
        reply = await self._request("send", fields)
        ack = Ack(field(reply, "seq", int), field(reply, "duplicate", bool))
        reason = field(reply, "reason", str) if "reason" in reply else None
        return ack, MessageOutcome(field(reply, "outcome", str), reason)

    async def dead_letters(self, address: str | None = None) -> list[DeadLetter]:
        """The messages set aside (of ``address``), oldest first, as `Runtime.dead_letters`."""
        fields = {} if address is None else {"actor": address}
        reply = await self._request("dead_letters", fields)
        return [_dead_letter(row) for row in field(reply, "dead_letters", list)]

    async def requeue(self, dead_letter_id: int) -> Ack:
        """Put a dead letter back at the end of its actor's mailbox; its new seq."""
        reply = await self._request("requeue", {"dead_letter": dead_letter_id})
        return Ack(field(reply, "seq", int), False)

    async def delete(self, address: str) -> None:
        """Remove an actor that has ended, so its name can be spawned again."""
        await self._request("delete", {"actor": address})


def _approval(row: dict[str, Any]) -> PendingApproval:
    at = field(row, "requested_at", str, type(None))
    # Absent when the approval has no deadline (and from a server before deadlines).
    deadline = field(row, "deadline_at", str, type(None)) if "deadline_at" in row else None
    return PendingApproval(
        actor=field(row, "actor", str),
        call_id=field(row, "call_id", str),
        tool=field(row, "tool", str),
        arguments=row.get("arguments"),
        requested_at=parse_at(at) if at is not None else None,
        deadline_at=parse_at(deadline) if deadline is not None else None,
        on_expiry=field(row, "on_expiry", str) if deadline is not None else None,
    )


def _dead_letter(row: dict[str, Any]) -> DeadLetter:
    error = CrashReason(
        field(row, "error_type", str), field(row, "error", str), field(row, "traceback", str)
    )
    return DeadLetter(
        id=field(row, "id", int),
        actor=field(row, "actor", str),
        seq=field(row, "seq", int),
        type=field(row, "type", str),
        body=row.get("body"),
        attempts=field(row, "attempts", int),
        error=error,
        at=parse_at(field(row, "at", str)),
        sender=field(row, "sender", str, type(None)),
        key=field(row, "key", str, type(None)),
    )
