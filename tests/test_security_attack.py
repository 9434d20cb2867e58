"""The attack the trust work closes, against a real `callboard serve`.

A process on the same host, with no credentials, connects to the gateway,
spawns a session with workspace ``/``, approvals ``always`` and a model URL
of its own, and has the model run ``cat /etc/shadow; env``. Before, it got a
root shell, the shadow file and the server's model key (in the shell's
environment, and as the Bearer token sent to its own URL). Now: no token, no
connection; a client token cannot name ``/`` or a foreign URL; and even the
operator's own session, sandboxed, reads neither the file nor any secret.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import trio
from gateway_wire import connect
from scripted_model import ScriptedModel, text, tool_call
from serve_helpers import serve_env, serving

API_KEY = "sk-callboard-api-key-never-shown"
OPENAI_KEY = "sk-openai-key-never-shown"
OPERATOR = "operator-token-never-shown"
ATTACK = "cat /etc/shadow; env"

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None and not os.environ.get("CI"),
    reason="bubblewrap is not installed here (CI installs it)",
)


def _shadow_lines() -> list[str]:
    """The lines of /etc/shadow (the test runs as root, like the server)."""
    lines = Path("/etc/shadow").read_text().splitlines()
    assert lines, "an empty /etc/shadow would prove nothing"
    return lines


async def _events_until(client, sub: str, type: str) -> list[dict]:
    seen: list[dict] = []
    while not seen or seen[-1].get("type") != type:
        seen.extend(await client.events(sub, 1))
    return seen


def _secrets_in(data: Path, secrets: list[str]) -> list[str]:
    found = []
    for path in data.rglob("*"):
        if path.is_file():
            content = path.read_bytes()
            found += [f"{s} in {path.name}" for s in secrets if s.encode() in content]
    return found


@needs_bwrap
async def test_no_token_no_shell_a_client_token_cannot_widen_and_the_sandbox_hides_secrets(
    tmp_path,
):
    data = tmp_path / "data"
    root = tmp_path / "workspaces"
    (root / "ws").mkdir(parents=True)
    env = serve_env(CALLBOARD_API_KEY=API_KEY, OPENAI_API_KEY=OPENAI_KEY, CALLBOARD_TOKEN=OPERATOR)
    shell = tool_call("shell_run", {"command": ATTACK})
    with ScriptedModel([shell, text("done")]) as model, ScriptedModel([]) as attacker:
        with trio.fail_after(60):
            async with serving(
                data, "--workspace-root", str(root), "--sandbox", "bwrap",
                "--model-url", model.base_url, "--model", "m", env=env,
            ) as served:  # fmt: skip
                # 1. No credentials: refused at hello.
                async with connect(served.url, hello=False, header_token=None) as nobody:
                    await nobody.send_frame({"op": "hello", "id": "h", "protocol": 1})
                    refused = await nobody.receive()
                # 2. A client token: the spawn of the attack is refused, naming the settings.
                made = await trio.run_process(
                    [sys.executable, "-m", "callboard", "token", "add", "web", "--access",
                     "write", "--actor", "session/*", "--data", str(data)],
                    capture_stdout=True, capture_stderr=True, env=env,
                )  # fmt: skip
                web = made.stdout.decode().strip()
                async with connect(served.url, token=web, header_token=web) as client:
                    root_ws = await client.request("spawn", kind="session", name="evil", spec={
                        "workspace": "/", "approvals": "always",
                    })  # fmt: skip
                    foreign = await client.request("spawn", kind="session", name="evil", spec={
                        "workspace": str(root / "ws"), "approvals": "always",
                        "base_url": attacker.base_url,
                    })  # fmt: skip
                # 3. The operator's own session, sandboxed, runs the attack's command.
                async with connect(served.url, token=OPERATOR, header_token=OPERATOR) as op:
                    await op.ok("spawn", kind="session", name="s1", spec={
                        "workspace": str(root / "ws"), "approvals": "always",
                    })  # fmt: skip
                    sub = await op.ok("subscribe", actor="session/s1", after=0)
                    await op.ok("send", to="session/s1", type="prompt", body={"text": "go"})
                    events = await _events_until(op, sub["sub"], "turn.completed")
        requests = model.requests
        headers = model.request_headers
        attacked = attacker.requests
    assert refused["code"] == "unauthorized"
    assert (root_ws["code"], foreign["code"]) == ("bad_request", "bad_request")
    assert "--workspace-root" in root_ws["message"]
    assert "--allow-model-url" in foreign["message"]
    assert attacked == []  # the attacker's endpoint never heard from the server
    (finished,) = [e for e in events if e["type"] == "tool.finished"]
    output = json.dumps(finished["data"])
    secrets = [API_KEY, OPENAI_KEY, OPERATOR, web, *_shadow_lines()]
    assert [s for s in secrets if s in output] == []
    assert "PATH=" in output  # the command ran, and env printed the environment it got
    assert all(h.get("authorization") == f"Bearer {API_KEY}" for h in headers)
    assert [s for s in secrets if s in json.dumps(requests)] == []
    assert _secrets_in(data, secrets) == []
