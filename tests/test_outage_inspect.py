"""`inspect` of a session whose turn is parked through a model outage: the summary
says how many asks failed, since when, the last error and when it asks again,
and `callboard inspect` prints it as one row."""

from __future__ import annotations

import trio
from client_helpers import CALLBOARD, REPO, subprocess_env
from reading_helpers import job_event, serving_with
from scripted_model import ScriptedModel, hold, status

from callboard.client import connect
from callboard.mailbox import format_at

PARKED = {"model_call_attempts": 1, "outage_backoff_initial": 3600, "outage_backoff_max": 3600}
"""A parked turn stays parked for the whole test (its timer is an hour away)."""

DOWN = status(503, {"error": {"message": "upstream is restarting", "type": "server_error"}})


async def test_inspect_of_a_parked_turn_shows_its_outage_and_the_next_ask(tmp_path):
    with ScriptedModel([DOWN] * 4) as model, trio.fail_after(60):
        spec = {"workspace": str(tmp_path), "base_url": model.base_url, "model": "test-model"}
        async with serving_with(tmp_path / "data", **PARKED) as server:
            async with connect(server.url) as client:
                await client.spawn("session", spec, name="s1")
                async with client.subscribe("session/s1", after=0) as events:
                    await client.send("session/s1", "prompt", {"text": "hello"})
                    parked = (await job_event(events, "turn.waiting_for_model")).data
                view = await client.inspect("session/s1")
            shown = await trio.run_process(
                [*CALLBOARD, "inspect", "session/s1", "--url", server.url], cwd=REPO,
                env=subprocess_env(), capture_stdout=True, capture_stderr=True, check=False,
            )  # fmt: skip
    assert view.summary is not None
    outage = view.summary["running"]["outage"]
    assert outage == {
        "attempt": 1,
        "since": outage["since"],
        "retry_at": outage["retry_at"],
        "error": parked["error"],
        "status": 503,
    }
    assert (round(outage["since"], 3), round(outage["retry_at"], 3)) == (
        parked["since"],
        parked["retry_at"],
    )
    assert "upstream is restarting" in parked["error"]
    lines = shown.stdout.decode().splitlines()
    assert shown.returncode == 0, shown.stderr
    running = lines.index("running       turn-1 (model): hello")
    assert lines[running + 1] == (
        f"outage        1 ask failed, asks again at {format_at(outage['retry_at'])}: the model "
        f"server at {model.base_url} failed (HTTP 503). The server said: upstream is "
        "restarting (gave up after 1 attempt)"
    )


async def test_a_turn_asking_the_model_shows_no_outage(tmp_path):
    with ScriptedModel([hold()]) as model, trio.fail_after(60):
        spec = {"workspace": str(tmp_path), "base_url": model.base_url, "model": "test-model"}
        async with serving_with(tmp_path / "data", **PARKED) as server:
            async with connect(server.url) as client:
                await client.spawn("session", spec, name="s1")
                await client.send("session/s1", "prompt", {"text": "hello"})
                await model.wait_for_requests(1)
                view = await client.inspect("session/s1")
    assert view.summary is not None
    assert view.summary["running"] == {
        "turn_id": "turn-1", "prompt": "hello", "phase": "model", "outage": None,
    }  # fmt: skip
