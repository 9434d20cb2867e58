"""Failures told apart: a context overflow, an exhausted quota, and a key never shown.

A context overflow is :class:`~callboard.llm.ContextOverflow` whichever server
says it and whatever status it says it with, so that a caller can shorten the
conversation; OpenAI's 429 ``insufficient_quota`` is permanent; and no error
quotes the API key, even where a server echoes it inside its stream.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import trio
from scripted_model import ScriptedModel, status, text
from stream_helpers import KEY, Pieces, Seen, play

import callboard.llm
from callboard.errors import ModelError
from callboard.llm import AssistantReply, ContextOverflow, RetryNotice

STREAMS = Path(__file__).parent / "model_streams"


async def test_a_429_for_insufficient_quota_is_permanent_and_not_retried():
    quota = {
        "error": {
            "message": "You exceeded your current quota, please check your plan and billing "
            "details.",
            "type": "insufficient_quota",
            "param": None,
            "code": "insufficient_quota",
        }
    }
    with trio.fail_after(20), ScriptedModel([status(429, quota), text("never")]) as model:
        outcome = await play(model, Seen())
    assert isinstance(outcome, ModelError)
    assert (outcome.retryable, outcome.status, len(model.requests)) == (False, 429, 1)
    assert str(outcome) == (
        f"the model server at {model.base_url} refused the request because the account "
        "behind the API key is out of quota or credit (HTTP 429 insufficient_quota): waiting "
        "will not help; add credit or raise the account's limits. The server said: You "
        "exceeded your current quota, please check your plan and billing details."
    )


OVERFLOW_BODIES = {
    "openai": (
        400,
        {
            "error": {
                "message": "This model's maximum context length is 8192 tokens. However, your "
                "messages resulted in 9000 tokens.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
        },
        8192,
    ),
    "llama.cpp": (
        400,
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 14429,
                "n_ctx": 8192,
            }
        },
        8192,
    ),
    "llama.cpp-500": (
        500,
        {
            "error": {
                "code": 500,
                "message": "the request exceeds the available context size. try increasing the "
                "context size or enable context shift",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 1407,
                "n_ctx": 256,
            }
        },
        256,
    ),
    "vllm-v1": (
        400,
        {
            "error": {
                "message": "Prompt length of 5016 is longer than the maximum model length of 4096.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        },
        4096,
    ),
}


@pytest.mark.parametrize("server", sorted(OVERFLOW_BODIES))
async def test_an_http_context_overflow_is_a_context_overflow_and_is_not_retried(server):
    code, error, limit = OVERFLOW_BODIES[server]
    with trio.fail_after(20), ScriptedModel([status(code, error), text("never")]) as model:
        outcome = await play(model, Seen())
    assert isinstance(outcome, ContextOverflow)
    assert (outcome.retryable, outcome.status, outcome.context_limit) == (False, code, limit)
    assert str(outcome).startswith(
        f"the conversation is longer than model 'test-model' accepts (HTTP {code} from "
        f"{model.base_url}): it exceeds the context window"
    )
    assert len(model.requests) == 1


def test_a_context_overflow_is_a_model_error_exported_by_callboard_llm_and_survives_pickling():
    error = ContextOverflow("too long", status=400, context_limit=8192)
    copy = pickle.loads(pickle.dumps(error))
    assert callboard.llm.ContextOverflow is ContextOverflow
    assert isinstance(copy, ModelError)
    assert (type(copy), str(copy), copy.status, copy.retryable, copy.context_limit) == (
        ContextOverflow,
        "too long",
        400,
        False,
        8192,
    )


@pytest.mark.parametrize(
    "data",
    [
        b'data: {"error": {"message": "Incorrect API key provided: ' + KEY.encode() + b'"}}\n\n',
        b'error: {"message": "context window exceeded for key ' + KEY.encode() + b'"}\n\n',
        b'data: {"choices": {"key": "' + KEY.encode() + b'"}}\n\n',
        # The key straddles where the quote is cut to length: a cut key is no longer found.
        b'data: {"choices": {"' + b"k" * 60 + b'": "' + KEY.encode() + b'"}}\n\n',
        b'data: {"error": {"message": "' + b"m" * 180 + KEY.encode() + b'"}}\n\n',
    ],
    ids=["error", "overflow", "malformed", "malformed-at-the-cut", "error-at-the-cut"],
)
async def test_a_key_the_server_echoes_inside_its_stream_is_redacted_from_the_error(data):
    with trio.fail_after(20), ScriptedModel([Pieces((data,))]) as model:
        outcome = await play(model, Seen())
    assert isinstance(outcome, ModelError)
    assert KEY[:8] not in str(outcome) and KEY[:8] not in repr(outcome)
    assert "[redacted]" in str(outcome)


async def test_a_retryable_error_in_the_stream_before_any_text_is_retried_after_a_backoff():
    notices: list[RetryNotice] = []
    first = Pieces(((STREAMS / "openrouter-error-429.sse").read_bytes(),))
    with trio.fail_after(20), ScriptedModel([first, text("ok")]) as model:
        outcome = await play(model, Seen(), on_retry=notices.append)
    assert isinstance(outcome, AssistantReply)
    assert (outcome.content, len(model.requests)) == ("ok", 2)
    [notice] = notices
    assert (notice.attempt, notice.error.retryable) == (1, True)
    assert str(notice.error) == (
        "the model server reported an error in the middle of its answer: Rate limit "
        "exceeded: free-models-per-min (code 429)"
    )


async def test_a_retryable_error_in_the_stream_after_text_was_shown_is_raised_not_retried():
    seen = Seen()
    first = Pieces(((STREAMS / "vllm-internal-error.sse").read_bytes(),))
    with trio.fail_after(20), ScriptedModel([first, text("never")]) as model:
        outcome = await play(model, seen)
    assert isinstance(outcome, ModelError)
    assert (outcome.retryable, seen.deltas, len(model.requests)) == (True, ["Sure"], 1)


async def test_an_empty_answer_is_retried_by_the_client_and_then_gives_up_saying_so():
    empty = Pieces(((STREAMS / "llamacpp-empty-done.sse").read_bytes(),))
    with trio.fail_after(20), ScriptedModel([empty, empty]) as model:
        outcome = await play(model, Seen(), max_attempts=2)
    assert isinstance(outcome, ModelError)
    assert (outcome.retryable, len(model.requests)) == (True, 2)
    assert str(outcome).endswith("so it is not recorded as a reply (gave up after 2 attempts)")


async def test_a_password_in_the_base_url_is_masked_in_the_error_and_the_retry_log(caplog):
    with trio.fail_after(20), ScriptedModel([status(503), status(503)]) as model:
        url = model.base_url.replace("http://", "http://me:hunter2@")
        client = callboard.llm.ChatClient(max_attempts=2, backoff_initial=0.001)
        with caplog.at_level("INFO", logger="callboard.llm"):
            with pytest.raises(ModelError) as failed:
                await client.stream_chat(
                    base_url=url, model="m", messages=[{"role": "user", "content": "hi"}]
                )
        await client.aclose()
    said = str(failed.value)
    masked = model.base_url.replace("http://", "http://me:***@")
    assert said.startswith(f"the model server at {masked} failed (HTTP 503)")
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 1 and f"model call to {masked}/chat/completions failed" in logged[0]
    assert "hunter2" not in said and not any("hunter2" in line for line in logged)
    assert len(model.requests) == 2
