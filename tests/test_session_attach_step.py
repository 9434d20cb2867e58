"""Live attach's pause and step on a session with a turn running: a steer sent while
paused waits in the mailbox (the running turn goes on without it), and stepping
it after that turn ended hands it to the session as a prompt, once."""

from __future__ import annotations

import threading
from typing import Any

import trio
from scripted_model import ScriptedModel, text
from session_helpers import ADDRESS, KINDS, NAME, Watch, occurrences, spec

import callboard

STEER = "and keep it short"


async def test_a_steer_held_by_a_pause_is_a_prompt_of_its_own_when_stepped_after_the_turn(
    data, workspace
):
    released = threading.Event()

    def first(body: dict[str, Any]) -> Any:
        released.wait(20)  # until the steer is stored behind the pause
        return text("one")

    with ScriptedModel([first, text("two")]) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "first")
                await model.wait_for_requests(1)
                await rt.pause(ADDRESS)
                ack = await rt.send(ADDRESS, "prompt", {"text": STEER, "mode": "steer"})
                released.set()
                await watch.until("turn.completed")
                stepped = await rt.step(ADDRESS)
                second = await watch.until("turn.completed", 2)
            nothing = await rt.step(ADDRESS)
    assert stepped == ack.seq and nothing is None
    assert second.data["answer"] == "two"
    types = watch.types()
    assert "steer.accepted" not in types and "turn.steered" not in types
    assert types.count("turn.started") == 2
    assert occurrences(model.requests[0], STEER) == 0
    assert occurrences(model.requests[1], STEER) == 1
