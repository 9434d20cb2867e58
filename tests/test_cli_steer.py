"""``callboard send ADDR prompt '{"text": ..., "mode": ...}'`` as a real subprocess
against the real gateway: a steer reaches the running turn, and a mode no
session knows makes ``send --wait`` exit 1 naming the modes.
"""

from __future__ import annotations

import trio
from client_helpers import serving
from scripted_model import ScriptedModel, text
from test_cli_operator import cli, until
from test_session_jobs import held

from callboard.client import connect


async def test_send_steers_a_running_turn_and_send_wait_refuses_an_unknown_mode(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    released, first = held(text("a long answer"))
    spec = {"workspace": str(workspace), "model": "m"}
    with trio.fail_after(40), ScriptedModel([first, text("a short answer")]) as model:
        spec["base_url"] = model.base_url
        async with serving(tmp_path / "data") as server, connect(server.url) as client:
            await client.spawn("session", spec, name="s1")
            await client.send("session/s1", "prompt", {"text": "answer me"})
            await model.wait_for_requests(1)
            wrong = await cli("send", "session/s1", "prompt", '{"text": "x", "mode": "asap"}',
                              "--wait", "--url", server.url)  # fmt: skip
            steered = await cli("send", "session/s1", "prompt",
                                '{"text": "keep it short", "mode": "steer"}', "--wait",
                                "--url", server.url)  # fmt: skip
            released.set()
            done = await until(client, "session/s1", "turn.completed")
            joined = await until(client, "session/s1", "turn.steered")
    assert wrong == (1, [], [
        "callboard: session/s1 did not apply message 2: the body of 'prompt' to session/s1: "
        "$.mode must be 'queue', 'steer' or 'interrupt', got \"asap\" (a string)"
    ])  # fmt: skip
    assert steered == (0, ["sent to session/s1 as seq 3 and handled"], [])
    assert joined.data["text"] == "keep it short"
    assert done.data["answer"] == "a short answer"
    assert len(model.requests) == 2
    assert model.requests[1]["messages"][-1] == {"role": "user", "content": "keep it short"}
