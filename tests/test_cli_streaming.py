"""A session's answer reaches `callboard tail` piece by piece, before the stored message."""

from __future__ import annotations

import json
import signal
import subprocess

import trio
from child import Lines
from client_helpers import CALLBOARD, REPO, serving, subprocess_env
from scripted_model import ScriptedModel, text

from callboard.client import connect


async def test_tail_shows_a_sessions_streamed_answer_as_it_arrives(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with trio.fail_after(30), ScriptedModel([text("Hello streamed world", pieces=3)]) as model:
        async with serving(tmp_path / "data") as server, connect(server.url) as client:
            spec = {"workspace": str(workspace), "base_url": model.base_url, "model": "m"}
            await client.spawn("session", spec, name="s1")
            cmd = [*CALLBOARD, "tail", "session/s1", "--after", "0", "--json", "--url", server.url]
            proc = await trio.lowlevel.open_process(
                cmd, cwd=REPO, env=subprocess_env(), stdout=subprocess.PIPE
            )
            try:
                assert proc.stdout is not None
                out = Lines(proc.stdout)
                # The stored actor.started arriving means tail is subscribed, so
                # the live deltas that follow cannot be missed.
                first = json.loads(await out.next())
                assert first["type"] == "actor.started"
                await client.send("session/s1", "prompt", {"text": "say hello"})
                seen: list[dict] = []
                while not seen or seen[-1]["type"] != "turn.completed":
                    seen.append(json.loads(await out.next()))
                proc.send_signal(signal.SIGINT)
                assert await proc.wait() == 0
            finally:
                proc.kill()
    types = [e["type"] for e in seen]
    deltas = [e for e in seen if e["type"] == "turn.delta"]
    assert [d["data"]["text"] for d in deltas] == ["Hello s", "treamed", " world"]
    assert all(d["seq"] is None for d in deltas)
    assert types.index("turn.delta") < types.index("assistant.message")
    [message] = [e for e in seen if e["type"] == "assistant.message"]
    assert "Hello streamed world" in json.dumps(message["data"])
