"""The streaming chat client: HTTP, retries and timeouts around the pure decoders.

One call is :meth:`ChatClient.stream_chat`: POST ``{base_url}/chat/completions``
with ``stream: true`` (for the ``anthropic`` provider, ``{base_url}/v1/messages``;
``_wires`` writes either request), decode the event stream (:mod:`._sse`),
fold its events into a reply (:mod:`._accumulate`, :mod:`._messages_stream`)
and hand each text delta to ``on_delta`` (and every delta, reasoning and
refusals too, to ``on_stream_delta``) as it arrives, so a session can show it
live while only the finished reply is stored.

Which failures are retried here, and why only those: a call is retried (with
capped, jittered exponential backoff) only while nothing of the answer has
arrived, i.e. before the first event of the body. After that, text has
already gone to ``on_delta`` and a silent retry would show it twice; the
failure is raised with ``retryable=True`` and the caller (the turn) decides.
Retried: connect errors and timeouts, a connection lost before the answer,
silence before the answer, HTTP 408, 409, 429 (waiting ``Retry-After``,
capped) and 5xx. Terminal at once: 400 (with its own message when the
conversation exceeds the context window), 401/403 (the API key), 404 and the
other 4xx, a 429 for an exhausted quota, a context overflow whatever its
status (:class:`ContextOverflow`), redirects, and a body that is not an
event stream of JSON. An error the server sends inside the stream is read
as it arrives, ``retryable`` from its code (``_classify``): retried here
like an HTTP 429 while no piece of the answer has been shown, raised after.

A stream that ends with neither ``[DONE]`` nor a ``finish_reason`` (for
Anthropic: neither ``message_stop`` nor a ``stop_reason``) raises "the
stream ended early" with ``retryable=True``: that is what a proxy timeout or
a restarted server produces, and the same request may well succeed. A
stream that sends ``[DONE]`` (or a finish reason) is complete even if the
connection then breaks.

The API key never appears in a message, a repr or a log line: it is held in
a ``repr=False`` field and removed from any server text we quote, including
the errors the accumulator raises from what the stream said.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import random
import ssl
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Self, cast

import attrs
import httpx
import trio

from callboard._retry import Backoff
from callboard.errors import ModelError

from ._accumulate import AssistantReply
from ._deltas import StreamDelta
from ._failures import Call, Retry, shown_url, status_failure
from ._providers import Provider, check_provider, key_env_vars
from ._sse import EventStreamDecoder, ServerSentEvent
from ._wires import EventReader, reader_for, request_for

__all__ = ["ChatClient", "RetryNotice"]

_log = logging.getLogger("callboard.llm")

_ERROR_BODY_LIMIT = 16 * 1024  # bytes of an error response we read
_AFTER_DONE_GRACE = 5.0  # seconds we wait for the body to end after [DONE]
_finite_seconds = attrs.validators.and_(attrs.validators.ge(0.0), attrs.validators.lt(math.inf))


@attrs.frozen
class RetryNotice:
    """Told to ``on_retry`` before each backoff: which attempt failed, how, and the wait."""

    attempt: int
    delay: float
    error: ModelError


@attrs.define
class ChatClient:
    """A streaming chat client, reusable across calls and servers of its provider.

    ``provider`` is the wire format: ``"openai"`` (any OpenAI-compatible
    server, the default) or ``"anthropic"`` (the Messages API: the key goes in
    ``x-api-key``, with ``anthropic-version``; ``max_tokens`` is sent, as that
    API requires, unless ``extra_body`` sets it; ``prompt_cache`` marks the
    system prompt and the conversation's end with ``cache_control``, see
    ``_messages_request``). Either way the call takes and returns the same
    OpenAI-shaped conversation, tools and `AssistantReply`.

    Use it as an async context manager (or call :meth:`aclose`): it owns one
    ``httpx.AsyncClient`` (created on first use, so constructing a client costs
    nothing) whose pooled connections are reused by later calls. Use one
    instance per ``trio.run``.

    ``api_key`` defaults to ``$CALLBOARD_API_KEY``, else ``$OPENAI_API_KEY``
    (``$ANTHROPIC_API_KEY`` for ``anthropic``), read at each call (so a fixed
    environment needs no new client); with no key at all none is sent (local
    servers need none).
    ``key_from_env=False`` sends ``api_key`` or nothing: the agent decides
    which URL may see which key (``callboard.agent``), not the environment.

    ``max_attempts`` counts the first try. Backoff before attempt n+1 is the
    `Backoff` rule with half jitter: ``min(backoff_max, backoff_initial *
    2**(n-1))`` scaled by a random factor in [0.5, 1] (jitter, so many actors
    retrying do not hit the server in step); a ``Retry-After`` (or
    ``retry-after-ms``) replaces it, capped at ``retry_after_max``.
    ``connect_timeout`` bounds opening a connection; ``idle_timeout`` bounds
    any silence: before the response, and between two pieces of the body
    (servers that send ``:`` keep-alive comments stay alive).
    ``transport`` replaces httpx's network transport (for completeness; the
    tests use a real loopback server). ``rng`` makes the jitter reproducible.
    """

    api_key: str | None = attrs.field(default=None, repr=False)
    key_from_env: bool = True
    max_attempts: int = attrs.field(default=5, validator=attrs.validators.ge(1))
    backoff_initial: float = attrs.field(default=0.5, validator=_finite_seconds)
    backoff_max: float = attrs.field(default=8.0, validator=_finite_seconds)
    retry_after_max: float = attrs.field(default=60.0, validator=attrs.validators.ge(0))
    connect_timeout: float = attrs.field(default=10.0, validator=attrs.validators.gt(0))
    idle_timeout: float = attrs.field(default=120.0, validator=attrs.validators.gt(0))
    transport: httpx.AsyncBaseTransport | None = attrs.field(default=None, repr=False)
    rng: random.Random = attrs.field(factory=random.Random, repr=False)
    provider: Provider = attrs.field(default="openai", converter=check_provider)
    max_tokens: int = attrs.field(default=8192, validator=attrs.validators.ge(1))
    prompt_cache: bool = True
    _http: httpx.AsyncClient | None = attrs.field(default=None, init=False, repr=False)
    _closed: bool = attrs.field(default=False, init=False, repr=False)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the pooled connections. Idempotent; later calls raise ``ModelError``."""
        self._closed = True
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

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
        on_stream_delta: Callable[[StreamDelta], object] | None = None,
    ) -> AssistantReply:
        """Ask the model and stream its answer; return the finished reply.

        ``on_delta(text)`` is called synchronously with each text piece as it
        arrives (it must not block); ``on_stream_delta(delta)`` likewise with
        every piece of text, reasoning or refusal, each tagged with its kind
        (a caller showing the model's thinking apart uses this one);
        ``on_retry(notice)`` before each backoff.
        ``tools`` is sent only when non-empty (servers reject ``"tools": []``).
        ``extra_body`` adds request fields (``temperature``, ``tool_choice``...);
        it cannot override ``model``, ``messages`` or streaming.

        Raises :class:`~callboard.errors.ModelError`; ``retryable`` says whether
        asking again may help. Not cancel-atomic, and need not be: cancelling
        closes the connection at once and nothing is recorded.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        call = self._prepare(base_url, model, messages, tools, extra_body)
        attempt = 1
        while True:
            try:
                return await self._attempt(call, on_delta, on_stream_delta)
            except Retry as retry:
                failure = retry.error
                if attempt >= self.max_attempts:
                    tries = f"{attempt} attempt{'s' if attempt > 1 else ''}"
                    raise call.error(
                        f"{failure} (gave up after {tries})",
                        status=failure.status,
                        retryable=True,
                    ) from retry.__cause__
                delay = self._delay(attempt, retry.retry_after)
                _log.info(
                    "model call to %s failed (attempt %d of %d), retrying in %.2f s: %s",
                    shown_url(call.url),
                    attempt,
                    self.max_attempts,
                    delay,
                    failure,
                )
                if on_retry is not None:
                    on_retry(RetryNotice(attempt=attempt, delay=delay, error=failure))
                await trio.sleep(delay)
                attempt += 1

    def _prepare(
        self,
        base_url: str,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        extra_body: Mapping[str, Any] | None,
    ) -> Call:
        if self._closed:
            raise ModelError("this ChatClient is closed: create a new one", retryable=False)
        key, source = self._resolve_key()
        base_url = base_url.rstrip("/")
        url, body, headers = request_for(
            self.provider,
            base_url=base_url,
            model=model,
            messages=messages,
            tools=tools,
            extra_body=extra_body,
            key=key,
            max_tokens=self.max_tokens,
            cache=self.prompt_cache,
        )
        return Call(
            url=url,
            base_url=shown_url(base_url),  # named in errors only: the request uses url
            model=model,
            body=body,
            headers=headers,
            key=key,
            key_source=source,
            provider=self.provider,
        )

    def _resolve_key(self) -> tuple[str | None, str]:
        if self.api_key:
            return self.api_key.strip(), "the api_key argument"
        if not self.key_from_env:
            return None, ""
        for name in key_env_vars(self.provider):
            value = os.environ.get(name, "").strip()
            if value:
                return value, f"${name}"
        return None, ""

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(
                transport=self.transport,
                timeout=httpx.Timeout(None, connect=self.connect_timeout),
                verify=_shared_ssl_context(),
            )
        return self._http

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.retry_after_max)
        backoff = Backoff(self.backoff_initial, self.backoff_max, jitter=0.5)
        return backoff.delay(attempt, self.rng)

    async def _attempt(
        self,
        call: Call,
        on_delta: Callable[[str], object] | None,
        on_stream_delta: Callable[[StreamDelta], object] | None,
    ) -> AssistantReply:
        stream = _Stream(call, on_delta, on_stream_delta)
        http = self._client()
        with trio.CancelScope() as idle:
            idle.deadline = trio.current_time() + self.idle_timeout
            try:
                async with http.stream(
                    "POST", call.url, json=call.body, headers=call.headers
                ) as response:
                    if not 200 <= response.status_code < 300:
                        raise status_failure(call, response, await _read_limited(response))
                    stream.content_type = response.headers.get("content-type", "")
                    async with aclosing(
                        cast(AsyncGenerator[bytes, None], response.aiter_bytes())
                    ) as chunks:
                        async for chunk in chunks:
                            stream.feed(chunk)
                            grace = _AFTER_DONE_GRACE if stream.complete else self.idle_timeout
                            idle.deadline = trio.current_time() + min(grace, self.idle_timeout)
            except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
                raise call.error(
                    f"the model base_url {call.base_url!r} is not a usable http(s) URL: {exc}",
                    retryable=False,
                ) from None
            except httpx.TransportError as exc:
                if not stream.complete:
                    raise stream.broken(f"{type(exc).__name__}: {exc}") from exc
        if idle.cancelled_caught and not stream.complete:
            where = "in the middle of its answer" if stream.began else "before answering"
            raise stream.broken(f"it sent nothing for {self.idle_timeout:g} s {where}")
        return stream.finish()


@attrs.define
class _Stream:
    """The state of one attempt's body: decoder, accumulator, and what has arrived."""

    call: Call
    on_delta: Callable[[str], object] | None
    on_stream_delta: Callable[[StreamDelta], object] | None = None
    content_type: str = ""
    began: bool = False  # an event arrived: from here on, no silent retry
    shown: bool = False  # a piece of the answer went to a callback
    decoder: EventStreamDecoder = attrs.Factory(EventStreamDecoder)
    reader: EventReader = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.reader = reader_for(self.call)

    @property
    def complete(self) -> bool:
        """Whether the answer is whole (``[DONE]``, ``message_stop``, or a finish reason)."""
        return self.reader.complete

    def feed(self, chunk: bytes) -> None:
        for event in self.decoder.feed(chunk):
            self._handle(event)

    def finish(self) -> AssistantReply:
        for event in self.decoder.close():
            self._handle(event)
        if not self.reader.complete:
            if not self.began and self.decoder.unrecognized is not None:
                raise self.call.error(
                    f"the model server at {self.call.base_url} answered with something that "
                    f"is not an event stream (content-type {self.content_type!r}): "
                    f"{self.call.excerpt(self.decoder.unrecognized)}",
                    retryable=False,
                )
            raise self.broken(f"the stream ended early, {self.reader.missing}")
        try:
            return self.reader.finish()
        except ModelError as exc:
            raise self.failed(exc) from None

    def broken(self, what: str) -> ModelError | Retry:
        """A transport-level failure: retried here before the answer began, raised after."""
        if self.began:
            return self.call.error(
                f"the connection to the model server at {self.call.base_url} failed "
                f"after the answer began ({what}); the whole call may be retried",
                retryable=True,
            )
        return Retry(
            self.call.error(
                f"the model server at {self.call.base_url} did not answer ({what})",
                retryable=True,
            )
        )

    def failed(self, error: ModelError) -> ModelError | Retry:
        """What the stream said went wrong: retried here while nothing was shown, else raised.

        A retryable error before any piece of the answer (OpenRouter's 429 as
        its first event) gets the backoff an HTTP 429 gets; once text was
        shown, a silent retry would show it twice, so the caller decides.
        The server's own words are quoted: a server that echoes the key must
        not leak it.
        """
        error = self.call.redacted(error)
        if error.retryable and not self.shown:
            return Retry(error)
        return error

    def _handle(self, event: ServerSentEvent) -> None:
        self.began = True
        try:
            pieces = self.reader.read(event)
        except ModelError as exc:
            raise self.failed(exc) from None
        self.shown = self.shown or bool(pieces)
        for piece in pieces:
            if piece.kind == "content" and self.on_delta is not None:
                self.on_delta(piece.text)
            if self.on_stream_delta is not None:
                self.on_stream_delta(piece)


@functools.cache
def _shared_ssl_context() -> ssl.SSLContext:
    """One TLS context for every client of the process.

    Building one loads the CA bundle (40-200 ms); without sharing, every new
    ``ChatClient`` would pay that on its first call. A context is safe to share.
    """
    return httpx.create_ssl_context()


async def _read_limited(response: httpx.Response) -> str:
    """Read an error body, at most ``_ERROR_BODY_LIMIT`` bytes of it."""
    parts: list[bytes] = []
    size = 0
    async with aclosing(cast(AsyncGenerator[bytes, None], response.aiter_bytes())) as chunks:
        async for chunk in chunks:
            parts.append(chunk)
            size += len(chunk)
            if size >= _ERROR_BODY_LIMIT:
                break
    return b"".join(parts)[:_ERROR_BODY_LIMIT].decode("utf-8", errors="replace")
