"""What a crash leads to, decided without I/O: restart, fail, escalate, dead-letter."""

from __future__ import annotations

import enum

from ..actors import Supervision
from ..codec import loads
from ..errors import CrashReason, Permanent
from ..mailbox import Message

__all__ = ["Verdict", "crash_verdict", "died_handling"]


class Verdict(enum.Enum):
    RESTART = "restart"
    """Restart after the backoff (the restart window is not exceeded)."""
    FAIL = "fail"
    """End the actor as failed: a temporary one, a `Permanent` error (a
    snapshot that cannot be restored, a setting it cannot work with: a
    restart would meet it again), or too many restarts with
    ``on_intensity="stop"``."""
    ESCALATE = "escalate"
    """Fail, then raise `Escalation` to the runtime's supervisor."""
    DEAD_LETTER = "dead_letter"
    """Too many restarts while handling the next message: set it aside and go
    on (or fail, if that message is no longer there to set aside)."""


def crash_verdict(
    policy: Supervision, exc: BaseException, exceeded: bool, failed_seq: int | None, cursor: int
) -> Verdict:
    """The verdict on a crash of an actor supervised by ``policy``; ``exceeded``
    says the crash went past the restart window, ``failed_seq`` is the message
    being handled (None outside a handler), ``cursor`` the last one committed."""
    if isinstance(exc, Permanent) or policy.restart == "temporary":
        return Verdict.FAIL
    if not exceeded:
        return Verdict.RESTART
    if policy.on_intensity == "escalate":
        return Verdict.ESCALATE
    if policy.on_intensity == "dead_letter" and failed_seq == cursor + 1:
        return Verdict.DEAD_LETTER
    return Verdict.FAIL


def died_handling(
    message: Message, address: str, last_error: bytes | None, last_error_seq: int | None
) -> CrashReason:
    """Why ``message`` failed before: its recorded crash, or the process dying
    (a delivery counted as an attempt that never committed)."""
    if last_error is not None and last_error_seq == message.seq:
        data = loads(last_error)
        return CrashReason(data["type"], data["message"], data.get("traceback", ""))
    return CrashReason(
        "ProcessDied",
        f"the runtime process ended {message.attempt - 1} times while handling "
        f"message {message.seq} of {address}",
    )
