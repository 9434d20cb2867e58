"""How a failed model call is described: the words of every ``ModelError`` over HTTP.

Kept apart from the client so the policy reads in one place: which HTTP
answers are worth another attempt (408, 409, 429, 5xx), which are terminal
and what each terminal message tells the user to fix (the Anthropic API
says the same with its own error types: ``rate_limit_error`` 429 and
``overloaded_error`` 529 pass, ``authentication_error`` 401 does not, and
``invalid_request_error`` "prompt is too long" is a context overflow). Two answers override
their status: a context overflow (:class:`ContextOverflow`, whatever the
status, since llama.cpp has sent it as a 500) and a 429 for
``insufficient_quota``, which no wait cures. Every message passes
through :meth:`Call.error`, which removes the API key, so a server that
echoes the key (some do, in "Incorrect API key provided: ...") cannot leak it.
"""

from __future__ import annotations

import email.utils
import json
import math
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import attrs
import httpx

from callboard.errors import ModelError

from ._classify import (
    RETRYABLE_STATUS,
    ContextOverflow,
    context_limit,
    is_context_overflow,
    is_out_of_quota,
)
from ._providers import API_KEY_ENV_VARS, Provider, key_env_vars

__all__ = [
    "API_KEY_ENV_VARS",
    "Call",
    "Retry",
    "error_message",
    "error_object",
    "redact",
    "retry_after",
    "shown_url",
    "status_failure",
]

EXCERPT = 200  # characters of server text quoted in an error


def _base_url_hint(call: Call) -> str:
    """What a 404 most often means: a base_url one path segment off."""
    if call.provider == "anthropic":
        return (
            "an Anthropic base_url is the server's root, such as https://api.anthropic.com, "
            "and /v1/messages is added to it"
        )
    if call.base_url.endswith("/v1"):
        return "it is the URL that /chat/completions is added to"
    return (
        f"an OpenAI-compatible base_url usually ends in /v1, such as "
        f"http://127.0.0.1:8000/v1, and {call.base_url} does not"
    )


class Retry(Exception):
    """This attempt failed before the answer began and may be tried again."""

    def __init__(self, error: ModelError, retry_after: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


@attrs.frozen
class Call:
    """What one ``stream_chat`` needs across its attempts (holds the key: never shown)."""

    url: str
    base_url: str
    model: str
    body: dict[str, Any]
    headers: dict[str, str] = attrs.field(repr=False)
    key: str | None = attrs.field(repr=False)
    key_source: str
    provider: Provider = "openai"

    def error(self, message: str, *, status: int | None = None, retryable: bool) -> ModelError:
        return ModelError(redact(message, self.key), status=status, retryable=retryable)

    def redacted(self, error: ModelError) -> ModelError:
        """``error`` (of whatever class) with the key removed from its message."""
        error.args = (redact(str(error), self.key),)
        return error

    def excerpt(self, text: str) -> str:
        text = redact(text, self.key).strip()
        return text if len(text) <= EXCERPT else text[: EXCERPT - 3] + "..."


def status_failure(call: Call, response: httpx.Response, body: str) -> ModelError | Retry:
    """Translate a non-2xx answer into a terminal ``ModelError`` or a ``Retry``."""
    status = response.status_code
    said = f"The server said: {call.excerpt(error_message(body)) or '(nothing)'}"
    where = f"the model server at {call.base_url}"
    said_error = error_object(body)
    # llama.cpp has sent its overflow with code 500: the type decides, not the status.
    if (said_error is not None and is_context_overflow(said_error) and status >= 400) or (
        status in (400, 413) and is_context_overflow(body)
    ):
        message = (
            f"the conversation is longer than model {call.model!r} accepts (HTTP {status} "
            f"from {call.base_url}): it exceeds the context window; shorten or summarise it "
            f"before asking again. {said}"
        )
        limit = context_limit(said_error if said_error is not None else body)
        return ContextOverflow(redact(message, call.key), status=status, context_limit=limit)
    if status == 429 and said_error is not None and is_out_of_quota(said_error):
        message = (
            f"{where} refused the request because the account behind the API key is out of "
            f"quota or credit (HTTP 429 insufficient_quota): waiting will not help; add "
            f"credit or raise the account's limits. {said}"
        )
        return call.error(message, status=status, retryable=False)
    if status in RETRYABLE_STATUS or status >= 500:
        what = {429: "is rate limiting requests", 529: "is overloaded"}.get(status, "failed")
        error = call.error(f"{where} {what} (HTTP {status}). {said}", status=status, retryable=True)
        return Retry(error, retry_after(response.headers))
    names = " or ".join(key_env_vars(call.provider))
    if status in (401, 403):
        if call.key:
            message = (
                f"{where} refused the API key (HTTP {status}): the key from {call.key_source} is "
                f"wrong or lacks access to model {call.model!r}; set {names} to a valid key. "
                f"{said}"
            )
        else:
            message = (
                f"{where} requires an API key (HTTP {status}) and none was sent: the key is "
                f"missing; set {names}. {said}"
            )
    elif status == 404:
        message = (
            f"{where} answered HTTP 404 to POST {call.url}: there is no such endpoint there, "
            f"or no model {call.model!r}; check the model name, and base_url: "
            f"{_base_url_hint(call)}. {said}"
        )
    elif 300 <= status < 400:
        location = response.headers.get("location", "elsewhere")
        message = f"{where} redirected (HTTP {status}) to {location}: set base_url to it."
    else:
        message = f"{where} rejected the request (HTTP {status}). {said}"
    return call.error(message, status=status, retryable=False)


def error_object(body: str) -> dict[str, Any] | None:
    """The ``error`` object of an OpenAI-style error body (or the body, when it is one)."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    error = parsed.get("error")
    if isinstance(error, dict):
        return error
    return parsed if "message" in parsed else None


def error_message(body: str) -> str:
    """The ``error.message`` of an OpenAI-style error body, else the body itself."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return body
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return body


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            return max(0.0, value)
    text = headers.get("retry-after")
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        value = (when - datetime.now(UTC)).total_seconds()
    return max(0.0, value) if math.isfinite(value) else None


def redact(text: str, key: str | None) -> str:
    return text.replace(key, "[redacted]") if key else text


def shown_url(url: str) -> str:
    """``url`` as errors and logs name it: a password in it (``http://me:PASS@host``,
    which httpx sends as basic auth) replaced by ``***``, since errors become events."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    if password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
