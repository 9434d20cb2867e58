"""`callboard serve --outage-retry-for / --outage-retry-limit`: the operator's bound on
how long a turn waits, parked, for a model server that is down."""

from __future__ import annotations

import sys

import pytest
import trio
from client_helpers import CALLBOARD, REPO, subprocess_env
from credentials import TEST_TOKEN
from reading_helpers import serving_with
from scripted_model import ScriptedModel, status
from serve_helpers import serve_env, serving

from callboard import RunSpec
from callboard.client import connect
from callboard.mailbox import format_at


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


async def test_task_show_says_a_parked_task_waits_for_its_model_and_when_it_asks_again(tmp_path):
    settings = {"model_call_attempts": 1, "outage_backoff_initial": 3600}
    down = status(503, {"error": {"message": "upstream is restarting"}})
    with ScriptedModel([down, down]) as model, trio.fail_after(60):
        async with serving_with(tmp_path / "data", **settings) as server:
            async with connect(server.url, token=TEST_TOKEN) as client:
                spec = RunSpec("write the note", base_url=model.base_url, model="m",
                               approve="always", workspace=str(tmp_path))  # fmt: skip
                handle = await client.tasks.spawn(spec, name="t1")
                async with client.subscribe(handle, after=0) as events:
                    async for event in events:
                        if event.type == "turn.waiting_for_model":
                            break
            done = await trio.run_process(
                [*CALLBOARD, "task", "show", "t1", "--url", server.url], cwd=REPO,
                env=subprocess_env(), capture_stdout=True, capture_stderr=True, check=False,
            )  # fmt: skip
    retry_at = format_at(event.data["retry_at"])
    assert (done.returncode, done.stderr) == (0, b"")
    assert done.stdout.decode().splitlines() == [
        "> write the note",
        f"[the model cannot be reached: the model server at {model.base_url} failed "
        f"(HTTP 503). The server said: upstream is restarting (gave up after 1 attempt); "
        f"the turn waits and asks again at {retry_at} (1 failed so far)]",
        "=== task/t1 is running; task show task/t1 --follow follows it ===",
    ]
