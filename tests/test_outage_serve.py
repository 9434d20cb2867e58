"""`callboard serve --outage-retry-for / --outage-retry-limit`: the operator's bound on
how long a turn waits, parked, for a model server that is down."""

from __future__ import annotations

import sys

import pytest
import trio
from scripted_model import ScriptedModel, status
from serve_helpers import serve_env, serving

from callboard.client import connect


async def test_serves_outage_retry_for_bounds_how_long_a_sessions_turn_waits(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    # Retry-After 0: the client's own retries do not wait either.
    down = status(503, {"error": {"message": "restarting"}}, headers={"Retry-After": "0"})
    with ScriptedModel([down] * 1000) as model, trio.fail_after(60):
        extra = ["--model-url", model.base_url, "--model", "m", "--sandbox", "none",
                 "--outage-retry-for", "0.3"]  # fmt: skip
        async with serving(tmp_path / "data", *extra, cwd=tmp_path) as served:
            async with connect(served.url, token=served.token) as client:
                await client.spawn("session", {"workspace": str(workspace)}, name="s1")
                async with client.subscribe("session/s1", after=0) as events:
                    await client.send("session/s1", "prompt", {"text": "hello"})
                    types = []
                    async for event in events:
                        types.append(event.type)
                        if event.type == "turn.failed":
                            failed = event
                            break
    assert "turn.waiting_for_model" in types
    assert "(outage_retry_for 0.3 s; raise it to wait longer)" in failed.data["error"]


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--outage-retry-limit", "-1", "must be a whole number >= 0, got '-1'"),
        ("--outage-retry-limit", "two", "must be a whole number >= 0, got 'two'"),
        ("--outage-retry-for", "inf", "must be a number of seconds >= 0, got 'inf'"),
    ],
)
async def test_serve_refuses_an_outage_bound_that_cannot_work_naming_the_option(
    tmp_path, option, value, said
):
    command = [sys.executable, "-m", "callboard", "serve", "--port", "0",
               "--data", str(tmp_path / "data"), f"{option}={value}"]  # fmt: skip
    with trio.fail_after(20):
        done = await trio.run_process(
            command, capture_stdout=True, capture_stderr=True, check=False, env=serve_env()
        )
    assert done.returncode == 2
    assert f"argument {option}: {said}" in done.stderr.decode()
    assert not (tmp_path / "data").exists()
