"""A session's ``turn_deadline``: a durable timer set when a turn starts. With
``fail`` the turn ends at once (the model stream closes); with ``pause`` it is
held at its next step until ``raise_budget``, also when the deadline fell due
while no runtime ran.
"""

from __future__ import annotations

import time

import trio
from scripted_model import ScriptedModel, hold, text
from session_helpers import ADDRESS, KINDS, NAME, WRITE_NOTE, Watch, spec

import callboard


async def test_a_turn_past_its_deadline_with_fail_ends_and_the_next_prompt_runs(data, workspace):
    with ScriptedModel([hold(first_delta="Hel"), text("next")]) as model, trio.fail_after(30):
        the_spec = spec(model, workspace, turn_deadline=0.5, on_budget="fail")
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", the_spec, name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "take your time")
                failed = await watch.until("turn.failed")
                await model.wait_for_disconnects(1)
                await rt.send(ADDRESS, "prompt", "be quick")
                done = await watch.until("turn.completed")
            view = await rt.inspect(ADDRESS)
    assert failed.data == {
        "turn_id": "turn-1", "prompt_id": "p1", "retryable": False, "status": None,
        "error": "budget exceeded: the turn ran past its turn_deadline of 0.5 seconds",
    }  # fmt: skip
    assert watch.of("budget.exceeded")[0]["limit"] == "turn_deadline"
    assert done.data["answer"] == "next"
    assert view.state["budget"]["breach"] is None
    assert view.state["budget"]["usage"]["model_calls"] == 1, "the cut-off answer is not charged"


async def test_a_turn_deadline_due_while_no_runtime_ran_holds_the_turn_until_raised(
    data, workspace
):
    with ScriptedModel([WRITE_NOTE, text("written")]) as model, trio.fail_after(30):
        the_spec = spec(model, workspace, turn_deadline=60, approvals="ask")
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", the_spec, name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                await rt.send(ADDRESS, "prompt", "write the note")
                asked = await Watch(sub).until("approval.requested")
        later = time.time() + 120
        async with callboard.open_runtime(data, kinds=KINDS, clock=lambda: later) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                exceeded = await watch.until("budget.exceeded")
                await rt.send(ADDRESS, "approve", {"call_id": asked.data["call_id"]})
                await watch.until("approval.answered")
                view = await rt.inspect(ADDRESS)
                await rt.send(ADDRESS, "raise_budget", {"turn_deadline": 600})
                await watch.until("turn.completed")
    assert exceeded.data["limit"] == "turn_deadline" and exceeded.data["policy"] == "pause"
    assert view.state["budget"]["usage"]["tool_calls"] == 0, "held before the tool ran"
    types = watch.types()
    assert types.index("budget.raised") < types.index("tool.started")
    assert types.count("tool.started") == 1 and types.count("budget.exceeded") == 1
    assert (workspace / "note.txt").read_text() == "once"
