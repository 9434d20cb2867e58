"""`callboard serve --log-format json`: one JSON object a line on stderr, and every
line that concerns an actor names it, whether the actor's own task logged it
(a model call retried inside a session's turn) or the server logged it for the
actor (a crash, a dead letter)."""

from __future__ import annotations

import json
import signal
import sys

import trio
from scripted_model import ScriptedModel, status, text
from serve_helpers import serve_env, serving

from callboard.client import connect

CRASHY = """
from callboard import Actor, Supervision

class Crashy(Actor):
    kind = "crashy"
    virtual = True
    supervision = Supervision(max_attempts=2, backoff_initial=0.001, backoff_max=0.01)

    async def handle(self, ctx, message):
        raise ValueError("the boom message breaks me")
"""


async def test_every_json_log_line_parses_and_those_about_an_actor_name_it(tmp_path):
    (tmp_path / "crashy.py").write_text(CRASHY)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = [status(503, headers={"Retry-After": "0"}), text("hello after a retry")]
    with ScriptedModel(script) as model, trio.fail_after(60):
        extra = ["--log-format", "json", "--kind", "crashy:Crashy", "--model-url",
                 model.base_url, "--model", "m", "--sandbox", "none"]  # fmt: skip
        async with serving(tmp_path / "data", *extra, cwd=tmp_path) as served:
            async with connect(served.url, token=served.token) as client:
                await client.send("crashy/c1", "boom")
                await served.wait_logged("moved to the dead letters")
                await client.spawn("session", {"workspace": str(workspace)}, name="s1")
                async with client.subscribe("session/s1", after=0) as events:
                    await client.send("session/s1", "prompt", {"text": "hello"})
                    async for event in events:
                        if event.type == "turn.completed":
                            break
            served.process.send_signal(signal.SIGTERM)
            assert await served.process.wait() == 0
            await served.wait_logged("is released")
    lines = [json.loads(line) for line in served.stderr]  # every line parses
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    about = {line["message"]: line.get("actor") for line in lines}
    crashed = [m for m in about if m.startswith("crashy/c1 crashed: ValueError")]
    dead = [m for m in about if "moved to the dead letters" in m]
    retried = [m for m in about if m.startswith("model call to ")]
    # One line per crash before the message is set aside (as many as the
    # supervisor's attempts allow), each naming the actor.
    assert crashed and all(about[m] == "crashy/c1" for m in crashed)
    assert len(dead) == 1 and about[dead[0]] == "crashy/c1"
    assert dead[0].startswith("crashy/c1: message 1 (boom) moved to the dead letters: ValueError")
    # Logged by the model client inside the session's turn: the task names the actor.
    assert len(retried) == 1 and about[retried[0]] == "session/s1"
    # Lines about no actor carry none.
    assert all("actor" not in line for line in lines if line["logger"] == "callboard.serve")
    assert [line["level"] for line in lines if line["message"] in dead] == ["error"]


async def test_the_reason_serve_refuses_to_start_is_a_json_line_too(tmp_path):
    command = [sys.executable, "-m", "callboard", "serve", "--log-format", "json",
               "--host", "0.0.0.0", "--port", "0", "--data", str(tmp_path / "data")]  # fmt: skip
    with trio.fail_after(20):
        done = await trio.run_process(
            command, capture_stdout=True, capture_stderr=True, check=False, env=serve_env()
        )
    (line,) = [json.loads(text) for text in done.stderr.decode().splitlines()]
    assert done.returncode == 2
    assert (line["level"], line["logger"]) == ("error", "callboard.serve")
    assert "--token TOKEN or set CALLBOARD_TOKEN" in line["message"]
