"""Model servers as they really stream: a corpus of recorded-format streams, replayed.

Each file in ``model_streams/`` is a body written from one server's documented
format (its first comment line says which, and what it shows). Every stream
is played through the real client against a scripted server on loopback,
whole and one byte per HTTP chunk, and through the client's body handler
cut at every byte (or, for long streams, at every awkward place: inside a
multi-byte character, inside a ``data:`` prefix, between a CR and its LF),
in LF and CRLF forms. Each must come out as the reply, or the error, in
``EXPECTED``. A stream named ``anthropic-*`` is the Anthropic Messages API's
and is played through the client of that provider (``provider_of``); the
others are OpenAI-compatible.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from scripted_model import ScriptedModel, text
from stream_helpers import KEY, MESSAGES, Pieces, Seen, fast_client, handle, play

from callboard.errors import ModelError
from callboard.llm import (
    AssistantReply,
    ContextOverflow,
    EventStreamDecoder,
    Provider,
    ServerSentEvent,
    StreamDelta,
    ToolCall,
    accumulate,
)

STREAMS = Path(__file__).parent / "model_streams"
SHORT = 1400  # bytes: a stream this short is cut at every byte


@attrs.frozen
class Fails:
    """The error a stream must raise: its class, retryability, words, and context limit."""

    kind: type[ModelError]
    retryable: bool
    says: str
    context_limit: int | None = None


def usage(prompt: int, completion: int, **extra: Any) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        **extra,
    }


EXPECTED: dict[str, AssistantReply | Fails] = {
    "openai-text": AssistantReply(
        "Héllo, wörld 🌍",
        finish_reason="stop",
        usage=usage(
            9,
            4,
            prompt_tokens_details={"cached_tokens": 0},
            completion_tokens_details={"reasoning_tokens": 0},
        ),
    ),
    "openai-refusal": AssistantReply(
        "", finish_reason="stop", refusal="I'm sorry, I can't help with that."
    ),
    "openai-server-error": Fails(ModelError, True, "The server had an error while processing"),
    "vllm-reasoning-tool-call": AssistantReply(
        "",
        (ToolCall("chatcmpl-tool-7f", "read_file", '{"path": "a.txt"}'),),
        "tool_calls",
        {
            "prompt_tokens": 120,
            "total_tokens": 150,
            "completion_tokens": 30,
            "prompt_tokens_details": None,
        },
        reasoning="The user wants a.txt read.",
    ),
    "vllm-internal-error": Fails(ModelError, True, "EngineCore encountered an issue"),
    "vllm-max-model-length": Fails(
        ContextOverflow, False, "is longer than the maximum model length of 8192", 8192
    ),
    "vllm-object-error": Fails(ModelError, False, "The model `qwen` does not exist. (code 404)"),
    "llamacpp-reasoning": AssistantReply(
        "4", finish_reason="stop", usage=usage(20, 9), reasoning="2 and 2 make 4."
    ),
    "llamacpp-error-line-context": Fails(
        ContextOverflow, False, "the request exceeds the available context size", 8192
    ),
    "llamacpp-error-line-server": Fails(
        ModelError, True, "Unable to allocate a KV cache slot (code 500)"
    ),
    "llamacpp-empty-done": Fails(
        ModelError, True, "ended with no text, no tool call, no refusal and no finish_reason"
    ),
    "ollama-parallel-tools": AssistantReply(
        "",
        (
            ToolCall(
                "call_h3l1", "file_write", '{"filePath":"hello.py","content":"print(\\"hello\\")"}'
            ),
            ToolCall(
                "call_w0r1", "file_write", '{"filePath":"world.py","content":"print(\\"world\\")"}'
            ),
        ),
        "tool_calls",
        usage(180, 60),
        reasoning="Two files.",
    ),
    "sglang-parallel-tools-one-delta": AssistantReply(
        "",
        (
            ToolCall("call_a", "read_file", '{"path": "a"}'),
            ToolCall("call_b", "read_file", '{"path": "b"}'),
        ),
        "tool_calls",
    ),
    "groq-usage": AssistantReply(
        "Hi!",
        finish_reason="stop",
        usage={
            "queue_time": 0.05,
            "prompt_tokens": 14,
            "prompt_time": 0.002,
            "completion_tokens": 6,
            "completion_time": 0.01,
            "total_tokens": 20,
            "total_time": 0.012,
        },
        reasoning="Greeting.",
    ),
    "deepseek-reasoner": AssistantReply(
        "你好世界",
        finish_reason="stop",
        usage=usage(
            10,
            12,
            prompt_tokens_details={"cached_tokens": 0},
            completion_tokens_details={"reasoning_tokens": 8},
            prompt_cache_hit_tokens=0,
            prompt_cache_miss_tokens=10,
        ),
        reasoning="用户问好",
    ),
    "mistral-thinking": AssistantReply(
        "Bonjour à vous.",
        finish_reason="stop",
        usage={"prompt_tokens": 5, "total_tokens": 30, "completion_tokens": 25},
        reasoning="Okay, the user says hello.",
    ),
    "mistral-tool-call": AssistantReply(
        "",
        (ToolCall("D681PevKs", "read_file", '{"path": "a.txt"}'),),
        "tool_calls",
        {"prompt_tokens": 60, "total_tokens": 80, "completion_tokens": 20},
    ),
    "openrouter-finish-error": Fails(
        ModelError, True, "ended its answer with finish_reason 'error' and no error saying why"
    ),
    "openrouter-error-502": Fails(ModelError, True, "Provider returned error (code 502)"),
    "openrouter-error-429": Fails(ModelError, True, "free-models-per-min (code 429)"),
    "openrouter-reasoning": AssistantReply(
        "Three.", finish_reason="stop", usage=usage(12, 40), reasoning="**Counting** r's."
    ),
    "litellm-rate-limit": Fails(ModelError, True, "Rate limit reached for gpt-4o (code 429)"),
    "litellm-context-window": Fails(ContextOverflow, False, "ContextWindowExceededError", 128000),
    # The Anthropic Messages API, read into the same reply (callboard.llm._messages_stream).
    "anthropic-text": AssistantReply(
        "Héllo, wörld 🌍",
        finish_reason="stop",
        usage=usage(
            2112, 9, prompt_tokens_details={"cached_tokens": 2000, "cache_creation_tokens": 100}
        ),
    ),
    "anthropic-tool-use": AssistantReply(
        "Let me read it.",
        (ToolCall("toolu_01A", "read_file", '{"path": "a.txt"}'),),
        "tool_calls",
        usage(50, 30, prompt_tokens_details={"cached_tokens": 0, "cache_creation_tokens": 0}),
    ),
    "anthropic-parallel-tools": AssistantReply(
        "",
        (ToolCall("toolu_01", "read_file", '{"path":"a"}'), ToolCall("toolu_02", "job_list", "{}")),
        "tool_calls",
        usage(80, 40, prompt_tokens_details={"cached_tokens": 0, "cache_creation_tokens": 0}),
    ),
    "anthropic-thinking": AssistantReply(
        "4",
        finish_reason="stop",
        usage=usage(20, 15, prompt_tokens_details={"cached_tokens": 0, "cache_creation_tokens": 0}),
        reasoning="2 and 2 make 4.",
    ),
    "anthropic-later-version": AssistantReply(
        "Yes.",
        finish_reason="stop",
        usage=usage(5, 3, prompt_tokens_details={"cached_tokens": 0, "cache_creation_tokens": 0}),
    ),
    "anthropic-max-tokens": AssistantReply(
        "Once upon a",
        finish_reason="length",
        usage=usage(7, 4, prompt_tokens_details={"cached_tokens": 0, "cache_creation_tokens": 0}),
    ),
    "anthropic-overloaded": Fails(ModelError, True, "Overloaded"),
    "anthropic-error-after-text": Fails(ModelError, True, "Internal server error"),
    "anthropic-prompt-too-long": Fails(
        ContextOverflow, False, "prompt is too long: 208310 tokens > 200000 maximum", 200000
    ),
    "anthropic-authentication-error": Fails(ModelError, False, "invalid x-api-key"),
    "anthropic-ended-early": Fails(
        ModelError, True, "the stream ended early, before message_stop and before a stop_reason"
    ),
}


def provider_of(name: str) -> Provider:
    """The wire a stream of the corpus is in, by the prefix of its name."""
    return "anthropic" if name.startswith("anthropic-") else "openai"


def body(name: str, crlf: bool = False) -> bytes:
    data = (STREAMS / f"{name}.sse").read_bytes()
    return data.replace(b"\n", b"\r\n") if crlf else data


def test_every_stream_in_the_corpus_has_an_expected_outcome_and_the_reverse():
    assert sorted(path.stem for path in STREAMS.glob("*.sse")) == sorted(EXPECTED)


def check(outcome: AssistantReply | BaseException, seen: Seen, expected: AssistantReply | Fails):
    if isinstance(expected, Fails):
        assert isinstance(outcome, expected.kind), outcome
        assert (type(outcome), outcome.retryable) == (expected.kind, expected.retryable)
        assert expected.says in str(outcome)
        assert getattr(outcome, "context_limit", None) == expected.context_limit
        assert KEY not in str(outcome)
        return
    assert outcome == expected
    assert "".join(seen.deltas) == expected.content
    assert (seen.joined("content"), seen.joined("reasoning"), seen.joined("refusal")) == (
        expected.content,
        expected.reasoning,
        expected.refusal,
    )


@pytest.mark.parametrize("one_byte_per_chunk", [False, True], ids=["whole", "bytewise"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_a_stream_played_over_loopback_gives_its_expected_outcome(name, one_byte_per_chunk):
    data = body(name)
    parts = tuple(data[i : i + 1] for i in range(len(data))) if one_byte_per_chunk else (data,)
    seen = Seen()
    script = [Pieces(parts), text("never asked")]
    with trio.fail_after(20), ScriptedModel(script, wire=provider_of(name)) as model:
        # One attempt: the outcome is this stream's, not a retry's (test_llm_failures).
        outcome = await play(model, seen, max_attempts=1)
    check(outcome, seen, EXPECTED[name])
    assert len(model.requests) == 1


def awkward_cuts(data: bytes) -> list[int]:
    """Every cut for a short stream; else inside each multi-byte character, each
    ``data:`` prefix and each CRLF, and around every event's blank line."""
    if len(data) <= SHORT:
        return list(range(1, len(data)))
    cuts: set[int] = set()
    for i, byte in enumerate(data):
        if byte >= 0xC0:  # the lead byte of a multi-byte UTF-8 character
            cuts.update(range(i + 1, i + 4))
        if any(data.startswith(field, i) for field in (b"data:", b"error:", b"event:")):
            cuts.update(range(i + 1, i + 7))
        if data.startswith(b"\r\n", i) or data.startswith(b"\n\n", i):
            cuts.update((i, i + 1, i + 2))
    return sorted(cut for cut in cuts if 0 < cut < len(data))


@pytest.mark.parametrize("crlf", [False, True], ids=["lf", "crlf"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_stream_cut_anywhere_awkward_gives_the_same_outcome(name, crlf):
    data = body(name, crlf)
    cuts = awkward_cuts(data)
    assert cuts, "no place to cut"
    provider = provider_of(name)
    for cut in cuts:
        outcome, seen = handle([data[:cut], data[cut:]], provider)
        check(outcome, seen, EXPECTED[name])
    outcome, seen = handle([data[i : i + 1] for i in range(len(data))], provider)
    check(outcome, seen, EXPECTED[name])


def test_cuts_fall_inside_multibyte_characters_data_prefixes_and_crlfs():
    data = body("openai-text", crlf=True)
    cuts = set(awkward_cuts(data))
    lead = data.index("é".encode())
    prefix = data.index(b"data:")
    crlf = data.index(b"\r\n")
    assert {lead + 1, lead + 2, prefix + 2, prefix + 5, crlf + 1} <= cuts


async def test_reasoning_reaches_the_stream_callback_as_its_own_kind_and_never_on_delta():
    seen = Seen()
    with trio.fail_after(20), ScriptedModel([Pieces((body("deepseek-reasoner"),))]) as model:
        reply = await play(model, seen)
    assert seen.deltas == ["你好世界"]
    assert seen.pieces == [StreamDelta("reasoning", "用户问好"), StreamDelta("content", "你好世界")]
    assert isinstance(reply, AssistantReply)
    assert (reply.content, reply.reasoning) == ("你好世界", "用户问好")


def test_a_refusal_goes_back_to_the_server_as_the_assistant_messages_refusal():
    reply = AssistantReply("", finish_reason="stop", refusal="I can't help with that.")
    assert reply.to_message() == {
        "role": "assistant",
        "content": None,
        "refusal": "I can't help with that.",
    }


def test_an_error_line_of_older_llama_cpp_is_decoded_as_an_error_event():
    decoder = EventStreamDecoder()
    events = decoder.feed(b'error: {"code":500}\n\ndata: [DONE]\n\n') + decoder.close()
    assert events == [ServerSentEvent('{"code":500}', event="error"), ServerSentEvent("[DONE]")]
    assert decoder.unrecognized is None


def test_an_error_line_in_words_rather_than_json_still_fails_the_call_saying_them():
    outcome, _ = handle([b"error: slot unavailable\n\ndata: [DONE]\n\n"])
    assert isinstance(outcome, ModelError)
    assert str(outcome) == (
        "the model server reported an error in the middle of its answer: slot unavailable"
    )


def test_an_id_repeated_on_every_delta_of_one_call_continues_that_call():
    def part(arguments: str) -> dict[str, Any]:
        call = {"index": 0, "id": "call_x", "function": {"name": "f", "arguments": arguments}}
        return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}

    reply = accumulate([part('{"a"'), part(": 1}"), {"choices": [{"finish_reason": "tool_calls"}]}])
    assert reply.tool_calls == (ToolCall("call_x", "f", '{"a": 1}'),)


def test_an_empty_answer_that_only_reasoned_says_so():
    chunks = [{"choices": [{"index": 0, "delta": {"reasoning_content": "hmm"}}]}]
    with pytest.raises(ModelError, match=r"after 1 chunks \(3 characters of reasoning only\)"):
        accumulate(chunks)


async def test_deltas_of_every_kind_arrive_in_stream_order():
    pieces: list[StreamDelta] = []
    with trio.fail_after(20), ScriptedModel([Pieces((body("mistral-thinking"),))]) as model:
        async with fast_client() as client:
            await client.stream_chat(
                base_url=model.base_url,
                model="m",
                messages=MESSAGES,
                on_stream_delta=functools.partial(list.append, pieces),
            )
    assert [piece.kind for piece in pieces] == ["reasoning", "reasoning", "content", "content"]


def test_reasoning_is_read_once_whichever_spelling_carries_it():
    both = {"reasoning_content": "think", "reasoning": "think"}
    empty_beside = {"reasoning_content": "", "reasoning": "think"}
    chunks = [{"choices": [{"index": 0, "delta": delta}]} for delta in (both, empty_beside)]
    reply = accumulate([*chunks, {"choices": [{"index": 0, "finish_reason": "stop"}]}])
    assert reply.reasoning == "thinkthink"
