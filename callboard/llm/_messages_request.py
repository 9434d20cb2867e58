"""An OpenAI-shaped conversation, written as an Anthropic Messages API request.

Pure: no I/O. The turn journal records the conversation in OpenAI's shape
(``system``, ``user``, ``assistant`` with ``tool_calls``, ``tool``
messages), whatever the provider; this module is the one place that knows
how the Messages API spells the same thing:

- ``system`` messages become the top-level ``system`` text blocks;
- an assistant's ``tool_calls`` become ``tool_use`` blocks after its text,
  each ``input`` the call's parsed JSON arguments (an object; arguments
  that are not one, which the tool layer already answered with an error,
  are sent as ``{}`` so the request stays valid);
- ``tool`` messages become ``tool_result`` blocks of a user message;
- consecutive messages of one role are merged into one message (the API
  wants the roles to alternate), tool results first, and empty text is
  left out (the API refuses empty text blocks);
- tools ``{"type": "function", "function": {name, description,
  parameters}}`` become ``{name, description, input_schema}``.

Prompt caching, when asked (the client's default): a ``cache_control:
{"type": "ephemeral"}`` breakpoint on the system prompt (which caches the
tools too, since they come first in the prompt) or, with no system prompt,
on the last tool; and one on the last block of the last message, so the
next request of the turn (the same conversation and one more tool round)
reads everything before it from the cache. Two of the API's four
breakpoints; no beta header is needed. A prompt shorter than the model's
minimum cacheable length is simply not cached.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["ANTHROPIC_VERSION", "messages_request", "messages_url"]

ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header: the API version whose formats this package reads."""

_EPHEMERAL = {"type": "ephemeral"}


def messages_url(base_url: str) -> str:
    """``{base_url}/v1/messages``; a base URL that already ends in ``/v1`` is taken as is."""
    base = base_url.rstrip("/")
    return f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"


def messages_request(
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    max_tokens: int,
    cache: bool,
    extra_body: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of a streamed Messages API request for this conversation.

    ``extra_body`` adds fields (``max_tokens``, ``temperature``, ``thinking``...);
    it cannot override ``model``, ``messages`` or streaming, nor ``system`` and
    ``tools`` when the conversation has them.

    Raises:
        ValueError: a message of the conversation has a role or a shape the
            journal never writes (a sentence naming it).
    """
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for position, message in enumerate(messages):
        role = message.get("role")
        if role == "system":
            system += _text_blocks(message.get("content"), position)
        elif role == "user":
            _add(turns, "user", _text_blocks(message.get("content"), position))
        elif role == "assistant":
            blocks = _text_blocks(message.get("content"), position)
            blocks += [_tool_use(call, position) for call in message.get("tool_calls") or ()]
            _add(turns, "assistant", blocks)
        elif role == "tool":
            _add(turns, "user", [_tool_result(message, position)])
        else:
            raise ValueError(f"message {position} of the conversation has role {role!r}")
    body: dict[str, Any] = {"max_tokens": max_tokens, **(extra_body or {})}
    anthropic_tools = [_tool(tool) for tool in tools or ()]
    if cache:
        if system:
            system[-1]["cache_control"] = dict(_EPHEMERAL)
        elif anthropic_tools:
            anthropic_tools[-1]["cache_control"] = dict(_EPHEMERAL)
        if turns:
            turns[-1]["content"][-1]["cache_control"] = dict(_EPHEMERAL)
    body.update(model=model, messages=turns, stream=True)
    if system:
        body["system"] = system
    if anthropic_tools:
        body["tools"] = anthropic_tools
    return body


def _add(turns: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    if not blocks:
        return
    if turns and turns[-1]["role"] == role:
        merged = turns[-1]["content"] + blocks
        # A tool_result must come first in the user message after a tool_use.
        merged.sort(key=lambda block: block["type"] != "tool_result")
        turns[-1]["content"] = merged
    else:
        turns.append({"role": role, "content": blocks})


def _text_blocks(content: object, position: int) -> list[dict[str, Any]]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):  # OpenAI content parts: only text is ever written
        texts = [part.get("text") for part in content if isinstance(part, dict)]
        return [{"type": "text", "text": text} for text in texts if isinstance(text, str) and text]
    raise ValueError(f"message {position} of the conversation has content {content!r}")


def _tool_use(call: Mapping[str, Any], position: int) -> dict[str, Any]:
    function = call.get("function")
    if not isinstance(function, Mapping) or not isinstance(call.get("id"), str):
        raise ValueError(f"message {position} of the conversation has a tool call {call!r}")
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except ValueError:
        arguments = {}
    return {
        "type": "tool_use",
        "id": call["id"],
        "name": function.get("name"),
        "input": arguments if isinstance(arguments, dict) else {},
    }


def _tool_result(message: Mapping[str, Any], position: int) -> dict[str, Any]:
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str):
        raise ValueError(f"message {position} of the conversation is a tool result without an id")
    content = message.get("content")
    return {
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": content if isinstance(content, str) else json.dumps(content),
    }


def _tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    function = tool.get("function", tool)
    converted = {
        "name": function["name"],
        "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
    }
    if function.get("description"):
        converted["description"] = function["description"]
    return converted
