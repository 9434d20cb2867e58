"""What ``inspect`` adds about a session or task: its conversation's length and its last turn.

Read from the conversation log's last items (at most `_TAIL`), so the cost
does not grow with the conversation: the last ``user`` item begins the last
turn, the last ``assistant`` text after it is that turn's answer, and the
``tool`` items between are its tool calls. A turn still running is taken
from the snapshot's journal, with the outage it is parked through, if
any. Read only: nothing is written.
"""

from __future__ import annotations

from typing import Any

from ..actors import Logs

__all__ = ["conversation_summary"]

_TAIL = 200  # conversation items read from the end of the log


async def conversation_summary(state: Any, logs: Logs, log: str = "conversation") -> dict[str, Any]:
    """``{"conversation": N, "last_turn": {...} | None, "running": {...} | None}``."""
    length = await logs.log_length(log)
    start = max(0, length - _TAIL)
    items = await logs.read_log(log, start, _TAIL) if length else []
    users = [i for i, item in enumerate(items) if _role(item) == "user"]
    last_turn = None
    if users:
        first = users[-1]
        after = items[first + 1 :]
        answers = [item.get("content") for item in after if _role(item) == "assistant"]
        answers = [a for a in answers if isinstance(a, str) and a]
        last_turn = {
            "at": start + first,
            "prompt": items[first].get("content"),
            "answer": answers[-1] if answers else None,
            "tool_calls": sum(1 for item in after if _role(item) == "tool"),
        }
    active = state.get("active") if isinstance(state, dict) else None
    running = None
    if isinstance(active, dict):
        running = {k: active.get(k) for k in ("turn_id", "prompt", "phase")}
        running["outage"] = _outage(active.get("outage"))
    return {"conversation": length, "last_turn": last_turn, "running": running}


def _outage(outage: Any) -> dict[str, Any] | None:
    """A turn parked through a model outage (``_outage``): how many asks failed since
    when, the last error, and when the next ask is due (None while it is asked)."""
    if not isinstance(outage, dict):
        return None
    return {
        "attempt": outage.get("failures"),
        "since": outage.get("since"),
        "retry_at": outage.get("retry_at") if outage.get("waiting") else None,
        "error": outage.get("error"),
        "status": outage.get("status"),
    }


def _role(item: Any) -> Any:
    return item.get("role") if isinstance(item, dict) else None
