"""The text a finished job leaves in its owner's mailbox (pure: no trio)."""

from __future__ import annotations

import re

__all__ = ["fence", "machine_event_text"]


def fence(text: str) -> str:
    """Fence ``text`` with more backticks than any run inside it, so output
    that contains backticks cannot close the fence early."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}\n{text}\n{ticks}"


def machine_event_text(
    job_id: str, command: str, status: str, exit_code: int | None, tail: str, reason: str = ""
) -> str:
    """What the owner's model reads: it names itself a machine event, not a person."""
    if exit_code is None:
        outcome = status
    elif status == "exited":
        outcome = f"exited {exit_code}"
    else:
        outcome = f"{status}, exit status {exit_code}"
    lines = [
        f"[machine event] background job {job_id} finished ({outcome}). "
        "This message comes from callboard, not from the user.",
        f"command: {command}",
    ]
    if reason:
        lines.append(f"reason: {reason}")
    lines.append("last output:" if tail else "no output.")
    if tail:
        lines.append(fence(tail))
    return "\n".join(lines)
