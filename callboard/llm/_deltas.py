"""One choice's ``delta``, read into the pieces it carries: text, reasoning, refusal.

Pure. Compatible servers agree on ``delta.content`` as a string and differ on
everything around it, so each variant is named here:

- reasoning arrives beside the content as ``reasoning_content`` (DeepSeek,
  llama.cpp, older vLLM, LiteLLM) or ``reasoning`` (OpenRouter, Groq, Ollama,
  newer vLLM); some servers send both with the same text, so only one is read;
- Mistral's reasoning models send ``content`` as a list of typed parts:
  ``{"type": "thinking", "thinking": [{"type": "text", "text": ...}]}`` for
  reasoning and ``{"type": "text", "text": ...}`` for the answer;
- OpenAI sends a refusal as ``refusal`` pieces in place of content.

Parts of a type we do not know (a future image or citation part) are skipped
rather than failing the call: the rest of the answer is still good.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NoReturn

import attrs

__all__ = ["DeltaKind", "StreamDelta", "read_delta"]

DeltaKind = Literal["content", "reasoning", "refusal"]

Malformed = Callable[[str, object], NoReturn]


@attrs.frozen
class StreamDelta:
    """A piece of the answer as it streams: ``kind`` says which part of the reply it extends.

    ``"content"`` is the answer's text, ``"reasoning"`` the model's thinking
    (shown apart, never sent back), ``"refusal"`` the text of a refusal.
    """

    kind: DeltaKind
    text: str


def read_delta(delta: dict[str, Any], malformed: Malformed) -> list[StreamDelta]:
    """The non-empty pieces of ``delta``, in the order a reader would see them."""
    pieces: list[StreamDelta] = []
    # Empty in one spelling may sit beside text in the other (DeepSeek's role chunk).
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    if reasoning is not None:
        if not isinstance(reasoning, str):
            malformed("'delta.reasoning_content' must be a string", reasoning)
        _append(pieces, "reasoning", reasoning)
    content = delta.get("content")
    if isinstance(content, list):
        for part in content:
            _read_part(part, pieces, malformed)
    elif content is not None:
        if not isinstance(content, str):
            malformed("'delta.content' must be a string or a list of parts", content)
        _append(pieces, "content", content)
    refusal = delta.get("refusal")
    if refusal is not None:
        if not isinstance(refusal, str):
            malformed("'delta.refusal' must be a string", refusal)
        _append(pieces, "refusal", refusal)
    return pieces


def _read_part(part: object, pieces: list[StreamDelta], malformed: Malformed) -> None:
    if not isinstance(part, dict) or not isinstance(part.get("type"), str):
        malformed("each part of 'delta.content' must be an object with a 'type'", part)
    kind = part["type"]
    if kind == "text":
        _append(pieces, "content", _text_of(part.get("text"), "a text part's 'text'", malformed))
    elif kind == "thinking":
        thinking = part.get("thinking")
        if isinstance(thinking, list):
            for inner in thinking:
                if not isinstance(inner, dict):
                    malformed("each part of a thinking part must be an object", inner)
                if inner.get("type", "text") == "text":
                    text = _text_of(inner.get("text"), "a thinking part's 'text'", malformed)
                    _append(pieces, "reasoning", text)
        else:
            _append(pieces, "reasoning", _text_of(thinking, "'thinking'", malformed))


def _text_of(value: object, what: str, malformed: Malformed) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        malformed(f"{what} must be a string", value)
    return value


def _append(pieces: list[StreamDelta], kind: DeltaKind, text: str) -> None:
    if not text:
        return
    if pieces and pieces[-1].kind == kind:
        pieces[-1] = StreamDelta(kind, pieces[-1].text + text)
    else:
        pieces.append(StreamDelta(kind, text))
