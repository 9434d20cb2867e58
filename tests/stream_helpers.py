"""Playing one model stream through the client: over loopback, or into its body handler.

Shared by the stream corpus (``test_llm_streams``) and the failure tests
(``test_llm_failures``). ``play`` is the whole client against a scripted
server; ``handle`` feeds bytes, cut where the caller says, to the handler the
client's HTTP loop feeds, so a cut falls exactly where the test put it.
"""

from __future__ import annotations

import random
from typing import Any

import attrs
from scripted_model import ScriptedModel

from callboard.errors import ModelError
from callboard.llm import AssistantReply, ChatClient, Provider, StreamDelta
from callboard.llm._client import _Stream
from callboard.llm._failures import Call, Retry

KEY = "sk-test-0123456789abcdef"
MESSAGES = [{"role": "user", "content": "hello"}]


@attrs.frozen
class Pieces:
    """A 200 event stream sent as these HTTP chunks, one write each, then ended."""

    parts: tuple[bytes, ...]

    def serve(self, exchange: Any) -> None:
        exchange.start_chunked(200, "text/event-stream")
        for part in self.parts:
            exchange.send_chunk(part)
        exchange.end_chunked()


@attrs.define
class Seen:
    """What the callbacks were handed while one stream played."""

    deltas: list[str] = attrs.Factory(list)
    pieces: list[StreamDelta] = attrs.Factory(list)

    def joined(self, kind: str) -> str:
        return "".join(piece.text for piece in self.pieces if piece.kind == kind)


def fast_client(**options: Any) -> ChatClient:
    settings: dict[str, Any] = {
        "api_key": KEY,
        "backoff_initial": 0.001,
        "backoff_max": 0.002,
        "rng": random.Random(0),
    }
    return ChatClient(**{**settings, **options})


async def play(model: ScriptedModel, seen: Seen, **options: Any) -> AssistantReply | ModelError:
    """One call through the real client, of the model's wire; its reply, or the error
    it raised.

    ``options`` go to the ``ChatClient``; ``on_retry`` goes to the call.
    """
    options.setdefault("provider", model.wire)
    on_retry = options.pop("on_retry", None)
    async with fast_client(**options) as client:
        try:
            return await client.stream_chat(
                base_url=model.base_url,
                model="test-model",
                messages=MESSAGES,
                on_delta=seen.deltas.append,
                on_stream_delta=seen.pieces.append,
                on_retry=on_retry,
            )
        except ModelError as error:
            return error


def handle(
    parts: list[bytes], provider: Provider = "openai"
) -> tuple[AssistantReply | ModelError, Seen]:
    """Feed the parts to the client's body handler for ``provider``, as its HTTP loop does.

    An error the client would retry comes back as the error it retries on.
    """
    seen = Seen()
    call = Call(
        url="http://127.0.0.1:9/v1/chat/completions",
        base_url="http://127.0.0.1:9/v1",
        model="test-model",
        body={},
        headers={},
        key=KEY,
        key_source="the api_key argument",
        provider=provider,
    )
    stream = _Stream(call, seen.deltas.append, seen.pieces.append)
    try:
        for part in parts:
            stream.feed(part)
        return stream.finish(), seen
    except ModelError as error:
        return error, seen
    except Retry as retry:
        return retry.error, seen
