"""Sessions whose model fails: errors end the turn, never the session.

A refused request (401), a malformed stream and a missing model configuration
fail the turn with a sentence saying why; a rate limit and a stream cut after
it began are asked again; a spec that cannot work is refused at spawn.
"""

from __future__ import annotations

import json

import pytest
import trio
from scripted_model import ScriptedModel, raw, status, text
from session_helpers import (
    ADDRESS,
    KINDS,
    NAME,
    Watch,
    occurrences,
    spec,
)
from shell_helpers import marked_processes, no_leaked_job_processes  # noqa: F401

import callboard


async def test_a_401_fails_the_turn_with_a_clear_error_and_the_session_keeps_working(
    data, workspace
):
    script = [status(401, {"error": {"message": "bad key"}}), text("fine now")]
    with ScriptedModel(script) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "first")
                failed = await watch.until("turn.failed")
                await rt.send(ADDRESS, "prompt", "second")
                done = await watch.until("turn.completed")
            view = await rt.inspect(ADDRESS)
    assert "HTTP 401" in failed.data["error"] and "API key" in failed.data["error"]
    assert (failed.data["status"], failed.data["retryable"]) == (401, False)
    assert done.data["answer"] == "fine now"
    assert len(model.requests) == 2
    assert (view.status, view.restarts) == ("active", 0)


async def test_a_session_without_a_model_fails_its_turn_saying_how_to_configure_one(
    data, workspace, monkeypatch
):
    monkeypatch.delenv("CALLBOARD_MODEL_URL", raising=False)
    monkeypatch.delenv("CALLBOARD_MODEL", raising=False)
    with trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", {"workspace": str(workspace)}, name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                await rt.send(ADDRESS, "prompt", "hello")
                failed = await Watch(sub).until("turn.failed")
    assert "callboard serve --model-url URL --model NAME" in failed.data["error"]


async def test_a_429_with_retry_after_is_retried_and_the_turn_completes(data, workspace):
    script = [status(429, headers={"Retry-After": "0"}), text("after the wait")]
    with ScriptedModel(script) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "hello")
                done = await watch.until("turn.completed")
    assert done.data["answer"] == "after the wait"
    assert "turn.failed" not in watch.types()
    assert len(model.requests) == 2


async def test_a_malformed_stream_fails_the_turn_without_crashing_the_session(data, workspace):
    script = [raw(b"data: {not json\n\n"), text("fine")]
    with ScriptedModel(script) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "first")
                failed = await watch.until("turn.failed")
                await rt.send(ADDRESS, "prompt", "second")
                await watch.until("turn.completed")
            view = await rt.inspect(ADDRESS)
    assert "not JSON" in failed.data["error"]
    assert view.restarts == 0
    assert len(model.requests) == 2


async def test_a_stream_cut_after_the_answer_began_is_asked_once_more(data, workspace):
    chunk = {"choices": [{"index": 0, "delta": {"content": "par"}, "finish_reason": None}]}
    cut = raw(f"data: {json.dumps(chunk)}\n\n".encode(), cut=True)
    with ScriptedModel([cut, text("whole answer")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "hello")
                done = await watch.until("turn.completed")
    (retrying,) = [e for e in watch.seen if e.type == "turn.retrying"]
    assert retrying.seq is None and retrying.data["attempt"] == 1
    assert done.data["answer"] == "whole answer"
    assert len(model.requests) == 2
    assert occurrences(model.requests[1], "hello") == 1


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"workspace": "relative/path"}, "'workspace' must be an absolute path"),
        ({"approvals": {"shel_run": "never"}}, "'shel_run', which does not exist"),
        ({"approvals": "sometimes"}, "'sometimes' is not"),
        ({"on_restart": "forget"}, "on_restart"),
    ],
)
async def test_a_spec_that_cannot_work_is_refused_at_spawn_naming_the_field(
    data, workspace, overrides, named
):
    with trio.fail_after(10):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            with pytest.raises(callboard.BadRequest, match=named):
                await rt.spawn("session", {"workspace": str(workspace), **overrides})


async def test_a_refusal_is_the_turns_answer_and_is_marked_as_one(data, workspace):
    # OpenAI streams a refusal in ``delta.refusal`` instead of content; it
    # must not end the turn as an empty answer.
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "refusal": "I can't "}}]},
        {"choices": [{"index": 0, "delta": {"refusal": "help with that."}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    with ScriptedModel([raw(body.encode())]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "do the bad thing")
                done = await watch.until("turn.completed")
    [message] = watch.of("assistant.message")
    assert done.data["answer"] == "I can't help with that."
    assert message["refusal"] == "I can't help with that."
    assert message["content"] == "I can't help with that."
    assert len(model.requests) == 1
