"""``callboard task run``'s flags for a task's provider, budget, approval deadline and
context window: each reaches the spec, word for word as the spec field says, and
a value the spec refuses is a usage error naming the field (exit 2, before
connecting). Real subprocesses against the real gateway on the scripted model.
"""

from __future__ import annotations

import subprocess

import pytest
import trio
from client_helpers import CALLBOARD, REPO, serving, subprocess_env
from scripted_model import ScriptedModel, text, tool_call

from callboard.client import connect

NOWHERE = "ws://127.0.0.1:9/v1"  # never reached: the usage errors come first
NOTE = tool_call("write_file", {"path": "note.txt", "content": "hi"})


async def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        [*CALLBOARD, *args], cwd=REPO, env=subprocess_env(),
        capture_stdout=True, capture_stderr=True, check=False,
    )  # fmt: skip


async def test_task_run_max_model_calls_fails_the_task_with_the_budget_error(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with ScriptedModel([NOTE, text("never asked")]) as model, trio.fail_after(60):
        async with serving(tmp_path / "data") as server:
            done = await cli(
                "task", "run", "write the note", "--url", server.url, "--model-url",
                model.base_url, "--model", "m", "--workspace", str(workspace),
                "--approve", "always", "--max-model-calls", "1", "--max-tokens", "1000",
            )  # fmt: skip
            async with connect(server.url) as client:
                (info,) = await client.list("task")
                view = await client.inspect(info.actor)
    assert done.returncode == 1
    assert done.stdout.decode().splitlines() == [
        "> write the note",
        '[tool] write_file({"path": "note.txt", "content": "hi"})',
        "[tool] write_file ok: created 'note.txt': 2 bytes",
        "[budget] budget exceeded: max_model_calls is 1 and 1 was used",
    ]
    assert done.stderr.decode().splitlines()[-1] == (
        f"callboard: {info.actor} failed: budget exceeded: max_model_calls is 1 and 1 was used"
    )
    assert view.spec is not None
    assert (view.spec["max_model_calls"], view.spec["max_tokens"]) == (1, 1000)
    assert (view.spec["on_budget"], view.spec["max_cost"]) == ("fail", None)
    assert len(model.requests) == 1


async def test_task_run_provider_approval_timeout_and_context_window_reach_the_spec(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with ScriptedModel([text("done")], wire="anthropic") as model, trio.fail_after(60):
        async with serving(tmp_path / "data") as server:
            done = await cli(
                "task", "run", "say done", "--url", server.url, "--model-url", model.base_url,
                "--model", "m", "--workspace", str(workspace), "--provider", "anthropic",
                "--approval-timeout", "30", "--approval-default", "approve",
                "--context-window", "50000", "--on-budget", "ask",
            )  # fmt: skip
            async with connect(server.url) as client:
                (info,) = await client.list("task")
                view = await client.inspect(info.actor)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines()[-2:] == ["=== succeeded ===", "done"]
    assert view.spec is not None
    assert {k: view.spec[k] for k in ("provider", "approval_timeout", "approval_default",
                                      "context_window", "on_budget")} == {
        "provider": "anthropic", "approval_timeout": 30.0, "approval_default": "approve",
        "context_window": 50000, "on_budget": "ask",
    }  # fmt: skip
    assert model.wire == "anthropic" and len(model.requests) == 1


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--max-tokens", "0"], "callboard: 'max_tokens' must be a whole number above 0, got 0"),
        (["--max-cost", "-1"], "callboard: 'max_cost' must be a number above 0, got -1.0"),
        (
            ["--context-window", "0"],
            "callboard: 'context_window' must be a positive number of tokens, got 0",
        ),
        (
            ["--provider", "gemini"],
            "callboard task run: error: argument --provider: invalid choice: 'gemini' "
            "(choose from 'openai', 'anthropic')",
        ),
        (
            ["--max-tool-calls", "many"],
            "callboard task run: error: argument --max-tool-calls: invalid int value: 'many'",
        ),
    ],
    ids=["tokens", "cost", "window", "provider", "not-a-number"],
)
async def test_task_run_refuses_a_bad_budget_or_provider_flag_before_connecting(flags, said):
    with trio.fail_after(30):
        done = await cli("task", "run", "hi", "--url", NOWHERE, *flags)
    assert done.returncode == 2
    assert done.stderr.decode().splitlines()[-1] == said
