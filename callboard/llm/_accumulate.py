"""Streamed ``chat.completion.chunk`` objects, accumulated into one finished reply.

Pure: no I/O, no trio. The client feeds it the JSON of each event; the agent
layer gets back an :class:`AssistantReply`, the durable form of the answer.

What a stream looks like (OpenAI's format, which compatible servers copy):
text arrives as ``choices[0].delta.content`` pieces (what else a delta may
carry, reasoning and refusals, is read in ``_deltas``); each tool call arrives
as deltas that name its position in ``index``, its ``id`` and function
``name`` once, and its ``arguments`` JSON in pieces, possibly interleaved
with the pieces of another call; ``finish_reason`` arrives on the last
choice chunk; with ``stream_options.include_usage`` a final chunk carries
``usage`` and an empty ``choices`` list (Groq puts it in ``x_groq.usage``).

Where servers depart from that, on purpose here:

- Ollama, SGLang and lmdeploy send parallel tool calls all at ``index: 0``,
  each with its own ``id``: a new non-empty id at an index already in use
  starts a new call. An empty ``id: ""`` on a continuation delta (vLLM,
  Alibaba) continues the call.
- An error may replace a chunk as ``{"error": {...}}`` or, in older vLLM, as
  a chunk whose ``object`` is ``"error"``; OpenRouter may end a failed
  generation with ``finish_reason: "error"`` and no error object at all.
  Each raises (``_classify`` says what kind of error and whether to retry).
- A stream with no text, no tool call, no refusal and no finish reason is an
  error, not an empty answer: that is what a server produces when it failed
  in a way this client did not read, and recording it as a reply would show
  the user nothing on every turn.

We ask for one choice, so choices with an ``index`` other than 0 are ignored.
A chunk of the wrong shape raises :class:`~callboard.errors.ModelError`
(``retryable=False``: the same server will send the same shape again)
naming the chunk, the field, what was expected and what arrived.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NoReturn, TypeVar

import attrs

from callboard.errors import ModelError

from ._classify import malformed, stream_error
from ._deltas import DeltaKind, StreamDelta, read_delta

__all__ = ["AssistantReply", "ChunkAccumulator", "ToolCall", "accumulate"]

_T = TypeVar("_T")


@attrs.frozen
class ToolCall:
    """One function call the model asked for; ``arguments`` is the raw JSON text it wrote.

    The text is kept raw (not parsed) because the model may write invalid JSON
    and the tool layer, not the transport, decides how to answer that.
    """

    id: str
    name: str
    arguments: str

    def to_message(self) -> dict[str, Any]:
        """The call as it goes back to the server inside the assistant message."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@attrs.frozen
class AssistantReply:
    """A finished assistant message: what the turn journal records durably.

    ``finish_reason`` is the server's (``"stop"``, ``"tool_calls"``,
    ``"length"``...) or ``None`` if it sent ``[DONE]`` without one; ``usage``
    is the server's token accounting when it sent one. ``reasoning`` is the
    model's thinking, kept apart from ``content`` (and not sent back: servers
    that produce it ask not to receive it). ``refusal`` is the text of a
    model's refusal (OpenAI), which arrives instead of content: a reply whose
    ``content`` is empty but whose ``refusal`` is not is a refusal to show.
    """

    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    reasoning: str = ""
    refusal: str = ""

    def to_message(self) -> dict[str, Any]:
        """The reply as the next request's ``messages`` entry (``content`` is null
        when the model only called tools, as OpenAI itself sends it)."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.refusal:
            message["refusal"] = self.refusal
        if self.tool_calls:
            message["tool_calls"] = [call.to_message() for call in self.tool_calls]
        return message


@attrs.define
class _PartialCall:
    index: int  # the server's index, which several calls may share
    id: str = ""
    name: str = ""
    arguments: list[str] = attrs.Factory(list)


@attrs.define
class ChunkAccumulator:
    """Adds chunks one at a time (:meth:`add`), then builds the reply (:meth:`finish`).

    ``scrub`` is applied to any server text an error quotes, before it is cut
    to length (the client passes one that removes its API key).
    """

    scrub: Callable[[str], str] = attrs.field(default=str, kw_only=True, repr=False)
    _content: list[str] = attrs.field(factory=list, init=False)
    _reasoning: list[str] = attrs.field(factory=list, init=False)
    _refusal: list[str] = attrs.field(factory=list, init=False)
    _calls: list[_PartialCall] = attrs.field(factory=list, init=False)
    _by_index: dict[int, _PartialCall] = attrs.field(factory=dict, init=False)
    _finish_reason: str | None = attrs.field(default=None, init=False)
    _usage: dict[str, Any] | None = attrs.field(default=None, init=False)
    _count: int = attrs.field(default=0, init=False)

    @property
    def finish_reason(self) -> str | None:
        """The finish reason seen so far: ``None`` until the last choice chunk."""
        return self._finish_reason

    def add(self, chunk: object) -> str:
        """Fold one parsed chunk in; return the text it added ("" if none), for live display."""
        return "".join(piece.text for piece in self.add_deltas(chunk) if piece.kind == "content")

    def add_deltas(self, chunk: object) -> list[StreamDelta]:
        """Fold one parsed chunk in; return every piece it added, each with its kind."""
        self._count += 1
        if not isinstance(chunk, dict):
            self._malformed("it must be a JSON object", chunk)
        if chunk.get("error") is not None:
            raise stream_error(chunk["error"], self.scrub)
        if chunk.get("object") == "error":
            raise stream_error(chunk, self.scrub)
        usage = chunk.get("usage")
        if usage is None:
            groq = chunk.get("x_groq")
            usage = groq.get("usage") if isinstance(groq, dict) else None
        if usage is not None:
            self._usage = self._expect(usage, dict, "'usage' must be an object")
        choices = chunk.get("choices")
        if choices is None:
            return []
        self._expect(choices, list, "'choices' must be a list")
        pieces: list[StreamDelta] = []
        for item in choices:
            choice = self._expect(item, dict, "each choice must be an object")
            index = choice.get("index", 0)
            if type(index) is not int:
                self._malformed("a choice's 'index' must be an integer", index)
            if index == 0:
                pieces += self._add_choice(choice)
        return pieces

    def finish(self) -> AssistantReply:
        """Build the reply. Tool calls come out in index order, then in order of arrival.

        A call whose server never sent an ``id`` gets ``call_<position>`` (some
        local servers omit ids; the conversation still needs one to pair the
        result with the call). A call without a name cannot be run: that raises.
        So does a stream that carried no answer at all (module docstring).
        """
        calls = []
        for position, partial in enumerate(sorted(self._calls, key=lambda call: call.index)):
            if not partial.name:
                raise ModelError(
                    f"tool call {position} in the stream never received a function name, "
                    "so it cannot be run",
                    retryable=False,
                )
            calls.append(
                ToolCall(
                    id=partial.id or f"call_{position}",
                    name=partial.name,
                    arguments="".join(partial.arguments),
                )
            )
        content, refusal = "".join(self._content), "".join(self._refusal)
        reasoning = "".join(self._reasoning)
        if not (content or calls or refusal or self._finish_reason):
            thought = f" ({len(reasoning)} characters of reasoning only)" if reasoning else ""
            raise ModelError(
                f"the model's stream ended with no text, no tool call, no refusal and no "
                f"finish_reason after {self._count} chunks{thought}: an empty answer is how "
                "some servers report an error they do not describe, so it is not recorded "
                "as a reply",
                retryable=True,
            )
        return AssistantReply(
            content=content,
            tool_calls=tuple(calls),
            finish_reason=self._finish_reason,
            usage=self._usage,
            reasoning=reasoning,
            refusal=refusal,
        )

    def _add_choice(self, choice: dict[str, Any]) -> list[StreamDelta]:
        pieces: list[StreamDelta] = []
        delta = choice.get("delta")
        if delta is not None:
            self._expect(delta, dict, "'delta' must be an object")
            pieces = read_delta(delta, self._malformed)
            for piece in pieces:
                self._parts(piece.kind).append(piece.text)
            tool_calls = delta.get("tool_calls")
            if tool_calls is not None:
                self._expect(tool_calls, list, "'delta.tool_calls' must be a list")
                for call in tool_calls:
                    self._add_tool_call(call)
        finish_reason = choice.get("finish_reason")
        if finish_reason is not None:
            self._expect(finish_reason, str, "'finish_reason' must be a string")
            if finish_reason == "error":
                raise ModelError(
                    "the model server ended its answer with finish_reason 'error' and no "
                    f"error saying why, after {len(''.join(self._content))} characters of "
                    "text; the partial answer is not kept",
                    retryable=True,
                )
            self._finish_reason = finish_reason
        return pieces

    def _parts(self, kind: DeltaKind) -> list[str]:
        if kind == "content":
            return self._content
        return self._reasoning if kind == "reasoning" else self._refusal

    def _add_tool_call(self, item: object) -> None:
        delta = self._expect(item, dict, "each tool call delta must be an object")
        call_id = delta.get("id")
        if call_id is not None:
            self._expect(call_id, str, "a tool call's 'id' must be a string")
        index = delta.get("index")
        if index is not None and type(index) is not int:
            self._malformed("a tool call's 'index' must be an integer", index)
        call = self._call_for(index, call_id or "")
        if call_id:
            call.id = call.id or call_id
        function = delta.get("function")
        if function is None:
            return
        self._expect(function, dict, "a tool call's 'function' must be an object")
        name = function.get("name")
        if name is not None:
            self._expect(name, str, "a tool call's 'function.name' must be a string")
            if name != call.name:  # sent once by OpenAI, repeated whole by some servers
                call.name += name
        arguments = function.get("arguments")
        if arguments is not None:
            self._expect(arguments, str, "a tool call's 'function.arguments' must be a string")
            call.arguments.append(arguments)

    def _call_for(self, index: int | None, call_id: str) -> _PartialCall:
        """The call a delta continues, or a new one (module docstring)."""
        if index is None:
            # A few servers omit the index: an id starts a new call, no id continues the last.
            last = self._calls[-1] if self._calls else None
            if last is not None and (not call_id or call_id == last.id):
                return last
            index = max((call.index for call in self._calls), default=-1) + 1
        current = self._by_index.get(index)
        if current is not None and not (call_id and current.id and call_id != current.id):
            return current
        call = _PartialCall(index)
        self._calls.append(call)
        self._by_index[index] = call
        return call

    def _expect(self, value: object, kind: type[_T], what: str) -> _T:
        if not isinstance(value, kind):
            self._malformed(what, value)
        return value

    def _malformed(self, what: str, value: object) -> NoReturn:
        raise malformed(f"chunk {self._count}", what, value, self.scrub)


def accumulate(chunks: Iterable[object]) -> AssistantReply:
    """Accumulate a whole sequence of parsed chunks into a reply."""
    accumulator = ChunkAccumulator()
    for chunk in chunks:
        accumulator.add(chunk)
    return accumulator.finish()
