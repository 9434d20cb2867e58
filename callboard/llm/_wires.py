"""What differs between the providers: the request, and the reading of its answer.

``request_for`` writes one call's URL, body and headers in the provider's
format. The client's HTTP loop (``_client``) decodes the body of the answer
into server-sent events and hands each to the provider's reader; the reader
folds it into its accumulator, returns the pieces of the answer it carried,
says when the answer is whole, and builds the reply. Everything else
(retries, timeouts, what counts as a broken stream, the words of an HTTP
error) is the client's, the same for every provider.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs

from callboard.errors import ModelError

from ._accumulate import AssistantReply, ChunkAccumulator
from ._deltas import StreamDelta
from ._failures import Call, redact
from ._messages_request import ANTHROPIC_VERSION, messages_request, messages_url
from ._messages_stream import MessagesAccumulator
from ._providers import Provider
from ._sse import ServerSentEvent

__all__ = ["ChatEvents", "EventReader", "MessagesEvents", "reader_for", "request_for"]


def request_for(
    provider: Provider,
    *,
    base_url: str,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    extra_body: Mapping[str, Any] | None,
    key: str | None,
    max_tokens: int,
    cache: bool,
) -> tuple[str, dict[str, Any], dict[str, str]]:
    """The URL, JSON body and headers of one streamed call to ``provider``.

    ``max_tokens`` and ``cache`` (prompt caching, ``_messages_request``) are
    the Messages API's; an OpenAI-compatible request has neither: the server
    picks the length, and OpenAI caches long prompts by itself (its usage
    reports ``prompt_tokens_details.cached_tokens``), so nothing is sent.

    Raises:
        ModelError: the conversation has a shape the provider cannot be sent.
    """
    headers = {"Accept": "text/event-stream"}
    if provider == "anthropic":
        try:
            body = messages_request(
                model=model,
                messages=messages,
                tools=tools,
                max_tokens=max_tokens,
                cache=cache,
                extra_body=extra_body,
            )
        except ValueError as exc:
            raise ModelError(f"the conversation cannot be sent: {exc}", retryable=False) from None
        headers["anthropic-version"] = ANTHROPIC_VERSION
        if key:
            headers["x-api-key"] = key
        return messages_url(base_url), body, headers
    body = dict(extra_body or {})
    body.update(
        model=model,
        messages=list(messages),
        stream=True,
        stream_options={"include_usage": True},
    )
    if tools:
        body["tools"] = list(tools)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return f"{base_url}/chat/completions", body, headers


class EventReader(Protocol):
    """What the client needs of a provider's stream."""

    @property
    def complete(self) -> bool:
        """Whether the answer is whole (a connection lost after this loses nothing)."""
        ...

    @property
    def missing(self) -> str:
        """What a stream that ends early has not sent, for the error that says so."""
        ...

    def read(self, event: ServerSentEvent) -> list[StreamDelta]:
        """Fold one event in; return the pieces of the answer it added. Raises ModelError."""
        ...

    def finish(self) -> AssistantReply:
        """The reply, once the body ended. Raises ModelError."""
        ...


def reader_for(call: Call) -> EventReader:
    """A fresh reader for one attempt of ``call``, by its provider."""
    if call.provider == "anthropic":
        return MessagesEvents(call)
    return ChatEvents(call)


def _json_of(call: Call, event: ServerSentEvent) -> object:
    """The event's data parsed; an ``error`` event said in words becomes a message."""
    try:
        return json.loads(event.data)
    except ValueError:
        if event.event != "error":
            raise call.error(
                f"the model server at {call.base_url} sent an event whose data is "
                f"not JSON: {call.excerpt(event.data)}",
                retryable=False,
            ) from None
        return {"message": event.data}


@attrs.define
class ChatEvents:
    """An OpenAI-compatible ``chat.completion.chunk`` stream, ended by ``[DONE]``."""

    call: Call
    done: bool = False  # [DONE] arrived: the answer is complete
    accumulator: ChunkAccumulator = attrs.field(init=False)
    missing: str = "before [DONE] and before a finish_reason"

    def __attrs_post_init__(self) -> None:
        self.accumulator = ChunkAccumulator(scrub=functools.partial(redact, key=self.call.key))

    @property
    def complete(self) -> bool:
        return self.done or self.accumulator.finish_reason is not None

    def read(self, event: ServerSentEvent) -> list[StreamDelta]:
        if self.done:
            return []
        if event.is_done:
            self.done = True
            return []
        chunk = _json_of(self.call, event)
        if event.event == "error" and not (isinstance(chunk, dict) and "error" in chunk):
            chunk = {"error": chunk}
        return self.accumulator.add_deltas(chunk)

    def finish(self) -> AssistantReply:
        return self.accumulator.finish()


@attrs.define
class MessagesEvents:
    """An Anthropic Messages API stream, ended by ``message_stop`` (``_messages_stream``)."""

    call: Call
    accumulator: MessagesAccumulator = attrs.field(init=False)
    missing: str = "before message_stop and before a stop_reason"

    def __attrs_post_init__(self) -> None:
        self.accumulator = MessagesAccumulator(scrub=functools.partial(redact, key=self.call.key))

    @property
    def complete(self) -> bool:
        return self.accumulator.complete

    def read(self, event: ServerSentEvent) -> list[StreamDelta]:
        if self.accumulator.stopped:
            return []
        data = _json_of(self.call, event)
        if event.event == "error" and not (isinstance(data, dict) and "error" in data):
            data = {"type": "error", "error": data}
        return self.accumulator.add_event(data, event.event)

    def finish(self) -> AssistantReply:
        return self.accumulator.finish()
