"""The `Commit` of one step of an actor: what its handlers did, in one record."""

from __future__ import annotations

from typing import Any

from ..actors import Effects
from ..codec import dumps
from ..store import Commit, NewEvent

__all__ = ["build_commit"]


def build_commit(
    address: str,
    state_version: int,
    effects: Effects,
    state: bytes | None,
    busy: bool | None,
    cursor: int | None,
    lifecycle: dict[str, Any],
    now: float,
) -> Commit:
    """The commit of ``effects`` (events, sends, timers, appends), the new
    snapshot ``state`` (None: unchanged), the ``cursor`` handled up to, and
    the bookkeeping in ``lifecycle`` (``status``, ``final``, ``restarts``,
    ``last_error``, ``dead_letter``). An actor that stopped itself
    (``ctx.stop``) ends final with its status, announced as ``actor.stopped``.
    """
    status, final = lifecycle.pop("status", None), lifecycle.pop("final", None)
    if effects.final_status is not None:
        status, final = effects.final_status, True
        effects.events.append(NewEvent("actor.stopped", dumps({"status": status}), now))
    return Commit(
        address,
        state=state,
        state_version=state_version if state is not None else None,
        cursor=cursor,
        events=tuple(effects.events),
        sends=tuple(effects.sends),
        timers=tuple(effects.timers),
        cancel_timers=tuple(effects.cancel_timers),
        appends=tuple(effects.appends),
        status=status,
        final=final,
        busy=False if final else busy,
        **lifecycle,
    )
