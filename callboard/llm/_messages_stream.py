"""A streamed Anthropic Messages API answer, accumulated into one finished reply.

Pure: no I/O, no trio. The client feeds it the JSON of each event; it gives
back the same :class:`AssistantReply` an OpenAI-compatible stream gives, so
the turn journal never learns which provider answered.

What a stream looks like: ``message_start`` (the message, with the prompt's
``usage``), then per content block a ``content_block_start`` (a ``text``,
``tool_use`` or ``thinking`` block at an ``index``), its
``content_block_delta`` pieces (``text_delta``, ``input_json_delta`` with a
``partial_json`` piece of the tool's input, ``thinking_delta``;
``signature_delta`` and ``citations_delta`` are read and dropped) and a
``content_block_stop``; then ``message_delta`` (``stop_reason``, the final
``usage``) and ``message_stop``. ``ping`` may come anywhere; ``error``
(``{"type": "error", "error": {"type": "overloaded_error", ...}}``) replaces
the rest. Event types and block types this module does not know are
skipped, as the API's versioning policy asks of clients.

Into the shared reply: text blocks joined are ``content``, thinking is
``reasoning``, each ``tool_use`` block is a :class:`ToolCall` whose
``arguments`` is the JSON text of its input. ``stop_reason`` is given in the
OpenAI words the rest of callboard reads (``end_turn`` and ``stop_sequence``
are ``stop``, ``tool_use`` is ``tool_calls``, ``max_tokens`` and
``model_context_window_exceeded`` are ``length``, ``refusal`` is
``content_filter``; any other is kept as it came). ``usage`` is written in
OpenAI's terms too: ``prompt_tokens`` counts every prompt token, cached or
not (``input_tokens`` + ``cache_creation_input_tokens`` +
``cache_read_input_tokens``), ``completion_tokens`` is ``output_tokens``,
and ``prompt_tokens_details`` says how many were read from the cache
(``cached_tokens``) and written to it (``cache_creation_tokens``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import attrs

from callboard.errors import ModelError

from ._accumulate import AssistantReply, ToolCall
from ._classify import stream_error
from ._deltas import DeltaKind, StreamDelta

__all__ = ["FINISH_REASONS", "MessagesAccumulator", "chat_usage"]

_T = TypeVar("_T")

FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
"""Anthropic's ``stop_reason`` in the OpenAI ``finish_reason`` words callboard reads."""

_READ_BLOCKS = frozenset({"text", "thinking", "tool_use"})

_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def chat_usage(usage: dict[str, Any]) -> dict[str, Any]:
    """Anthropic's token accounting in the OpenAI shape of ``AssistantReply.usage``."""

    def count(field: str) -> int:
        value = usage.get(field)
        return value if type(value) is int else 0

    created, read = count("cache_creation_input_tokens"), count("cache_read_input_tokens")
    prompt = count("input_tokens") + created + read
    completion = count("output_tokens")
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": read, "cache_creation_tokens": created},
    }


@attrs.define
class _Block:
    kind: str  # "text", "tool_use", "thinking", or a kind we skip
    id: str = ""
    name: str = ""
    parts: list[str] = attrs.Factory(list)
    start_input: str = ""  # the input the start event carried whole, as JSON text


@attrs.define
class MessagesAccumulator:
    """Adds events one at a time (:meth:`add_event`), then builds the reply (:meth:`finish`).

    ``scrub`` is applied to any server text an error quotes, before it is cut
    to length (the client passes one that removes its API key).
    """

    scrub: Callable[[str], str] = attrs.field(default=str, kw_only=True, repr=False)
    _blocks: dict[int, _Block] = attrs.field(factory=dict, init=False)
    _stop_reason: str | None = attrs.field(default=None, init=False)
    _usage: dict[str, Any] = attrs.field(factory=dict, init=False)
    _stopped: bool = attrs.field(default=False, init=False)
    _count: int = attrs.field(default=0, init=False)

    @property
    def stopped(self) -> bool:
        """Whether ``message_stop`` arrived: what follows it is not part of the answer."""
        return self._stopped

    @property
    def complete(self) -> bool:
        """Whether the answer is whole: ``message_stop``, or a ``stop_reason``, arrived."""
        return self._stopped or self._stop_reason is not None

    def add_event(self, event: object, name: str = "") -> list[StreamDelta]:
        """Fold one parsed event in (``name`` is its ``event:`` field, used when the
        data has no ``type``); return every piece of the answer it added."""
        self._count += 1
        if not isinstance(event, dict):
            self._malformed("it must be a JSON object", event)
        kind = event.get("type", name)
        if kind == "error":
            raise stream_error(event.get("error", event), self.scrub)
        if kind == "message_start":
            message = self._expect(event.get("message"), dict, "'message' must be an object")
            self._add_usage(message.get("usage"))
        elif kind == "content_block_start":
            block = self._expect(
                event.get("content_block"), dict, "'content_block' must be an object"
            )
            return self._start(self._index(event), block)
        elif kind == "content_block_delta":
            delta = self._expect(event.get("delta"), dict, "'delta' must be an object")
            return self._delta(self._index(event), delta)
        elif kind == "message_delta":
            delta = self._expect(event.get("delta"), dict, "'delta' must be an object")
            reason = delta.get("stop_reason")
            if reason is not None:
                self._stop_reason = self._expect(reason, str, "'stop_reason' must be a string")
            self._add_usage(event.get("usage"))
        elif kind == "message_stop":
            self._stopped = True
        return []  # ping, content_block_stop, and types of a later API version

    def finish(self) -> AssistantReply:
        """Build the reply: text blocks joined, tool calls in block order.

        A stream that carried no text, no tool call and no stop reason raises,
        as an OpenAI-compatible one does (``_accumulate``): it is an error the
        server did not describe, not an empty answer.
        """
        blocks = [self._blocks[index] for index in sorted(self._blocks)]
        content = "".join("".join(b.parts) for b in blocks if b.kind == "text")
        reasoning = "".join("".join(b.parts) for b in blocks if b.kind == "thinking")
        calls = tuple(
            ToolCall(id=b.id, name=b.name, arguments="".join(b.parts) or b.start_input or "{}")
            for b in blocks
            if b.kind == "tool_use"
        )
        if not (content or calls or self._stop_reason):
            thought = f" ({len(reasoning)} characters of thinking only)" if reasoning else ""
            raise ModelError(
                f"the model's stream ended with no text, no tool call and no stop_reason "
                f"after {self._count} events{thought}: an empty answer is how some servers "
                "report an error they do not describe, so it is not recorded as a reply",
                retryable=True,
            )
        reason = self._stop_reason
        return AssistantReply(
            content=content,
            tool_calls=calls,
            finish_reason=FINISH_REASONS.get(reason, reason) if reason is not None else None,
            usage=chat_usage(self._usage) if self._usage else None,
            reasoning=reasoning,
        )

    def _start(self, index: int, block: dict[str, Any]) -> list[StreamDelta]:
        kind = block.get("type")
        if index in self._blocks:
            self._malformed(f"content block {index} started twice", block)
        started = _Block(kind if isinstance(kind, str) else "")
        self._blocks[index] = started
        if kind == "text":
            return self._append(started, "content", block.get("text"), "a text block's 'text'")
        if kind == "thinking":
            thinking = block.get("thinking")
            return self._append(started, "reasoning", thinking, "a thinking block's 'thinking'")
        if kind == "tool_use":
            started.id = self._expect(
                block.get("id"), str, "a tool_use block's 'id' must be a string"
            )
            name = block.get("name")
            started.name = self._expect(name, str, "a tool_use's 'name' must be a string")
            given = block.get("input")
            if given:  # sent whole rather than streamed: keep it as the arguments' JSON
                self._expect(given, dict, "a tool_use block's 'input' must be an object")
                started.start_input = _json(given)
        return []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[StreamDelta]:
        block = self._blocks.get(index)
        if block is None:
            self._malformed(f"a delta for content block {index}, which never started", delta)
        if block.kind not in _READ_BLOCKS:
            return []  # a block of a kind we skip (a server tool's, a later version's)
        kind = delta.get("type")
        if kind == "text_delta" and block.kind == "text":
            return self._append(block, "content", delta.get("text"), "a text_delta's 'text'")
        if kind == "thinking_delta" and block.kind == "thinking":
            thinking = delta.get("thinking")
            return self._append(block, "reasoning", thinking, "a thinking_delta's 'thinking'")
        if kind == "input_json_delta" and block.kind == "tool_use":
            piece = delta.get("partial_json")
            block.parts.append(self._expect(piece, str, "'partial_json' must be a string"))
        elif kind in ("text_delta", "thinking_delta", "input_json_delta"):
            self._malformed(f"a {kind} for the {block.kind} block {index}", delta)
        return []  # signature_delta, citations_delta, and later kinds

    def _append(self, block: _Block, kind: DeltaKind, text: object, what: str) -> list[StreamDelta]:
        if text is None or text == "":
            return []
        block.parts.append(self._expect(text, str, f"{what} must be a string"))
        return [StreamDelta(kind, str(text))]

    def _index(self, event: dict[str, Any]) -> int:
        index = event.get("index")
        if type(index) is not int:
            self._malformed("a content block event's 'index' must be an integer", index)
        return index

    def _add_usage(self, usage: object) -> None:
        if usage is None:
            return
        usage = self._expect(usage, dict, "'usage' must be an object")
        # Counts are running totals: a later event's count replaces the earlier one.
        self._usage.update({k: v for k, v in usage.items() if k in _USAGE_FIELDS and v is not None})

    def _expect(self, value: object, kind: type[_T], what: str) -> _T:
        if not isinstance(value, kind):
            self._malformed(what, value)
        return value

    def _malformed(self, what: str, value: object) -> NoReturn:
        got = self.scrub(repr(value))
        if len(got) > 80:
            got = got[:77] + "..."
        raise ModelError(
            f"event {self._count} of the model's stream is malformed: {what} "
            f"(got {got} that is a {type(value).__name__})",
            retryable=False,
        )


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False)
