"""A task's follow-up messages take the prompt modes: ``steer`` joins the running turn
(its reply is that turn's answer), ``interrupt`` cancels the running turn and runs
its own, ``queue`` (the default) waits. Through `Tasks` on a real runtime and the
scripted model on loopback; a held answer keeps the turn running until the test
releases it.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from client_helpers import serving
from scripted_model import ScriptedModel, hold, text
from task_helpers import MESSAGE, PROMPT, events_of, kinds_in, occurrences, spec
from test_session_jobs import held

import callboard
from callboard.agent import Settled, Succeeded, Tasks, WaitOutcome
from callboard.client import connect

STEER = "and keep it short"


def settled(outcome: WaitOutcome) -> Any:
    assert isinstance(outcome, Settled), outcome
    return outcome.record


async def test_a_steered_message_joins_the_running_turn_and_is_answered_by_it(data, workspace):
    released, first = held(text("a long answer"))
    with ScriptedModel([first, text("a short answer")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            tasks = Tasks(rt)
            handle = await tasks.spawn(spec(model))
            await model.wait_for_requests(1)
            message_id = await tasks.send(handle, STEER, mode="steer")
            await rt.wait_handled(handle, int(message_id.removeprefix("msg-")))
            released.set()
            reply = settled(await tasks.wait_message(handle, message_id, timeout=10))
            record = settled(await tasks.wait(handle, timeout=10))
            types = await events_of(rt, handle, "task.settled")
            view = await rt.inspect(handle)
    assert reply.result == "a short answer"
    assert record.terminal == Succeeded("a short answer")
    assert types.count("turn.started") == 1 and types.count("turn.steered") == 1
    assert "message.queued" not in types
    assert types.index("steer.accepted") < types.index("turn.steered")
    assert len(model.requests) == 2
    assert occurrences(model.requests[0], STEER) == 0
    assert occurrences(model.requests[1], STEER) == 1
    assert occurrences(model.requests[1], PROMPT) == 1
    assert [m["status"] for m in view.state["messages"]] == ["answered"]


async def test_an_interrupting_message_cancels_the_running_turn_and_runs_its_own(data, workspace):
    released, prompt_answer = held(text("the prompt's answer"))
    script = [prompt_answer, hold(first_delta="Wor"), text("done instead")]
    with ScriptedModel(script) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            tasks = Tasks(rt)
            handle = await tasks.spawn(spec(model))
            first_id = await tasks.send(handle, MESSAGE)
            await rt.wait_handled(handle, int(first_id.removeprefix("msg-")))
            released.set()
            await model.wait_for_requests(2)
            second_id = await tasks.send(handle, "stop, do this", mode="interrupt")
            await model.wait_for_disconnects(1)
            second = settled(await tasks.wait_message(handle, second_id, timeout=10))
            first = settled(await tasks.wait_message(handle, first_id, timeout=10))
            record = settled(await tasks.wait(handle, timeout=10))
            async with rt.subscribe(handle, after=0) as sub:
                async for event in sub:
                    if event.type == "turn.interrupted":
                        interrupted = event.data
                        break
    assert interrupted == {
        "turn_id": "turn-2", "prompt_id": first_id, "by": second_id,
        "reason": f"interrupted by {second_id}",
    }  # fmt: skip
    # The interrupted message is answered by the turn that replaced it.
    assert second.result == "done instead" and first.result == "done instead"
    assert record.terminal == Succeeded("done instead")
    assert model.disconnects == 1
    assert len(model.requests) == 3
    assert occurrences(model.requests[2], MESSAGE) == 1
    assert occurrences(model.requests[2], "stop, do this") == 1


async def test_a_mode_no_task_knows_is_refused_by_the_facade_and_rejected_by_the_task(
    data, workspace
):
    with ScriptedModel([hold()]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            tasks = Tasks(rt)
            handle = await tasks.spawn(spec(model))
            with pytest.raises(callboard.BadMessage) as refused:
                await tasks.send(handle, MESSAGE, mode="soon")  # type: ignore[arg-type]
            ack = await rt.send(handle, "message", {"text": MESSAGE, "mode": "soon"})
            await rt.wait_handled(handle, ack.seq)
            async with rt.subscribe(handle, after=0) as sub:
                async for event in sub:
                    if event.type == "message.rejected":
                        rejected = event.data
                        break
            view = await rt.inspect(handle)
            await tasks.cancel(handle)
    assert str(refused.value) == (
        "a prompt's mode is one of 'queue', 'steer', 'interrupt', got 'soon'"
    )
    assert rejected["seq"] == ack.seq
    assert rejected["reason"] == (
        f"the body of 'message' to {handle}: $.mode must be 'queue', 'steer' or "
        "'interrupt', got \"soon\" (a string)"
    )
    assert view.state["messages"] == []
    assert len(model.requests) == 1


async def test_a_remote_steered_message_gets_the_reply_of_the_turn_it_joined(tmp_path, workspace):
    released, first = held(text("a long answer"))
    with ScriptedModel([first, text("a short answer")]) as model, trio.fail_after(20):
        async with serving(tmp_path / "data") as server, connect(server.url) as client:
            tasks = client.tasks
            handle = await tasks.spawn(spec(model, workspace=str(workspace)))
            await model.wait_for_requests(1)
            async with client.subscribe(handle, after=0) as events:
                message_id = await tasks.send(handle, STEER, mode="steer")
                async for event in events:
                    if event.type == "steer.accepted":
                        accepted = event.data
                        break
            released.set()
            reply = settled(await tasks.wait_message(handle, message_id, timeout=10))
            record = settled(await tasks.wait(handle, timeout=10))
    assert accepted == {"turn_id": "turn-1", "prompt_id": "prompt", "id": message_id, "text": STEER}
    assert reply.result == "a short answer"
    assert record.terminal == Succeeded("a short answer")
    assert len(model.requests) == 2
    assert occurrences(model.requests[1], STEER) == 1
