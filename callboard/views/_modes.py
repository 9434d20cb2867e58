"""The modes of a prompt (a session's ``prompt``, a task's follow-up ``message``).

Here, below the agent and the client, so that both name the same words: the
session and task kinds structure a body's ``mode`` as `PromptMode`, and the
task operations check it before they send (`check_mode`).
"""

from __future__ import annotations

import typing
from typing import Literal

from ..errors import BadMessage

__all__ = ["PROMPT_MODES", "PromptMode", "check_mode"]

PromptMode = Literal["queue", "steer", "interrupt"]
"""``queue`` (the default): wait for the turns before it; ``steer``: join the running
turn at its next model call; ``interrupt``: cancel the running turn and start one."""

PROMPT_MODES: tuple[PromptMode, ...] = typing.get_args(PromptMode)


def check_mode(mode: object) -> PromptMode:
    """``mode`` if it is one of `PROMPT_MODES`; else `BadMessage` naming them."""
    for known in PROMPT_MODES:
        if mode == known and isinstance(mode, str):
            return known
    words = ", ".join(repr(m) for m in PROMPT_MODES)
    raise BadMessage(f"a prompt's mode is one of {words}, got {mode!r}")
