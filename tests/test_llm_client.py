"""ChatClient against a real scripted OpenAI-compatible server on loopback.

Backoff is configured to milliseconds so retries cost nothing. Where a test
needs a long wait to pass (Retry-After, idle timeouts) it takes the
``mock_clock`` fixture, lets it run at real speed (so ``fail_after`` still
bounds a hang) and jumps it at a moment chosen by an event. Autojump is not
used: the server is a real thread, and an autojump clock would leap to the
next deadline whenever trio waits on its socket.
"""

from __future__ import annotations

import functools
import random
import socket
import threading
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from scripted_model import (
    DEFAULT_USAGE,
    ScriptedModel,
    drop,
    hold,
    raw,
    status,
    text,
    tool_calls,
)

from callboard.errors import ModelError
from callboard.llm import AssistantReply, ChatClient, RetryNotice, ToolCall
from callboard.llm._failures import retry_after

KEY = "sk-test-0123456789abcdef"
MESSAGES = [{"role": "user", "content": "Say hello"}]
TOOL = {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}


@pytest.fixture(autouse=True)
def no_key_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CALLBOARD_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def fast_client(**options: Any) -> ChatClient:
    settings: dict[str, Any] = {
        "api_key": KEY,
        "backoff_initial": 0.001,
        "backoff_max": 0.002,
        "retry_after_max": 0.005,
        "idle_timeout": 30.0,
        "rng": random.Random(0),
    }
    return ChatClient(**{**settings, **options})


async def ask(client: ChatClient, model: ScriptedModel, **options: Any) -> AssistantReply:
    return await client.stream_chat(
        base_url=model.base_url, model="test-model", messages=MESSAGES, **options
    )


async def ask_and_fail(client: ChatClient, model: ScriptedModel, **options: Any) -> ModelError:
    with pytest.raises(ModelError) as caught:
        await ask(client, model, **options)
    return caught.value


async def test_a_streamed_text_answer_arrives_as_deltas_and_then_as_one_reply():
    deltas: list[str] = []
    with trio.fail_after(10), ScriptedModel([text("Hello, world")]) as model:
        async with fast_client() as client:
            reply = await ask(client, model, on_delta=deltas.append)
    assert deltas == ["Hell", "o, w", "orld"]
    assert reply == AssistantReply("Hello, world", (), "stop", dict(DEFAULT_USAGE))
    assert len(model.requests) == 1


async def test_the_request_asks_for_a_stream_with_usage_and_sends_no_tools_when_none_are_given():
    with trio.fail_after(10), ScriptedModel([text("hi")]) as model:
        async with fast_client() as client:
            await ask(client, model)
    assert model.requests == [
        {
            "model": "test-model",
            "messages": MESSAGES,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    ]


async def test_tools_and_extra_body_fields_are_sent_when_given():
    with trio.fail_after(10), ScriptedModel([text("hi")]) as model:
        async with fast_client() as client:
            await ask(client, model, tools=[TOOL], extra_body={"temperature": 0, "stream": False})
    [request] = model.requests
    assert (request["tools"], request["temperature"], request["stream"]) == ([TOOL], 0, True)


async def test_the_api_key_is_sent_as_a_bearer_token():
    with trio.fail_after(10), ScriptedModel([text("hi")]) as model:
        async with fast_client() as client:
            await ask(client, model)
    assert model.request_headers[0]["authorization"] == f"Bearer {KEY}"


async def test_the_key_is_read_from_callboard_api_key_before_openai_api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "from-openai")
    monkeypatch.setenv("CALLBOARD_API_KEY", "from-callboard")
    with trio.fail_after(10), ScriptedModel([text("hi")]) as model:
        async with fast_client(api_key=None) as client:
            await ask(client, model)
    assert model.request_headers[0]["authorization"] == "Bearer from-callboard"


async def test_without_any_key_no_authorization_header_is_sent():
    with trio.fail_after(10), ScriptedModel([text("hi")]) as model:
        async with fast_client(api_key=None) as client:
            await ask(client, model)
    assert "authorization" not in model.request_headers[0]


async def test_crlf_line_endings_and_comments_in_the_stream_are_understood():
    deltas: list[str] = []
    with trio.fail_after(10), ScriptedModel([text("Hi there", crlf=True, comment="ok")]) as model:
        async with fast_client() as client:
            reply = await ask(client, model, on_delta=deltas.append)
    assert (deltas, reply.content, reply.finish_reason) == (
        ["Hi ", "the", "re"],
        "Hi there",
        "stop",
    )


async def test_a_line_separator_character_in_the_answer_reaches_the_reply_intact():
    with trio.fail_after(10), ScriptedModel([text("one\u2028two\u0085three")]) as model:
        async with fast_client() as client:
            reply = await ask(client, model)
    assert reply.content == "one\u2028two\u0085three"


async def test_two_parallel_tool_calls_streamed_interleaved_are_accumulated_by_index():
    calls = [
        ("read_file", {"path": "a.txt"}, "call_r"),
        ("write_file", {"path": "b.txt", "content": "hi"}, "call_w"),
    ]
    with trio.fail_after(10), ScriptedModel([tool_calls(calls)]) as model:
        async with fast_client() as client:
            reply = await ask(client, model, tools=[TOOL])
    assert reply.tool_calls == (
        ToolCall("call_r", "read_file", '{"path": "a.txt"}'),
        ToolCall("call_w", "write_file", '{"path": "b.txt", "content": "hi"}'),
    )
    assert (reply.content, reply.finish_reason) == ("", "tool_calls")


async def test_usage_sent_in_the_final_chunk_is_recorded_in_the_reply():
    usage = {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}
    with trio.fail_after(10), ScriptedModel([text("hi", usage=usage)]) as model:
        async with fast_client() as client:
            reply = await ask(client, model)
    assert reply.usage == usage


async def test_a_429_with_retry_after_is_retried_and_then_succeeds():
    notices: list[RetryNotice] = []
    script = [status(429, headers={"Retry-After": "1"}), text("ok")]
    with trio.fail_after(10), ScriptedModel(script) as model:
        async with fast_client() as client:
            reply = await ask(client, model, on_retry=notices.append)
    assert reply.content == "ok"
    assert len(model.requests) == 2
    assert [(n.attempt, n.delay, n.error.status) for n in notices] == [(1, 0.005, 429)]


async def test_a_retry_after_below_the_cap_is_waited_in_full(mock_clock):
    mock_clock.rate = 1.0
    notices: list[RetryNotice] = []
    retrying = trio.Event()

    def on_retry(notice: RetryNotice) -> None:
        notices.append(notice)
        retrying.set()

    script = [status(429, headers={"Retry-After": "3"}), text("ok")]
    with trio.fail_after(10), ScriptedModel(script) as model:
        async with fast_client(retry_after_max=60.0) as client, trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(ask, client, model, on_retry=on_retry))
            await retrying.wait()
            mock_clock.jump(2.5)
            await trio.testing.wait_all_tasks_blocked()
            assert len(model.requests) == 1
            mock_clock.jump(1.0)
    assert len(model.requests) == 2
    assert [(n.attempt, n.delay) for n in notices] == [(1, 3.0)]


async def test_a_500_is_retried_and_then_succeeds():
    with trio.fail_after(10), ScriptedModel([status(500), text("ok")]) as model:
        async with fast_client() as client:
            reply = await ask(client, model)
    assert reply.content == "ok"
    assert len(model.requests) == 2


async def test_a_server_that_keeps_failing_raises_a_retryable_error_after_the_last_attempt():
    with trio.fail_after(10), ScriptedModel([status(503)] * 3) as model:
        async with fast_client(max_attempts=3) as client:
            error = await ask_and_fail(client, model)
    assert str(error) == (
        f"the model server at {model.base_url} failed (HTTP 503). "
        "The server said: scripted HTTP 503 (gave up after 3 attempts)"
    )
    assert (error.retryable, error.status, len(model.requests)) == (True, 503, 3)


@pytest.mark.parametrize("code", [401, 403])
async def test_a_refused_key_is_terminal_and_says_so_without_showing_the_key(code):
    echo = status(code, {"error": {"message": f"Incorrect API key provided: {KEY}"}})
    with trio.fail_after(10), ScriptedModel([echo]) as model:
        async with fast_client() as client:
            error = await ask_and_fail(client, model)
    assert str(error) == (
        f"the model server at {model.base_url} refused the API key (HTTP {code}): the key "
        "from the api_key argument is wrong or lacks access to model 'test-model'; set "
        "CALLBOARD_API_KEY or OPENAI_API_KEY to a valid key. "
        "The server said: Incorrect API key provided: [redacted]"
    )
    assert (error.retryable, error.status, len(model.requests)) == (False, code, 1)
    assert KEY not in repr(error)
    assert KEY not in repr(client)


async def test_a_401_without_any_key_says_the_key_is_missing_and_where_it_is_read():
    with trio.fail_after(10), ScriptedModel([status(401)]) as model:
        async with fast_client(api_key=None) as client:
            error = await ask_and_fail(client, model)
    assert str(error) == (
        f"the model server at {model.base_url} requires an API key (HTTP 401) and none was "
        "sent: the key is missing; set CALLBOARD_API_KEY or OPENAI_API_KEY. "
        "The server said: scripted HTTP 401"
    )


async def test_a_context_length_400_is_terminal_and_says_the_conversation_is_too_long():
    body = {
        "error": {
            "message": "This model's maximum context length is 8192 tokens.",
            "code": "context_length_exceeded",
        }
    }
    with trio.fail_after(10), ScriptedModel([status(400, body)]) as model:
        async with fast_client() as client:
            error = await ask_and_fail(client, model)
    assert str(error) == (
        f"the conversation is longer than model 'test-model' accepts (HTTP 400 from "
        f"{model.base_url}): it exceeds the context window; shorten or summarise it before "
        "asking again. The server said: This model's maximum context length is 8192 tokens."
    )
    assert (error.retryable, error.status, len(model.requests)) == (False, 400, 1)


async def test_a_404_is_terminal_and_names_the_url_and_the_model():
    with trio.fail_after(10), ScriptedModel([status(404, "no such model")]) as model:
        async with fast_client() as client:
            error = await ask_and_fail(client, model)
    assert str(error) == (
        f"the model server at {model.base_url} answered HTTP 404 to POST "
        f"{model.base_url}/chat/completions: there is no such endpoint there, or no model "
        "'test-model'; check the model name, and base_url: it is the URL that "
        "/chat/completions is added to. The server said: no such model"
    )
    assert (error.retryable, len(model.requests)) == (False, 1)


async def test_a_404_from_a_base_url_without_v1_says_the_url_called_and_where_v1_goes():
    with trio.fail_after(10), ScriptedModel([], path_prefix="/v1") as model:
        root = model.base_url.removesuffix("/v1")
        async with fast_client() as client:
            with pytest.raises(ModelError) as raised:
                await client.stream_chat(base_url=root, model="test-model", messages=MESSAGES)
    assert str(raised.value) == (
        f"the model server at {root} answered HTTP 404 to POST {root}/chat/completions: "
        "there is no such endpoint there, or no model 'test-model'; check the model name, "
        "and base_url: an OpenAI-compatible base_url usually ends in /v1, such as "
        f"http://127.0.0.1:8000/v1, and {root} does not. The server said: the scripted "
        "model serves only POST /v1/chat/completions"
    )
    assert (raised.value.retryable, raised.value.status, len(model.requests)) == (False, 404, 0)


async def test_a_stream_whose_data_is_not_json_raises_a_terminal_error_quoting_it():
    with trio.fail_after(10), ScriptedModel([raw(b"data: {oops\n\n")]) as model:
        async with fast_client() as client:
            error = await ask_and_fail(client, model)
    assert str(error) == (
        f"the model server at {model.base_url} sent an event whose data is not JSON: {{oops"
    )
    assert (error.retryable, len(model.requests)) == (False, 1)


async def test_a_body_that_is_not_an_event_stream_is_quoted_up_to_200_characters():
    page = b"<html>" + b"x" * 300 + b"</html>\n"
    with trio.fail_after(10), ScriptedModel([raw(page, content_type="text/html")]) as model:
        async with fast_client() as client:
            error = await ask_and_fail(client, model)
    quoted = "<html>" + "x" * 191 + "..."
    assert str(error) == (
        f"the model server at {model.base_url} answered with something that is not an event "
        f"stream (content-type 'text/html'): {quoted}"
    )
    assert (len(quoted), error.retryable, len(model.requests)) == (200, False, 1)


async def test_a_stream_that_ends_before_done_and_finish_reason_is_a_retryable_early_end():
    partial = b'data: {"choices": [{"index": 0, "delta": {"content": "Hel"}}]}\n\n'
    deltas: list[str] = []
    with trio.fail_after(10), ScriptedModel([raw(partial), text("never")]) as model:
        async with fast_client() as client:
            error = await ask_and_fail(client, model, on_delta=deltas.append)
    assert str(error) == (
        f"the connection to the model server at {model.base_url} failed after the answer "
        "began (the stream ended early, before [DONE] and before a finish_reason); "
        "the whole call may be retried"
    )
    assert (deltas, error.retryable, len(model.requests)) == (["Hel"], True, 1)


async def test_an_answer_that_reached_done_is_kept_when_the_connection_then_breaks():
    whole = (
        b'data: {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": "stop"}]}'
        b"\n\ndata: [DONE]\n\n"
    )
    with trio.fail_after(10), ScriptedModel([raw(whole, cut=True), text("never")]) as model:
        async with fast_client() as client:
            reply = await ask(client, model)
    assert (reply.content, reply.finish_reason, len(model.requests)) == ("Hi", "stop", 1)


async def test_a_connection_dropped_before_any_answer_is_retried():
    with trio.fail_after(10), ScriptedModel([drop(), text("ok")]) as model:
        async with fast_client() as client:
            reply = await ask(client, model)
    assert (reply.content, len(model.requests)) == ("ok", 2)


async def test_a_connection_cut_mid_answer_raises_a_retryable_error_without_retrying():
    partial = b'data: {"choices": [{"index": 0, "delta": {"content": "Hel"}}]}\n\n'
    with trio.fail_after(10), ScriptedModel([raw(partial, cut=True), text("never")]) as model:
        async with fast_client() as client:
            error = await ask_and_fail(client, model)
    assert str(error) == (
        f"the connection to the model server at {model.base_url} failed after the answer "
        "began (RemoteProtocolError: peer closed connection without sending complete "
        "message body (incomplete chunked read)); the whole call may be retried"
    )
    assert (error.retryable, len(model.requests)) == (True, 1)


async def test_a_refused_connection_is_retried_and_then_fails_retryably():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    notices: list[RetryNotice] = []
    with trio.fail_after(10):
        async with fast_client(max_attempts=2) as client:
            with pytest.raises(ModelError) as caught:
                await client.stream_chat(
                    base_url=f"http://127.0.0.1:{port}/v1/",
                    model="test-model",
                    messages=MESSAGES,
                    on_retry=notices.append,
                )
    assert str(caught.value).startswith(
        f"the model server at http://127.0.0.1:{port}/v1 did not answer (ConnectError: "
    )
    assert str(caught.value).endswith("(gave up after 2 attempts)")
    assert (caught.value.retryable, [n.attempt for n in notices]) == (True, [1])


async def test_cancelling_mid_answer_closes_the_connection_and_the_client_stays_usable():
    deltas: list[str] = []
    with trio.fail_after(10), ScriptedModel([hold("Hel"), text("again")]) as model:
        async with fast_client() as client:
            with trio.CancelScope() as scope:

                def on_delta(piece: str) -> None:
                    deltas.append(piece)
                    scope.cancel()

                await ask(client, model, on_delta=on_delta)
            await model.wait_for_disconnects(1)
            reply = await ask(client, model)
    assert (scope.cancelled_caught, deltas) == (True, ["Hel"])
    assert (reply.content, len(model.requests), model.disconnects) == ("again", 2, 1)


async def test_cancelling_before_the_server_answers_closes_the_connection():
    with trio.fail_after(10), ScriptedModel([hold(), text("again")]) as model:
        async with fast_client() as client:
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(ask, client, model)
                    await model.wait_for_requests(1)
                    scope.cancel()
            await model.wait_for_disconnects(1)
            reply = await ask(client, model)
    assert (reply.content, len(model.requests)) == ("again", 2)


async def test_an_answer_that_stalls_mid_stream_raises_a_retryable_idle_timeout(mock_clock):
    mock_clock.rate = 1.0
    stalled = trio.Event()
    errors: list[ModelError] = []

    async def call(client: ChatClient, model: ScriptedModel) -> None:
        errors.append(await ask_and_fail(client, model, on_delta=lambda _: stalled.set()))

    with trio.fail_after(30), ScriptedModel([hold("Hel"), text("never")]) as model:
        async with fast_client(idle_timeout=5.0) as client, trio.open_nursery() as nursery:
            nursery.start_soon(call, client, model)
            await stalled.wait()
            mock_clock.jump(6.0)
        await model.wait_for_disconnects(1)
    [error] = errors
    assert str(error) == (
        f"the connection to the model server at {model.base_url} failed after the answer "
        "began (it sent nothing for 5 s in the middle of its answer); "
        "the whole call may be retried"
    )
    assert (error.retryable, len(model.requests)) == (True, 1)


async def test_a_request_never_answered_times_out_on_every_attempt(mock_clock):
    mock_clock.rate = 1.0
    errors: list[ModelError] = []

    async def call(client: ChatClient, model: ScriptedModel) -> None:
        errors.append(await ask_and_fail(client, model))

    with trio.fail_after(30), ScriptedModel([hold(), hold()]) as model:
        async with (
            fast_client(max_attempts=2, idle_timeout=5.0) as client,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(call, client, model)
            await model.wait_for_requests(1)
            mock_clock.jump(6.0)
            await model.wait_for_requests(2)
            mock_clock.jump(6.0)
    [error] = errors
    assert str(error) == (
        f"the model server at {model.base_url} did not answer (it sent nothing for 5 s "
        "before answering) (gave up after 2 attempts)"
    )
    assert (error.retryable, len(model.requests)) == (True, 2)


async def test_a_request_beyond_the_script_gets_a_500_saying_the_script_ran_out():
    with trio.fail_after(10), ScriptedModel([]) as model:
        async with fast_client(max_attempts=1) as client:
            error = await ask_and_fail(client, model)
    assert str(error) == (
        f"the model server at {model.base_url} failed (HTTP 500). The server said: the "
        "scripted model ran out of replies: this is request 1 and the script has 0 "
        "(gave up after 1 attempt)"
    )
    assert len(model.requests) == 1


async def test_the_scripted_model_stops_promptly_while_a_request_is_held():
    with trio.fail_after(10), ScriptedModel([hold()]) as model:
        async with fast_client(max_attempts=1) as client, trio.open_nursery() as nursery:
            nursery.start_soon(ask_and_fail, client, model)
            await model.wait_for_requests(1)
            await trio.to_thread.run_sync(model.stop)
    assert (len(model.requests), model.disconnects) == (1, 0)


async def test_a_script_item_may_be_a_function_of_the_request():
    with trio.fail_after(10), ScriptedModel([lambda request: text(request["model"])]) as model:
        async with fast_client() as client:
            reply = await ask(client, model)
    assert reply.content == "test-model"


def test_the_scripted_model_can_be_waited_on_from_plain_threads():
    body = {"model": "m", "messages": []}
    with ScriptedModel([text("hi")]) as model:
        url = f"{model.base_url}/chat/completions"
        thread = threading.Thread(target=httpx.post, args=(url,), kwargs={"json": body})
        thread.start()
        assert model.wait_for_requests_sync(1, timeout=10) == [body]
        thread.join(10)
        with pytest.raises(TimeoutError, match=r"^the scripted model did not see 2 requests "):
            model.wait_for_requests_sync(2, timeout=0.01)


async def test_a_closed_client_refuses_new_calls():
    with trio.fail_after(10), ScriptedModel([]) as model:
        client = fast_client()
        await client.aclose()
        await client.aclose()
        error = await ask_and_fail(client, model)
    assert (str(error), error.retryable) == ("this ChatClient is closed: create a new one", False)
    assert model.requests == []


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "120"}, 120.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "120", "retry-after-ms": "250"}, 0.25),
        ({}, None),
    ],
)
def test_retry_after_is_read_as_seconds_milliseconds_or_a_date(headers, seconds):
    assert retry_after(httpx.Headers(headers)) == seconds


def test_backoff_doubles_from_the_initial_delay_up_to_the_cap_with_jitter():
    class LowestJitter(random.Random):
        def random(self) -> float:
            return 0.0

    client = ChatClient(backoff_initial=1.0, backoff_max=8.0, rng=LowestJitter())
    assert [client._delay(attempt, None) for attempt in range(1, 7)] == [0.5, 1, 2, 4, 4, 4]
    assert client._delay(1, 90.0) == 60.0
