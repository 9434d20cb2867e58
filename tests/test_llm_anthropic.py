"""ChatClient(provider="anthropic") against a scripted Messages API endpoint on loopback.

What is particular to the Anthropic wire: the request it writes for an
OpenAI-shaped conversation (asserted literally), the headers and the key,
prompt-cache breakpoints, and what each of the API's errors means. The
streams themselves are in the corpus (``test_llm_streams``, ``anthropic-*``).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import trio
from scripted_model import ScriptedModel, status, text, tool_call

from callboard.errors import ModelError
from callboard.llm import (
    PROVIDERS,
    AssistantReply,
    ChatClient,
    ContextOverflow,
    MessagesAccumulator,
    ToolCall,
    check_provider,
)
from callboard.views import check_provider_name

KEY = "sk-ant-test-0123456789abcdef"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]
CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "read a.txt"},
    {
        "role": "assistant",
        "content": "Reading it.",
        "tool_calls": [
            {
                "id": "toolu_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "toolu_1", "content": "hello"},
    {"role": "user", "content": "a job finished"},
]


@pytest.fixture(autouse=True)
def no_key_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CALLBOARD_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def client(**options: Any) -> ChatClient:
    settings: dict[str, Any] = {
        "provider": "anthropic",
        "api_key": KEY,
        "backoff_initial": 0.001,
        "backoff_max": 0.002,
        "retry_after_max": 0.005,
        "rng": random.Random(0),
    }
    return ChatClient(**{**settings, **options})


async def ask(model: ScriptedModel, **options: Any) -> AssistantReply:
    messages = options.pop("messages", [{"role": "user", "content": "hi"}])
    async with client(**options) as chat:
        return await chat.stream_chat(
            base_url=model.base_url, model="claude-test", messages=messages, tools=TOOLS
        )


async def fails(model: ScriptedModel, **options: Any) -> ModelError:
    with pytest.raises(ModelError) as raised:
        await ask(model, **options)
    return raised.value


async def test_the_conversation_is_sent_as_a_messages_request_with_cache_breakpoints():
    with trio.fail_after(10), ScriptedModel([text("done")], wire="anthropic") as model:
        reply = await ask(model, messages=CONVERSATION)
    ephemeral = {"type": "ephemeral"}
    assert model.requests == [
        {
            "max_tokens": 8192,
            "model": "claude-test",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "read a.txt"}]},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Reading it."},
                        {
                            "type": "tool_use",
                            "id": "toolu_1",
                            "name": "read_file",
                            "input": {"path": "a.txt"},
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "hello"},
                        {"type": "text", "text": "a job finished", "cache_control": ephemeral},
                    ],
                },
            ],
            "stream": True,
            "system": [{"type": "text", "text": "Be brief.", "cache_control": ephemeral}],
            "tools": [
                {
                    "name": "read_file",
                    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
                    "description": "Read a file.",
                }
            ],
        }
    ]
    assert model.chat_requests[0]["messages"] == CONVERSATION
    assert reply.content == "done"


async def test_without_a_system_prompt_the_tools_carry_the_first_cache_breakpoint():
    with trio.fail_after(10), ScriptedModel([text("a")], wire="anthropic") as model:
        await ask(model)
    (request,) = model.requests
    assert "system" not in request
    assert request["tools"][-1]["cache_control"] == {"type": "ephemeral"}


async def test_prompt_caching_can_be_turned_off_and_max_tokens_set():
    with trio.fail_after(10), ScriptedModel([text("a")], wire="anthropic") as model:
        await ask(model, messages=CONVERSATION, prompt_cache=False, max_tokens=100)
    (request,) = model.requests
    assert "cache_control" not in str(request)
    assert request["max_tokens"] == 100


async def test_the_key_goes_in_x_api_key_with_the_api_version_and_no_bearer():
    with trio.fail_after(10), ScriptedModel([text("a")], wire="anthropic") as model:
        await ask(model)
    (headers,) = model.request_headers
    assert (headers["x-api-key"], headers["anthropic-version"]) == (KEY, "2023-06-01")
    assert "authorization" not in headers


async def test_the_key_is_read_from_callboard_api_key_before_anthropic_api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "from-openai")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-anthropic")
    with trio.fail_after(10), ScriptedModel([text("a"), text("b")], wire="anthropic") as model:
        await ask(model, api_key=None)
        monkeypatch.setenv("CALLBOARD_API_KEY", "from-callboard")
        await ask(model, api_key=None)
    assert [h["x-api-key"] for h in model.request_headers] == ["from-anthropic", "from-callboard"]


async def test_a_base_url_ending_in_v1_is_not_given_a_second_one():
    with trio.fail_after(10), ScriptedModel([text("a")], wire="anthropic") as model:
        async with client() as chat:
            await chat.stream_chat(
                base_url=model.base_url + "/v1/",
                model="m",
                messages=[{"role": "user", "content": "x"}],
            )
    assert len(model.requests) == 1


async def test_a_tool_round_comes_back_as_the_same_reply_an_openai_server_gives():
    script = [tool_call("read_file", {"path": "a.txt"}, call_id="toolu_9")]
    with trio.fail_after(10), ScriptedModel(script, wire="anthropic") as model:
        reply = await ask(model)
    assert reply.tool_calls == (ToolCall("toolu_9", "read_file", '{"path": "a.txt"}'),)
    assert reply.finish_reason == "tool_calls"
    assert reply.to_message()["tool_calls"][0]["function"]["name"] == "read_file"


@pytest.mark.parametrize(
    ("code", "kind"), [(529, "overloaded_error"), (429, "rate_limit_error"), (500, "api_error")]
)
async def test_overloaded_rate_limited_and_api_errors_are_retried(code, kind):
    with trio.fail_after(10), ScriptedModel([status(code), text("ok")], wire="anthropic") as model:
        reply = await ask(model)
    assert reply.content == "ok"
    assert len(model.requests) == 2


async def test_overloaded_every_time_gives_up_saying_so():
    with trio.fail_after(10), ScriptedModel([status(529)] * 2, wire="anthropic") as model:
        error = await fails(model, max_attempts=2)
    assert str(error) == (
        f"the model server at {model.base_url} is overloaded (HTTP 529). The server said: "
        "scripted HTTP 529 (gave up after 2 attempts)"
    )
    assert (error.retryable, error.status) == (True, 529)


async def test_an_authentication_error_is_permanent_and_names_the_anthropic_key_variables():
    body = {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    }
    with trio.fail_after(10), ScriptedModel([status(401, body)], wire="anthropic") as model:
        error = await fails(model)
    assert str(error) == (
        f"the model server at {model.base_url} refused the API key (HTTP 401): the key from "
        "the api_key argument is wrong or lacks access to model 'claude-test'; set "
        "CALLBOARD_API_KEY or ANTHROPIC_API_KEY to a valid key. The server said: invalid x-api-key"
    )
    assert (error.retryable, len(model.requests)) == (False, 1)


async def test_a_prompt_that_is_too_long_is_a_context_overflow_with_its_limit():
    said = "prompt is too long: 208310 tokens > 200000 maximum"
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": said}}
    with trio.fail_after(10), ScriptedModel([status(400, body)], wire="anthropic") as model:
        error = await fails(model)
    assert isinstance(error, ContextOverflow)
    assert (error.context_limit, error.retryable, len(model.requests)) == (200000, False, 1)
    assert said in str(error)


async def test_a_404_says_the_url_called_and_that_the_base_url_is_the_servers_root():
    with trio.fail_after(10), ScriptedModel([], wire="anthropic") as model:
        async with client() as chat:
            with pytest.raises(ModelError) as raised:
                await chat.stream_chat(
                    base_url=model.base_url + "/api",
                    model="claude-test",
                    messages=[{"role": "user", "content": "x"}],
                )
    error = raised.value
    assert str(error) == (
        f"the model server at {model.base_url}/api answered HTTP 404 to POST "
        f"{model.base_url}/api/v1/messages: there is no such endpoint there, or no model "
        "'claude-test'; check the model name, and base_url: an Anthropic base_url is the "
        "server's root, such as https://api.anthropic.com, and /v1/messages is added to it. "
        "The server said: the scripted model serves only POST /v1/messages"
    )
    assert (error.retryable, error.status, len(model.requests)) == (False, 404, 0)


async def test_a_key_the_server_echoes_in_an_error_is_never_shown():
    body = {"type": "error", "error": {"type": "permission_error", "message": f"key {KEY} denied"}}
    with trio.fail_after(10), ScriptedModel([status(403, body)], wire="anthropic") as model:
        error = await fails(model)
    assert KEY not in str(error) and KEY not in repr(error)
    assert "key [redacted] denied" in str(error)


def test_a_provider_must_be_one_the_client_speaks():
    with pytest.raises(ValueError, match=r"^the model provider must be one of 'openai', "):
        ChatClient(provider="gemini")  # type: ignore[arg-type]
    assert [check_provider(name) for name in PROVIDERS] == list(PROVIDERS)
    for name in PROVIDERS:  # the specs' check, a layer below, knows the same names
        check_provider_name(None, None, name)
    with pytest.raises(TypeError, match=r"^'provider' must be 'openai' or 'anthropic'"):
        check_provider_name(None, None, "gemini")


def test_a_delta_of_the_wrong_kind_for_its_block_is_malformed_naming_both():
    accumulator = MessagesAccumulator()
    block = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    accumulator.add_event({"type": "content_block_start", "index": 0, "content_block": block})
    with pytest.raises(ModelError, match=r"^event 2 of the model's stream is malformed: a "):
        accumulator.add_event(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "x"},
            }
        )


def test_a_delta_for_a_block_that_never_started_is_malformed():
    accumulator = MessagesAccumulator()
    delta = {
        "type": "content_block_delta",
        "index": 3,
        "delta": {"type": "text_delta", "text": "x"},
    }
    with pytest.raises(ModelError, match=r"content block 3, which never started") as raised:
        accumulator.add_event(delta)
    assert raised.value.retryable is False
