"""``inspect`` shows the spec with its secrets masked and, for a session, its conversation.

The masking is pure (`callboard.views.mask_secrets`); the rest goes through
a real session on the scripted model, behind the real gateway.
"""

from __future__ import annotations

import trio
from reading_helpers import serving_with
from scripted_model import ScriptedModel, text

from callboard.client import connect
from callboard.views import mask_secrets


def test_secret_values_are_masked_and_names_of_variables_are_kept():
    spec = {
        "base_url": "https://me:hunter2@models.example/v1?api_key=k-123&region=eu",
        "api_key_env": "MY_KEY",
        "token": "t-456",
        "nested": [{"Password": "p", "user": "me"}, "http://plain.example/v1"],
        "secret": "",
        "count": 3,
    }
    assert mask_secrets(spec) == {
        "base_url": "https://me:***@models.example/v1?api_key=%2A%2A%2A&region=eu",
        "api_key_env": "MY_KEY",
        "token": "***",
        "nested": [{"Password": "***", "user": "me"}, "http://plain.example/v1"],
        "secret": "",
        "count": 3,
    }


def test_a_budgets_count_of_tokens_is_shown_and_a_token_that_is_a_string_is_masked():
    spec = {"max_tokens": 200000, "usage": {"prompt_tokens": 7}, "auth_tokens": "abc"}
    assert mask_secrets(spec) == {
        "max_tokens": 200000, "usage": {"prompt_tokens": 7}, "auth_tokens": "***",
    }  # fmt: skip


async def test_inspect_of_a_session_shows_its_masked_spec_and_its_last_turn(tmp_path):
    with ScriptedModel([text("Hello there")]) as model, trio.fail_after(60):
        url = model.base_url.replace("http://", "http://me:hunter2@")
        spec = {"workspace": str(tmp_path), "base_url": url, "model": "test-model"}
        async with serving_with(tmp_path / "data") as server, connect(server.url) as client:
            await client.spawn("session", spec, name="s1")
            async with client.subscribe("session/s1", after=0) as events:
                await client.send("session/s1", "prompt", {"text": "hi"})
                async for event in events:
                    if event.type == "turn.completed":
                        break
            view = await client.inspect("session/s1")
            await client.spawn("box", name="b1")
            box = await client.inspect("box/b1")
    assert view.spec["base_url"] == model.base_url.replace("http://", "http://me:***@")
    assert (view.spec["workspace"], view.spec["model"]) == (str(tmp_path), "test-model")
    assert view.summary == {
        "conversation": 2,
        "last_turn": {"at": 0, "prompt": "hi", "answer": "Hello there", "tool_calls": 0},
        "running": None,
        "budget": {
            "usage": {
                "input_tokens": 7, "output_tokens": 5, "model_calls": 1, "tool_calls": 0,
                "cost": 0.0,
            },
            "limits": {
                "max_tokens": None, "max_cost": None, "max_model_calls": None,
                "max_tool_calls": None, "turn_deadline": None,
            },
            "breach": None,
        },
    }  # fmt: skip
    assert (box.spec, box.summary) == (None, None), "a kind without a spec or summary adds none"
