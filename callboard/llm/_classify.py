"""What a model server's error means: a context overflow, a passing fault, or a refusal.

Pure (no httpx, no trio), so both the accumulator (errors sent inside a
stream) and the HTTP layer (error bodies) read one policy.

Servers describe the same failure in many ways. A context overflow is
OpenAI's ``code: "context_length_exceeded"``, llama.cpp's ``type:
"exceed_context_size_error"`` (sent with code 500 by some versions, 400 by
later ones), vLLM V1's "is longer than the maximum model length", Anthropic's
``invalid_request_error`` "prompt is too long: N tokens > M maximum" and a
dozen wordings of "maximum context length"; whatever the HTTP-ish code says, asking
again with the same conversation cannot help, so it is told apart as
:class:`ContextOverflow`. Otherwise a numeric code (OpenRouter's ``502``,
vLLM's ``500``, LiteLLM's ``"429"``) decides like an HTTP status: 408, 409,
429 and 5xx may pass; a type name (``server_error``, ``InternalServerError``)
decides when there is no code. OpenAI's 429 ``insufficient_quota`` is the
exception: the account is out of credit, and no retry will refill it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from callboard.errors import ModelError

__all__ = [
    "RETRYABLE_STATUS",
    "ContextOverflow",
    "context_limit",
    "error_code",
    "is_context_overflow",
    "is_out_of_quota",
    "stream_error",
]

RETRYABLE_STATUS = frozenset({408, 409, 429})

_OVERFLOW_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
_OVERFLOW_WORDS = re.compile(
    r"context[_ ]length|context[_ ]?window|maximum context|maximum model length"
    r"|exceeds? the available context size|exceed_context_size|prompt is too long",
    re.IGNORECASE,
)
_LIMIT_WORDS = re.compile(
    r"maximum (?:context|model) length (?:is|of) (\d+)|tokens > (\d+) maximum", re.IGNORECASE
)
_QUOTA_CODES = frozenset({"insufficient_quota"})
# Type names servers put in an in-stream error, squashed (lower case, no "_"):
# the kinds of failure that another attempt may not meet.
_RETRYABLE_TYPES = frozenset(
    {
        "servererror",
        "apierror",
        "overloadederror",
        "overloaded",
        "ratelimiterror",
        "ratelimitexceeded",
        "internalservererror",
        "serviceunavailable",
        "serviceunavailableerror",
        "timeout",
        "timeouterror",
    }
)
_EXCERPT = 200


class ContextOverflow(ModelError):
    """The conversation is longer than the model's context window.

    Never retryable as it is: the same conversation overflows again. A caller
    that can shorten the conversation (summarise, drop old tool results) should
    catch this and do so. ``context_limit`` is the window in tokens when the
    server said it, else ``None``.
    """

    def __init__(
        self, message: str, *, status: int | None = None, context_limit: int | None = None
    ) -> None:
        super().__init__(message, status=status, retryable=False)
        self.context_limit = context_limit

    def __reduce__(self) -> tuple[Any, ...]:
        state = {"status": self.status, "retryable": False, "context_limit": self.context_limit}
        return type(self), (str(self),), state


def error_code(error: Mapping[str, Any]) -> int | None:
    """The HTTP-ish number in ``code`` or ``status`` (an int, or digits in a string)."""
    for field in ("code", "status"):
        value = error.get(field)
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.strip().isdigit():
            return int(value)
    return None


def _names(error: Mapping[str, Any]) -> set[str]:
    return {str(error.get(field) or "").strip().lower() for field in ("type", "code")}


def is_context_overflow(error: Mapping[str, Any] | str) -> bool:
    """Whether an error object (or a body's text) says the context window was exceeded."""
    if isinstance(error, str):
        return _OVERFLOW_WORDS.search(error) is not None
    if _names(error) & _OVERFLOW_CODES:
        return True
    return _OVERFLOW_WORDS.search(str(error.get("message") or "")) is not None


def is_out_of_quota(error: Mapping[str, Any]) -> bool:
    """OpenAI's ``insufficient_quota``: a 429 that waiting does not cure."""
    return bool(_names(error) & _QUOTA_CODES)


def context_limit(error: Mapping[str, Any] | str) -> int | None:
    """The context window in tokens, from llama.cpp's ``n_ctx`` or the message's words."""
    if not isinstance(error, str):
        n_ctx = error.get("n_ctx")
        if type(n_ctx) is int and n_ctx > 0:
            return n_ctx
        error = str(error.get("message") or "")
    match = _LIMIT_WORDS.search(error)
    return int(match.group(1) or match.group(2)) if match else None


def stream_error(error: object, scrub: Callable[[str], str] = str) -> ModelError:
    """An error object sent in place of a chunk (vLLM, OpenRouter, LiteLLM, llama.cpp).

    ``scrub`` removes secrets from the server's words before they are cut to
    length: cut first, a key split by the cut would no longer be recognised.
    """
    message = str(error)
    fields: Mapping[str, Any] = {}
    if isinstance(error, Mapping):
        fields = error
        message = str(error.get("message") or error)
    code = error_code(fields)
    if code is not None and str(code) not in message:
        message = f"{message} (code {code})"
    message = scrub(message)
    if len(message) > _EXCERPT:
        message = message[: _EXCERPT - 3] + "..."
    if is_context_overflow(fields or message):
        return ContextOverflow(
            "the conversation is longer than the model accepts: the server stopped its "
            "answer because the conversation exceeds the context window; shorten or "
            f"summarise it before asking again. The server said: {message}",
            context_limit=context_limit(fields or message),
        )
    said = f"the model server reported an error in the middle of its answer: {message}"
    if fields and is_out_of_quota(fields):
        return ModelError(f"{said}; the account is out of quota or credit", retryable=False)
    return ModelError(said, retryable=_retryable(fields, code))


def _retryable(error: Mapping[str, Any], code: int | None) -> bool:
    if code is not None and 400 <= code < 600:
        return code in RETRYABLE_STATUS or code >= 500
    squashed = {name.replace("_", "") for name in _names(error)}
    return bool(squashed & _RETRYABLE_TYPES)
