"""What the scripted model answers: the reply kinds and how each is streamed.

Split from ``scripted_model`` (the server: threads, sockets, waiting) so each
reads alone; import everything from ``scripted_model``, which re-exports these.

Replies stream exactly like OpenAI's server (or, on a model serving the
``anthropic`` wire, like Anthropic's: ``scripted_messages``): a role chunk, content deltas,
tool-call deltas (a header per call, then ``arguments`` in pieces,
interleaved across calls by index), a finish chunk, a ``usage`` chunk with
empty ``choices`` when the request asked ``stream_options.include_usage``,
then ``data: [DONE]``. JSON is written with raw UTF-8 (not ``\\u`` escapes),
as real servers do.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import attrs
from scripted_messages import MessagesWriter, error_body


class Exchange(Protocol):
    """What the server offers a reply for writing its answer to one request."""

    number: int  # 1 for the first request the server saw
    body: dict[str, Any]  # the request, parsed
    wire: str  # "openai" or "anthropic": the format the answer is written in

    def send_whole(
        self, code: int, body: bytes, content_type: str, headers: Iterable[tuple[str, str]]
    ) -> None: ...
    def start_chunked(self, code: int, content_type: str) -> None: ...
    def send_chunk(self, data: bytes) -> None: ...
    def end_chunked(self) -> None: ...
    def hold(self) -> None: ...
    def close_connection(self) -> None: ...


DEFAULT_USAGE: Mapping[str, int] = {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}


def _pieces(text: str, count: int) -> list[str]:
    """Split ``text`` into at most ``count`` near-equal pieces ("Hello, world" -> 3 of 4)."""
    if not text:
        return []
    size = math.ceil(len(text) / max(1, min(count, len(text))))
    return [text[i : i + size] for i in range(0, len(text), size)]


@attrs.frozen
class Text:
    """A streamed text answer: a role chunk, the pieces, finish, usage (if asked), [DONE]."""

    content: str
    pieces: int = 3
    finish_reason: str = "stop"
    usage: Mapping[str, int] | None = DEFAULT_USAGE
    comment: str | None = None
    crlf: bool = False

    def serve(self, exchange: Exchange) -> None:
        if exchange.wire == "anthropic":
            writer = MessagesWriter(exchange, self.crlf, self.comment, self.usage)
            for piece in _pieces(self.content, self.pieces):
                writer.text(piece)
            writer.finish(self.finish_reason)
            return
        stream = _EventStream(exchange, self.crlf, self.comment)
        stream.delta({"role": "assistant", "content": ""})
        for piece in _pieces(self.content, self.pieces):
            stream.delta({"content": piece})
        stream.finish(self.finish_reason, self.usage)


@attrs.frozen
class ScriptedCall:
    """One tool call of a :class:`ToolCalls` reply; ``arguments`` is the JSON text sent."""

    name: str
    arguments: str
    call_id: str | None = None


@attrs.frozen
class ToolCalls:
    """Streamed tool calls: a header delta per call, then the arguments in 3 pieces each,
    interleaved across calls by index, then finish ``tool_calls``, usage, [DONE].

    A call without ``call_id`` gets ``call_<request number>_<index>``.
    """

    calls: tuple[ScriptedCall, ...]
    content: str = ""
    usage: Mapping[str, int] | None = DEFAULT_USAGE
    comment: str | None = None
    crlf: bool = False

    def serve(self, exchange: Exchange) -> None:
        if exchange.wire == "anthropic":
            writer = MessagesWriter(exchange, self.crlf, self.comment, self.usage)
            for piece in _pieces(self.content, 3):
                writer.text(piece)
            for index, call in enumerate(self.calls):
                call_id = call.call_id or f"call_{exchange.number}_{index}"
                writer.tool_call(call_id, call.name, _pieces(call.arguments, 3))
            writer.finish("tool_calls")
            return
        stream = _EventStream(exchange, self.crlf, self.comment)
        stream.delta({"role": "assistant", "content": None})
        for piece in _pieces(self.content, 3):
            stream.delta({"content": piece})
        for index, call in enumerate(self.calls):
            call_id = call.call_id or f"call_{exchange.number}_{index}"
            function = {"name": call.name, "arguments": ""}
            header = {"index": index, "id": call_id, "type": "function", "function": function}
            stream.delta({"tool_calls": [header]})
        pieces = [_pieces(call.arguments, 3) for call in self.calls]
        for round_ in range(max((len(p) for p in pieces), default=0)):
            for index, parts in enumerate(pieces):
                if round_ < len(parts):
                    delta = {"index": index, "function": {"arguments": parts[round_]}}
                    stream.delta({"tool_calls": [delta]})
        stream.finish("tool_calls", self.usage)


@attrs.frozen
class Hold:
    """Never finishes: holds the connection until the client leaves or the server stops.

    With ``first_delta``, sends the headers and that text delta first (a stream
    that stalls mid-answer); without, sends nothing at all.
    """

    first_delta: str | None = None
    crlf: bool = False

    def serve(self, exchange: Exchange) -> None:
        if self.first_delta is not None and exchange.wire == "anthropic":
            MessagesWriter(exchange, self.crlf, None, None).text(self.first_delta)
        elif self.first_delta is not None:
            stream = _EventStream(exchange, self.crlf, None)
            stream.delta({"role": "assistant", "content": ""})
            stream.delta({"content": self.first_delta})
        exchange.hold()


@attrs.frozen
class Status:
    """A plain (non-streamed) HTTP answer, e.g. 429 with ``Retry-After``, 500, 401.

    ``body=None`` is the wire's own error JSON naming the code (OpenAI's
    ``{"error": {...}}``, or Anthropic's typed error).
    """

    code: int
    body: bytes | None
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()

    def serve(self, exchange: Exchange) -> None:
        body = self.body
        if body is None:
            said = f"scripted HTTP {self.code}"
            error = {"error": {"message": said, "type": "scripted", "code": None}}
            if exchange.wire == "anthropic":
                error = error_body(self.code, said)
            body = json.dumps(error).encode()
        exchange.send_whole(self.code, body, self.content_type, self.headers)


@attrs.frozen
class Raw:
    """These bytes as the body. ``cut=True`` sends them chunked and then closes the
    connection without ending the body (a connection lost mid-answer)."""

    data: bytes
    status: int = 200
    content_type: str = "text/event-stream"
    cut: bool = False

    def serve(self, exchange: Exchange) -> None:
        if not self.cut:
            exchange.send_whole(self.status, self.data, self.content_type, ())
            return
        exchange.start_chunked(self.status, self.content_type)
        exchange.send_chunk(self.data)
        exchange.close_connection()


@attrs.frozen
class Drop:
    """Closes the connection without any answer."""

    def serve(self, exchange: Exchange) -> None:
        exchange.close_connection()


Reply = Text | ToolCalls | Hold | Status | Raw | Drop
ScriptItem = Reply | Callable[[dict[str, Any]], Reply]

# So that a script reads as sentences: [text("Hi"), hold(), raw(b"..."), drop()].
text = Text
hold = Hold
raw = Raw
drop = Drop


def tool_call(
    name: str, arguments: Mapping[str, Any] | str, call_id: str | None = None, **options: Any
) -> ToolCalls:
    """One streamed tool call; a mapping is sent as ``json.dumps(arguments)``."""
    return tool_calls([ScriptedCall(name, _arguments(arguments), call_id)], **options)


def tool_calls(
    calls: Iterable[ToolCalls | ScriptedCall | tuple[Any, ...]], **options: Any
) -> ToolCalls:
    """Several tool calls in one answer: items are ``tool_call(...)`` replies,
    :class:`ScriptedCall` or ``(name, arguments[, call_id])`` tuples."""
    flat: list[ScriptedCall] = []
    for item in calls:
        if isinstance(item, ToolCalls):
            flat.extend(item.calls)
        elif isinstance(item, ScriptedCall):
            flat.append(item)
        else:
            name, arguments, *rest = item
            flat.append(ScriptedCall(name, _arguments(arguments), *rest))
    return ToolCalls(tuple(flat), **options)


def status(
    code: int,
    body: bytes | str | Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Status:
    """An HTTP error answer; the default body is the wire's error JSON naming the code."""
    pairs = tuple((headers or {}).items())
    if body is None:
        return Status(code, None, "application/json", pairs)
    if isinstance(body, Mapping):
        return Status(code, json.dumps(body).encode(), "application/json", pairs)
    data = body.encode() if isinstance(body, str) else body
    return Status(code, data, "text/plain; charset=utf-8", pairs)


def _arguments(arguments: Mapping[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


class _EventStream:
    """Writes OpenAI ``chat.completion.chunk`` events as a chunked event stream."""

    def __init__(self, exchange: Exchange, crlf: bool, comment: str | None) -> None:
        self._exchange = exchange
        self._newline = "\r\n" if crlf else "\n"
        options = exchange.body.get("stream_options")
        self._include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        model = exchange.body.get("model")
        self._base = {
            "id": f"chatcmpl-scripted-{exchange.number}",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model if isinstance(model, str) else "scripted",
        }
        exchange.start_chunked(200, "text/event-stream")
        if comment is not None:
            self._send(f": {comment}")

    def delta(self, delta: dict[str, Any], finish_reason: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        self._data({**self._base, "choices": [choice]})

    def finish(self, finish_reason: str, usage: Mapping[str, int] | None) -> None:
        self.delta({}, finish_reason)
        if self._include_usage and usage is not None:
            self._data({**self._base, "choices": [], "usage": dict(usage)})
        self._send("data: [DONE]")
        self._exchange.end_chunked()

    def _data(self, payload: dict[str, Any]) -> None:
        if self._include_usage and "usage" not in payload:
            payload["usage"] = None
        self._send("data: " + json.dumps(payload, ensure_ascii=False))

    def _send(self, line: str) -> None:
        self._exchange.send_chunk((line + self._newline * 2).encode())
