"""A model client that lets the owner add messages right before each model call.

A busy session gets machine events (a background job finished) while its
turn runs. They must reach the model at the turn's next step, and only at a
step boundary: between an assistant message with tool calls and the tool
results nothing may stand. The one moment that is always such a boundary is
the start of a model call, so the session hands `drive_turn` this client,
whose ``before_call`` returns the messages to add (and records them in the
conversation log, in the commit that will record the model's answer).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from ..llm import AssistantReply, ChatClient, RetryNotice

__all__ = ["EventClient"]


@attrs.define
class EventClient(ChatClient):
    """`ChatClient`, plus the messages ``before_call()`` returns, appended to each request."""

    before_call: Callable[[], list[dict[str, Any]]] | None = attrs.field(
        default=None, kw_only=True, repr=False
    )

    async def stream_chat(
        self,
        *,
        base_url: str,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        on_delta: Callable[[str], object] | None = None,
        on_retry: Callable[[RetryNotice], object] | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> AssistantReply:
        """`ChatClient.stream_chat` with ``before_call()``'s messages at the end."""
        added = self.before_call() if self.before_call is not None else []
        return await super().stream_chat(
            base_url=base_url,
            model=model,
            messages=[*messages, *added],
            tools=tools,
            on_delta=on_delta,
            on_retry=on_retry,
            extra_body=extra_body,
        )
