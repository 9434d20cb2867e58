"""The streaming chat client: HTTP, retries and timeouts around the pure decoders.

One call is :meth:`ChatClient.stream_chat`: POST ``{base_url}/chat/completions``
with ``stream: true``, decode the event stream (:mod:`._sse`), fold its chunks
into a reply (:mod:`._accumulate`) and hand each text delta to ``on_delta``
(and every delta, reasoning and refusals too, to ``on_stream_delta``) as it
arrives, so a session can show it live while only the finished reply is
stored.

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

A stream that ends with neither ``[DONE]`` nor a ``finish_reason`` raises
"the stream ended early" with ``retryable=True``: that is what a proxy
timeout or a restarted server produces, and the same request may well
succeed. A stream that sends ``[DONE]`` (or a finish reason) is complete even
if the connection then breaks.

The API key never appears in a message, a repr or a log line: it is held in
a ``repr=False`` field and removed from any server text we quote, including
the errors the accumulator raises from what the stream said.
"""

from __future__ import annotations

import functools
import json
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

from ._accumulate import AssistantReply, ChunkAccumulator
from ._deltas import StreamDelta
from ._failures import API_KEY_ENV_VARS, Call, Retry, redact, status_failure
from ._sse import EventStreamDecoder, ServerSentEvent

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
    """An OpenAI-compatible streaming chat client, reusable across calls and servers.

    Use it as an async context manager (or call :meth:`aclose`): it owns one
    ``httpx.AsyncClient`` (created on first use, so constructing a client costs
    nothing) whose pooled connections are reused by later calls. Use one
    instance per ``trio.run``.

    ``api_key`` defaults to ``$CALLBOARD_API_KEY``, else ``$OPENAI_API_KEY``,
    read at each call (so a fixed environment needs no new client); with no key
    at all no ``Authorization`` header is sent (local servers need none).
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
                    call.url,
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
        body: dict[str, Any] = dict(extra_body or {})
        body.update(
            model=model,
            messages=list(messages),
            stream=True,
            stream_options={"include_usage": True},
        )
        if tools:
            body["tools"] = list(tools)
        headers = {"Accept": "text/event-stream"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        base_url = base_url.rstrip("/")
        return Call(
            url=f"{base_url}/chat/completions",
            base_url=base_url,
            model=model,
            body=body,
            headers=headers,
            key=key,
            key_source=source,
        )

    def _resolve_key(self) -> tuple[str | None, str]:
        if self.api_key:
            return self.api_key.strip(), "the api_key argument"
        if not self.key_from_env:
            return None, ""
        for name in API_KEY_ENV_VARS:
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
    done: bool = False  # [DONE] arrived: the answer is complete
    decoder: EventStreamDecoder = attrs.Factory(EventStreamDecoder)
    accumulator: ChunkAccumulator = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.accumulator = ChunkAccumulator(scrub=functools.partial(redact, key=self.call.key))

    @property
    def complete(self) -> bool:
        """Whether the answer is whole: ``[DONE]`` or a finish reason arrived."""
        return self.done or self.accumulator.finish_reason is not None

    def feed(self, chunk: bytes) -> None:
        for event in self.decoder.feed(chunk):
            self._handle(event)

    def finish(self) -> AssistantReply:
        for event in self.decoder.close():
            self._handle(event)
        if not self.done and self.accumulator.finish_reason is None:
            if not self.began and self.decoder.unrecognized is not None:
                raise self.call.error(
                    f"the model server at {self.call.base_url} answered with something that "
                    f"is not an event stream (content-type {self.content_type!r}): "
                    f"{self.call.excerpt(self.decoder.unrecognized)}",
                    retryable=False,
                )
            raise self.broken("the stream ended early, before [DONE] and before a finish_reason")
        try:
            return self.accumulator.finish()
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
        if self.done:
            return
        self.began = True
        if event.is_done:
            self.done = True
            return
        try:
            chunk = json.loads(event.data)
        except ValueError:
            if event.event != "error":
                raise self.call.error(
                    f"the model server at {self.call.base_url} sent an event whose data is "
                    f"not JSON: {self.call.excerpt(event.data)}",
                    retryable=False,
                ) from None
            chunk = {"message": event.data}  # an error said in words, not JSON
        if event.event == "error" and not (isinstance(chunk, dict) and "error" in chunk):
            chunk = {"error": chunk}
        try:
            pieces = self.accumulator.add_deltas(chunk)
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
