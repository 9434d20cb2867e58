"""Sessions on the Anthropic provider, against a scripted Messages API endpoint on loopback.

Which wire a session speaks follows its model URL: the spec's ``provider``,
else the runtime's for the configured URL, else ``openai``. The server's key
for it (``$CALLBOARD_API_KEY``, else ``$ANTHROPIC_API_KEY``) goes to the
configured URL only, as ``x-api-key``, and never reaches a log line, an
event, the data directory or a shell command the model runs.
"""

from __future__ import annotations

import json
import logging

import pytest
import trio
from scripted_model import ScriptedModel, status, text, tool_call
from session_helpers import Watch

import callboard
from callboard.agent import Session, Task

KINDS = [Session, Task]
ANTHROPIC_KEY = "sk-ant-server-key-never-shown"
OPENAI_KEY = "sk-openai-key-never-shown"


@pytest.fixture(autouse=True)
def server_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CALLBOARD_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)


def _spec(workspace, **fields):
    return {"workspace": str(workspace), "approvals": "always", **fields}


async def _one_turn(data, settings, spec) -> list[callboard.Event]:
    """Spawn ``session/s1`` and run one prompt to its end; the events it emitted."""
    async with callboard.open_runtime(data, kinds=KINDS, settings=settings) as rt:
        await rt.spawn("session", spec, "s1")
        async with rt.subscribe("session/s1", after=0) as sub:
            await rt.send("session/s1", "prompt", {"text": "show the environment"})
            watch = Watch(sub)
            await watch.until("turn.completed")
    return watch.seen


async def test_the_configured_anthropic_model_gets_its_key_and_no_log_event_or_tool_sees_it(
    tmp_path, workspace, caplog
):
    caplog.set_level(logging.DEBUG)
    # An overloaded first answer, so that the client logs its retry too.
    script = [status(529), tool_call("shell_run", {"command": "env"}), text("done")]
    with ScriptedModel(script, wire="anthropic") as model:
        settings = {"model_url": model.base_url, "model": "claude-test", "provider": "anthropic"}
        with trio.fail_after(30):
            events = await _one_turn(tmp_path / "data", settings, _spec(workspace))
        headers = model.request_headers
    (finished,) = [e.data for e in events if e.type == "tool.finished"]
    assert finished["status"] == "ok" and "PATH=" in finished["result"]
    assert [h.get("x-api-key") for h in headers] == [ANTHROPIC_KEY] * 3
    assert all("authorization" not in h for h in headers)
    assert "is overloaded (HTTP 529)" in caplog.text
    shown = json.dumps([e.data for e in events]) + caplog.text
    assert [key for key in (ANTHROPIC_KEY, OPENAI_KEY) if key in shown] == []
    stored = b"".join(p.read_bytes() for p in (tmp_path / "data").rglob("*") if p.is_file())
    assert ANTHROPIC_KEY.encode() not in stored


async def test_a_spec_naming_the_configured_url_speaks_the_runtimes_provider(tmp_path, workspace):
    with ScriptedModel([text("from claude")], wire="anthropic") as model:
        settings = {"model_url": model.base_url, "provider": "anthropic"}
        spec = _spec(workspace, base_url=model.base_url + "/", model="claude-test")
        with trio.fail_after(20):
            events = await _one_turn(tmp_path / "data", settings, spec)
    (done,) = [e.data for e in events if e.type == "turn.completed"]
    assert done["answer"] == "from claude"
    assert len(model.requests) == 1


async def test_a_spec_may_name_the_anthropic_provider_for_an_allowed_url_which_gets_no_key(
    tmp_path, workspace
):
    with (
        ScriptedModel([text("a")]) as configured,
        ScriptedModel([text("b")], wire="anthropic") as other,
    ):
        settings = {"model_url": configured.base_url, "allowed_model_urls": [other.base_url]}
        spec = _spec(workspace, base_url=other.base_url, model="claude-test", provider="anthropic")
        with trio.fail_after(20):
            events = await _one_turn(tmp_path / "data", settings, spec)
        (headers,) = other.request_headers
    (done,) = [e.data for e in events if e.type == "turn.completed"]
    assert done["answer"] == "b"
    assert "x-api-key" not in headers and "authorization" not in headers
    assert configured.requests == []


async def test_a_spec_naming_a_url_of_its_own_speaks_openai_unless_it_says_otherwise(
    tmp_path, workspace
):
    with ScriptedModel([], wire="anthropic") as configured, ScriptedModel([text("b")]) as other:
        settings = {
            "model_url": configured.base_url,
            "provider": "anthropic",
            "allowed_model_urls": [other.base_url],
        }
        spec = _spec(workspace, base_url=other.base_url, model="m")
        with trio.fail_after(20):
            events = await _one_turn(tmp_path / "data", settings, spec)
    (done,) = [e.data for e in events if e.type == "turn.completed"]
    assert done["answer"] == "b"
    assert (len(other.requests), configured.requests) == (1, [])


async def test_the_usage_of_an_anthropic_answer_reaches_the_assistant_message_in_openai_terms(
    tmp_path, workspace
):
    with ScriptedModel([text("hi")], wire="anthropic") as model:
        spec = _spec(workspace, base_url=model.base_url, model="claude-test", provider="anthropic")
        with trio.fail_after(20):
            events = await _one_turn(tmp_path / "data", {}, spec)
    (message,) = [e.data for e in events if e.type == "assistant.message"]
    assert (message["finish_reason"], message["usage"]) == (
        "stop",
        {
            "prompt_tokens": 7,
            "completion_tokens": 5,
            "total_tokens": 12,
            "prompt_tokens_details": {"cached_tokens": 0, "cache_creation_tokens": 0},
        },
    )


async def test_a_provider_the_client_does_not_speak_is_refused_at_spawn(tmp_path, workspace):
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path / "data", kinds=KINDS) as rt:
            with pytest.raises(callboard.BadRequest) as refused:
                await rt.spawn("session", _spec(workspace, provider="gemini"), "s1")
    assert "'provider' must be 'openai' or 'anthropic'" in str(refused.value)
    assert "'gemini'" in str(refused.value)
