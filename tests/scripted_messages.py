"""The scripted model's Anthropic side: replies written as Messages API events, and
Messages API requests read back in the chat shape the tests assert on.

A script is written once (``text``, ``tool_call``, ``hold``...) and served in
either wire format: ``ScriptedModel(script, wire="anthropic")`` answers
``POST /v1/messages`` with what the Anthropic API streams for the same
answer: ``message_start`` (with the prompt's usage), ``ping``, one
content block per text run or tool call (``text_delta``,
``input_json_delta`` pieces), ``message_delta`` (``stop_reason``, output
usage) and ``message_stop``, each as an ``event:`` and a ``data:`` line.

``chat_request`` turns a Messages request back into an OpenAI chat request
(system message first, ``tool_result`` blocks as ``tool`` messages,
``tool_use`` blocks as ``tool_calls``), so a test parametrized over the wire
asserts on one shape. The translation the other way is the client's, and
``test_llm_anthropic`` checks it against literal Messages requests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["STOP_REASONS", "MessagesWriter", "chat_request", "error_body"]

STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
"""A script's finish reason (OpenAI's word) as the Messages API's ``stop_reason``."""


class _Exchange(Protocol):
    number: int
    body: dict[str, Any]

    def start_chunked(self, code: int, content_type: str) -> None: ...
    def send_chunk(self, data: bytes) -> None: ...
    def end_chunked(self) -> None: ...


def error_body(code: int, message: str) -> dict[str, Any]:
    """An Anthropic error body of the type the API sends with ``code``."""
    kinds = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        529: "overloaded_error",
    }
    kind = kinds.get(code, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


class MessagesWriter:
    """Writes one streamed answer as Messages API events (the module docstring)."""

    def __init__(
        self,
        exchange: _Exchange,
        crlf: bool,
        comment: str | None,
        usage: Mapping[str, int] | None,
    ) -> None:
        self._exchange = exchange
        self._newline = "\r\n" if crlf else "\n"
        self._usage = usage
        self._index = -1
        self._open: str | None = None  # the kind of the block being written
        model = exchange.body.get("model")
        exchange.start_chunked(200, "text/event-stream")
        if comment is not None:
            self._send(f": {comment}")
        prompt = (usage or {}).get("prompt_tokens", 0)
        message = {
            "id": f"msg_scripted_{exchange.number}",
            "type": "message",
            "role": "assistant",
            "model": model if isinstance(model, str) else "scripted",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": prompt, "output_tokens": 1},
        }
        self._event("message_start", {"message": message})
        self._event("ping", {})

    def text(self, piece: str) -> None:
        if self._open != "text":
            self._start({"type": "text", "text": ""})
        self._event("content_block_delta", {"index": self._index, "delta": {
            "type": "text_delta", "text": piece}})  # fmt: skip

    def tool_call(self, call_id: str, name: str, pieces: list[str]) -> None:
        self._start({"type": "tool_use", "id": call_id, "name": name, "input": {}})
        for piece in pieces:
            self._event("content_block_delta", {"index": self._index, "delta": {
                "type": "input_json_delta", "partial_json": piece}})  # fmt: skip
        self._stop()

    def finish(self, finish_reason: str) -> None:
        self._stop()
        reason = STOP_REASONS.get(finish_reason, finish_reason)
        output = (self._usage or {}).get("completion_tokens", 0)
        delta = {"stop_reason": reason, "stop_sequence": None}
        self._event("message_delta", {"delta": delta, "usage": {"output_tokens": output}})
        self._event("message_stop", {})
        self._exchange.end_chunked()

    def _start(self, block: dict[str, Any]) -> None:
        self._stop()
        self._index += 1
        self._open = block["type"]
        self._event("content_block_start", {"index": self._index, "content_block": block})

    def _stop(self) -> None:
        if self._open is not None:
            self._event("content_block_stop", {"index": self._index})
            self._open = None

    def _event(self, kind: str, data: dict[str, Any]) -> None:
        payload = json.dumps({"type": kind, **data}, ensure_ascii=False)
        self._send(f"event: {kind}{self._newline}data: {payload}")

    def _send(self, text: str) -> None:
        self._exchange.send_chunk((text + self._newline * 2).encode())


def chat_request(body: dict[str, Any]) -> dict[str, Any]:
    """A Messages API request as the OpenAI chat request it stands for (module docstring)."""
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if isinstance(system, str):
        messages.append({"role": "system", "content": system})
    elif isinstance(system, list):
        messages.append({"role": "system", "content": "".join(b["text"] for b in system)})
    for message in body.get("messages", []):
        content = message["content"]
        if isinstance(content, str):
            messages.append({"role": message["role"], "content": content})
            continue
        texts = [b["text"] for b in content if b["type"] == "text"]
        if message["role"] == "assistant":
            calls = [
                {
                    "id": b["id"],
                    "type": "function",
                    "function": {"name": b["name"], "arguments": json.dumps(b["input"])},
                }
                for b in content
                if b["type"] == "tool_use"
            ]
            said: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
            if calls:
                said["tool_calls"] = calls
            messages.append(said)
            continue
        for block in content:
            if block["type"] == "tool_result":
                result = block["content"]
                messages.append({"role": "tool", "tool_call_id": block["tool_use_id"]})
                messages[-1]["content"] = result
        if texts:
            messages.append({"role": "user", "content": "".join(texts)})
    tools = [_chat_tool(tool) for tool in body.get("tools", [])]
    chat = {key: value for key, value in body.items() if key not in ("system", "messages", "tools")}
    return {**chat, "messages": messages, **({"tools": tools} if tools else {})}


def _chat_tool(tool: dict[str, Any]) -> dict[str, Any]:
    function = {"name": tool["name"], "parameters": tool["input_schema"]}
    if "description" in tool:
        function["description"] = tool["description"]
    return {"type": "function", "function": function}
