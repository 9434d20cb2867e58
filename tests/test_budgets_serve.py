"""Budgets from outside: ``callboard serve --prices FILE`` (the operator's prices let
a spec set ``max_cost`` for the served model; a file that does not fit stops
serve naming it), and what ``callboard inspect`` and ``approvals`` show of a
turn a budget holds."""

from __future__ import annotations

import json
import sys

import pytest
import trio
from client_helpers import REPO, subprocess_env
from reading_helpers import job_event, serving_with
from scripted_model import ScriptedModel, text
from serve_helpers import serve_env, serving

import callboard
from callboard.client import connect

CALLBOARD = [sys.executable, "-m", "callboard"]


async def test_a_spec_may_set_max_cost_for_the_model_the_operator_priced(tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"served-model": {"input": 1e-6, "output": 4e-6}}))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    spec = {"workspace": str(workspace), "max_cost": 0.5}
    with trio.fail_after(40):
        async with serving(
            tmp_path / "data", "--prices", str(prices), "--model", "served-model", cwd=tmp_path
        ) as served:
            async with connect(served.url, token=served.token) as client:
                address = await client.spawn("session", spec, name="priced")
                with pytest.raises(callboard.SpecRefused) as refused:
                    await client.spawn("session", {**spec, "model": "unpriced"}, name="other")
    assert address == "session/priced"
    assert "'max_cost' needs a price for the model 'unpriced'" in str(refused.value)


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ("{", "--prices {path}: not JSON ("),
        ('{"m": {"input": 1}}', "--prices {path}: the table must give 'm' exactly 'input' and"),
        ('{"m": {"input": -1, "output": 0}}', "--prices {path}: the table must give 'm' a price"),
    ],
)
async def test_a_prices_file_that_does_not_fit_stops_serve_naming_it(tmp_path, table, said):
    prices = tmp_path / "prices.json"
    prices.write_text(table)
    with trio.fail_after(20):
        done = await trio.run_process(
            [*CALLBOARD, "serve", "--data", str(tmp_path / "data"), "--port", "0",
             "--prices", str(prices)],
            cwd=tmp_path, env=serve_env(), capture_stdout=True, capture_stderr=True, check=False,
        )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.decode().startswith("callboard serve: " + said.format(path=prices))
    assert not (tmp_path / "data").exists()


async def test_inspect_approvals_and_approve_see_a_turn_held_by_an_ask_breach(tmp_path):
    with ScriptedModel([text("one"), text("two")]) as model, trio.fail_after(60):
        spec = {
            "workspace": str(tmp_path), "base_url": model.base_url, "model": "test-model",
            "max_model_calls": 1, "on_budget": "ask",
        }  # fmt: skip
        async with serving_with(tmp_path / "data") as server:
            async with connect(server.url) as client:
                await client.spawn("session", spec, name="s1")
                async with client.subscribe("session/s1", after=0) as events:
                    await client.send("session/s1", "prompt", {"text": "first"})
                    await job_event(events, "turn.completed")
                    await client.send("session/s1", "prompt", {"text": "second"})
                    await job_event(events, "budget.exceeded")
            shown = await trio.run_process(
                [*CALLBOARD, "inspect", "session/s1", "--url", server.url], cwd=REPO,
                env=subprocess_env(), capture_stdout=True, capture_stderr=True, check=False,
            )  # fmt: skip
            listed = await trio.run_process(
                [*CALLBOARD, "approvals", "session/s1", "--json", "--url", server.url], cwd=REPO,
                env=subprocess_env(), capture_stdout=True, capture_stderr=True, check=False,
            )  # fmt: skip
            approved = await trio.run_process(
                [*CALLBOARD, "approve", "session/s1", "--url", server.url], cwd=REPO,
                env=subprocess_env(), capture_stdout=True, capture_stderr=True, check=False,
            )  # fmt: skip
            async with connect(server.url) as client:
                async with client.subscribe("session/s1", after=0) as events:
                    answers = []
                    async for event in events:
                        if event.type == "turn.completed":
                            answers.append(event.data["answer"])
                            if len(answers) == 2:
                                break
    lines = shown.stdout.decode().splitlines()
    assert (shown.returncode, listed.returncode) == (0, 0)
    assert lines[lines.index("spec") - 3 : lines.index("spec")] == [
        "usage         7 in, 5 out, 1 model calls, 0 tool calls, cost 0",
        "limits        max_model_calls 1",
        "breach        max_model_calls reached in turn-2 (ask): approve the call budget or "
        "send raise_budget to go on",
    ]
    assert (approved.returncode, approved.stdout) == (0, b"approved budget of session/s1\n")
    assert answers == ["one", "two"], "the approval granted one more model call"
    waiting = json.loads(listed.stdout)["approvals"]
    assert [(a["call_id"], a["tool"], a["arguments"]) for a in waiting] == [
        ("budget", "raise_budget", {"limit": "max_model_calls", "used": 1, "allowed": 1})
    ]


async def test_resume_of_a_session_its_budget_holds_says_resume_does_not_lift_it(tmp_path):
    with ScriptedModel([text("one"), text("two")]) as model, trio.fail_after(60):
        spec = {
            "workspace": str(tmp_path), "base_url": model.base_url, "model": "test-model",
            "max_model_calls": 1,
        }  # fmt: skip
        async with serving_with(tmp_path / "data") as server:
            url = ("--url", server.url)
            async with connect(server.url) as client:
                await client.spawn("session", spec, name="s1")
                async with client.subscribe("session/s1", after=0) as events:
                    await client.send("session/s1", "prompt", {"text": "first"})
                    await job_event(events, "turn.completed")
                    await client.send("session/s1", "prompt", {"text": "second"})
                    await job_event(events, "budget.exceeded")
            resumed = await trio.run_process(
                [*CALLBOARD, "resume", "session/s1", *url], cwd=REPO, env=subprocess_env(),
                capture_stdout=True, capture_stderr=True, check=False,
            )  # fmt: skip
            shown = await trio.run_process(
                [*CALLBOARD, "inspect", "session/s1", *url], cwd=REPO, env=subprocess_env(),
                capture_stdout=True, capture_stderr=True, check=False,
            )  # fmt: skip
            async with connect(server.url) as client:
                # The raise the note names lets the turn finish.
                async with client.subscribe("session/s1", after=0) as events:
                    await client.send("session/s1", "raise_budget", {"max_model_calls": 2})
                    answers = []
                    async for event in events:
                        if event.type == "turn.completed":
                            answers.append(event.data["answer"])
                            if len(answers) == 2:
                                break
            after = await trio.run_process(
                [*CALLBOARD, "resume", "session/s1", *url], cwd=REPO, env=subprocess_env(),
                capture_stdout=True, capture_stderr=True, check=False,
            )  # fmt: skip
    assert (resumed.returncode, resumed.stdout.decode().splitlines()) == (0, [
        "session/s1 active",
        "its turn is still held by its budget (max_model_calls reached); to go on: "
        "callboard send session/s1 raise_budget '{\"max_model_calls\": NEW}'",
    ])  # fmt: skip
    assert (
        "breach        max_model_calls reached in turn-2 (pause): send raise_budget (resume "
        "does not lift it) to go on"
    ) in shown.stdout.decode().splitlines()
    assert answers == ["one", "two"]
    assert (after.returncode, after.stdout) == (0, b"session/s1 active\n")
