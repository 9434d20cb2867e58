"""How a prompt meets a running turn: its ``mode`` (``queue``, ``steer``, ``interrupt``).

A session's ``prompt`` and a task's follow-up ``message`` take a ``mode``:

- ``queue`` (the default) waits for the turns before it, as it always did.
- ``steer`` joins the running turn. It waits in the snapshot (a session's
  ``steering``, a task's message with status ``steering``), announced as
  ``steer.accepted``, until the turn's next model call: after the tool round
  under way, or at once if the model is answering (its answer, if text, does
  not end the turn: the model is asked again with the steer). There the
  runner's hook (`drive_turn`'s ``before_model_call``) appends it to the
  conversation as a user message, takes it off the waiting list and emits
  ``turn.steered``; `drive_turn` commits that before it asks the model. So a
  crash before that commit leaves the steer waiting and the resumed turn
  takes it; a crash after it leaves it in the log and off the list: the model
  reads it exactly once either way.
- ``interrupt`` cancels the running turn where it stands (as ``cancel``
  does: the model stream closes, a running tool stops) and puts the prompt
  first in line, so the runner starts its turn next. The old turn ends with
  ``turn.interrupted``, whose ``by`` names the prompt.

With no turn running, ``steer`` and ``interrupt`` are queued like any prompt
(a session that is idle starts a turn for it). A turn that ends without
taking what was steered into it (cancelled, interrupted, failed) hands the
steers back as prompts of their own, first in line, so none is lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from ..actors import Context
from ._journal import TurnJournal
from ._turn import ConversationLog
from ._turn_runner import turn_event

__all__ = ["Steer", "announce_steer", "interrupted_by", "steer_into"]


@attrs.define
class Steer:
    """A prompt waiting to join the running turn at its next model call."""

    id: str
    text: str


def announce_steer(ctx: Context, turn: TurnJournal, steer: Steer) -> None:
    """Say that ``steer`` waits for ``turn``'s next model call (``steer.accepted``)."""
    ctx.emit("steer.accepted", {**turn_event(turn), "id": steer.id, "text": steer.text})


def steer_into(
    ctx: Context, turn: TurnJournal, chat: ConversationLog, steers: Sequence[Steer]
) -> list[dict[str, Any]]:
    """Append ``steers`` to ``turn``'s conversation, a user message each, and announce
    each as ``turn.steered``; returns the items. The caller takes them off the list
    they waited on, in the same commit."""
    items = [{"role": "user", "content": steer.text} for steer in steers]
    chat.append(ctx, items)
    for steer in steers:
        ctx.emit("turn.steered", {**turn_event(turn), "id": steer.id, "text": steer.text})
    return items


def interrupted_by(turn: TurnJournal, prompt_id: str) -> dict[str, Any]:
    """The data of ``turn.interrupted`` for a turn the prompt ``prompt_id`` interrupted."""
    return turn_event(turn, by=prompt_id, reason=f"interrupted by {prompt_id}")
