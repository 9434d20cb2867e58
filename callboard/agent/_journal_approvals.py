"""A person's answers to a turn's approval requests, recorded in its journal.

A tool call the policy holds for approval is asked (`record_approval_asked`,
with a deadline if the kind sets one), then answered from a message
(`answer_approval`: an ``approve`` with ``call_id``, ``approved`` and
``reason``). Pure, as the rest of the journal (`_journal`) is.
"""

from __future__ import annotations

from ._journal import OnExpiry, TurnJournal, pending_call

__all__ = ["answer_approval", "record_approval", "record_approval_asked"]


def record_approval_asked(
    turn: TurnJournal,
    call_id: str,
    at: float | None = None,
    *,
    deadline_at: float | None = None,
    on_expiry: OnExpiry = "deny",
) -> None:
    """``call_id`` now waits for a person's answer (asked at wall time ``at``),
    until ``deadline_at`` if there is one, when it becomes ``on_expiry``."""
    call = pending_call(turn, call_id)
    call.approval = "asked"
    call.asked_at = at
    call.deadline_at = deadline_at
    call.on_expiry = on_expiry


def record_approval(
    turn: TurnJournal, call_id: str, approved: bool, reason: str | None = None
) -> bool:
    """Record a person's answer (and their reason); False if ``call_id`` is not
    waiting for one."""
    try:
        call = turn.call(call_id)
    except KeyError:
        return False
    if call.approval != "asked" or call.status != "pending":
        return False
    call.approval = "approved" if approved else "denied"
    call.reason = reason
    return True


def answer_approval(
    turn: TurnJournal | None, call_id: object, approved: object, reason: str | None = None
) -> str:
    """Record a person's answer from a message; returns the call id it answered.

    ``call_id`` may be left out when exactly one call waits. Raises
    ValueError with a sentence saying why the answer cannot apply, naming
    the calls that do wait.
    """
    waiting = [] if turn is None else [c.id for c in turn.awaiting_approval()]
    if call_id is None and len(waiting) == 1:
        call_id = waiting[0]
    if not isinstance(approved, bool):
        raise ValueError(f"'approved' must be true or false, got {approved!r}")
    if call_id is None:
        if not waiting:
            raise ValueError("no tool call is waiting for approval")
        raise ValueError(
            f"{len(waiting)} tool calls are waiting for approval ({_listed(waiting)}): "
            "name one with 'call_id'"
        )
    if turn is None or not isinstance(call_id, str) or not record_approval(
        turn, call_id, approved, reason
    ):  # fmt: skip
        also = f"; waiting: {_listed(waiting)}" if waiting else ""
        raise ValueError(f"no tool call {call_id!r} is waiting for approval{also}")
    return call_id


def _listed(call_ids: list[str]) -> str:
    return ", ".join(repr(c) for c in call_ids)
