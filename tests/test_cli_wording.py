"""What the ``callboard`` command says when something is wrong, word for word, and
its exit code: a bad argument is named as the command line names it (exit 2,
before connecting), a spec the server refuses says what to change (exit 1), a
failed tool call reads "error" once, and a port in use is named with its option.

Every command is a real subprocess; the servers are the real gateway (in this
process) or a real ``callboard serve``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import trio
from client_helpers import CALLBOARD, REPO, serving, subprocess_env
from scripted_model import ScriptedModel, text, tool_call
from serve_helpers import serve_env

NOWHERE = "ws://127.0.0.1:9/v1"  # never reached: the usage errors come first


async def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        [*CALLBOARD, *args], cwd=REPO, env=subprocess_env(),
        capture_stdout=True, capture_stderr=True, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("args", "last_line"),
    [
        (["send", "notanaddr", "prompt"],
         "callboard send: error: argument ADDRESS: address 'notanaddr' has no '/': write it "
         "as KIND/NAME, e.g. 'session/s1'"),
        (["inspect", "session/"],
         "callboard inspect: error: argument ADDRESS: address 'session/' has name '', which "
         "does not match [A-Za-z0-9][A-Za-z0-9._-]{0,127}"),
        (["stop", "Session/s1"],
         "callboard stop: error: argument ADDRESS: address 'Session/s1' has kind 'Session', "
         "which does not match [a-z][a-z0-9_-]{0,31}"),
        (["tail", "x"],
         "callboard tail: error: argument ADDRESS: address 'x' has no '/': write it as "
         "KIND/NAME, e.g. 'session/s1'"),
        (["tail", "Bad/*"],
         "callboard tail: error: argument ADDRESS: pattern 'Bad/*' has kind 'Bad', which "
         "does not match [a-z][a-z0-9_-]{0,31}"),
        (["jobs", "s1"],
         "callboard jobs: error: argument OWNER: address 's1' has no '/': write it as "
         "KIND/NAME, e.g. 'session/s1'"),
    ],
    ids=["send", "inspect", "stop", "tail", "tail-pattern", "jobs"],
)  # fmt: skip
async def test_a_bad_address_argument_is_bad_usage_naming_the_commands_own_argument(
    args, last_line
):
    with trio.fail_after(20):
        done = await cli(*args, "--url", NOWHERE)
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr.decode().splitlines()[-1] == last_line


async def test_spawn_with_a_misspelt_spec_key_exits_1_naming_it_and_the_valid_keys(
    tmp_path, workspace
):
    spec = json.dumps({"workspace": str(workspace), "aprovals": "never"})
    with trio.fail_after(20):
        async with serving(tmp_path / "data") as server:
            done = await cli("spawn", "session", spec, "--name", "s1", "--url", server.url)
            listed = await cli("ls", "--url", server.url)
    assert (done.returncode, done.stdout) == (1, b"")
    assert done.stderr.decode() == (
        "callboard: the spec for 'session/s1' has an unknown key 'aprovals' (did you mean "
        "'approvals'?); a SessionSpec takes workspace, model, base_url, system_prompt, "
        "approvals, on_restart, background_on_timeout, executor, api_key_env, provider, "
        "approval_timeout, approval_default, context_window, keep_turns, max_tokens, max_cost, "
        "max_model_calls, max_tool_calls, prices, turn_deadline, on_budget, outage_retry_limit, "
        "outage_retry_for\n"
    )
    assert listed.stdout == b"no actors\n"


async def test_spawn_with_a_workspace_that_does_not_exist_exits_1_saying_so(tmp_path):
    missing = tmp_path / "missing"
    with trio.fail_after(20):
        async with serving(tmp_path / "data") as server:
            done = await cli(
                "spawn", "session", json.dumps({"workspace": str(missing)}), "--url", server.url
            )
    assert (done.returncode, done.stdout) == (1, b"")
    assert done.stderr.decode() == (
        f"callboard: the workspace {str(missing)!r} does not exist; create the directory "
        "first or name one that exists\n"
    )


async def test_task_run_shows_a_failed_tool_call_with_the_word_error_once(tmp_path, workspace):
    read = tool_call("read_file", {"path": "nope.txt"})
    with ScriptedModel([read, text("there is no such file")]) as model, trio.fail_after(30):
        async with serving(tmp_path / "data") as server:
            done = await cli(
                "task", "run", "read nope.txt", "--url", server.url, "--model-url",
                model.base_url, "--model", "m", "--workspace", str(workspace),
                "--approve", "always",
            )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines() == [
        "> read nope.txt",
        '[tool] read_file({"path": "nope.txt"})',
        "[tool] read_file error: could not read 'nope.txt': it does not exist; use list_dir "
        "to see what is there",
        "there is no such file",
        "=== succeeded ===",
        "there is no such file",
    ]


@pytest.mark.parametrize("option", ["--port", "--metrics-port"])
async def test_serve_on_a_port_in_use_exits_1_naming_the_option_and_the_port(tmp_path, option):
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    ports = ["--port", str(port)] if option == "--port" else ["--port", "0", option, str(port)]
    command = [sys.executable, "-m", "callboard", "serve", "--data", str(tmp_path / "data"),
               "--sandbox", "none", *ports]  # fmt: skip
    try:
        with trio.fail_after(30):
            done = await trio.run_process(
                command, cwd=tmp_path, env=serve_env(), capture_stdout=True,
                capture_stderr=True, check=False,
            )  # fmt: skip
    finally:
        await listener.aclose()
    assert (done.returncode, done.stdout) == (1, b"")
    assert done.stderr.decode().splitlines()[-1] == (
        f"callboard serve: {option} {port}: 127.0.0.1:{port} is already in use (another "
        f"callboard serve?); stop what holds it, or pick another port ({option} 0 picks a "
        "free one)"
    )


async def test_the_repl_names_its_own_argument_for_a_bad_address_too(tmp_path):
    script = b"send notanaddr prompt\ntail Bad/*\nls\n"
    with trio.fail_after(30):
        async with serving(tmp_path / "data") as server:
            done = await trio.run_process(
                [*CALLBOARD, "repl", "--url", server.url], cwd=REPO,
                env=subprocess_env(CALLBOARD_HISTORY=os.devnull), stdin=script,
                capture_stdout=True, capture_stderr=True, check=False,
            )  # fmt: skip
    assert (done.returncode, done.stdout) == (1, b"no actors\n")
    assert done.stderr.decode().splitlines() == [
        "error: send: argument ADDRESS: address 'notanaddr' has no '/': write it as KIND/NAME, "
        "e.g. 'session/s1'",
        "error: tail: argument ADDRESS: pattern 'Bad/*' has kind 'Bad', which does not match "
        "[a-z][a-z0-9_-]{0,31}",
    ]
