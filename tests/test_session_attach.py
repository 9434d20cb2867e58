"""Live attach on a session: a state edit is refused while its turn runs (the turn
holds the state it drives and would lose the edit), and one made between turns
is the state the next turn charges its budget to, across a restart."""

from __future__ import annotations

import pytest
import trio
from scripted_model import ScriptedModel, hold, text
from session_helpers import ADDRESS, KINDS, NAME, Watch, spec

import callboard


async def test_a_state_edit_is_refused_while_a_turn_runs_and_changes_nothing(data, workspace):
    with ScriptedModel([hold()]) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            await rt.send(ADDRESS, "prompt", "hello")
            await model.wait_for_requests(1)
            before = await rt.get_state(ADDRESS)
            with pytest.raises(callboard.BadRequest) as refused:
                await rt.replace_state(ADDRESS, {**before, "allowed_tools": ["shell_run"]})
            after = await rt.get_state(ADDRESS)
    assert str(refused.value) == (
        f"{ADDRESS} has work running (an activity, such as a session's turn), which holds "
        "its state: the new state would be lost under it. Wait for the work to end (cancel "
        "a turn) and set the state then; nothing was changed"
    )
    assert after == before and after["active"]["turn_id"] == "turn-1"


async def test_a_budget_edited_between_turns_is_the_one_the_next_turn_charges(data, workspace):
    with ScriptedModel([text("one"), text("two")]) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace, max_tokens=100), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "first")
                await watch.until("turn.completed")
                state = await rt.get_state(ADDRESS)
                budget = state["budget"]
                usage = {**budget["usage"], "input_tokens": 0, "output_tokens": 0}
                edited = {**state, "budget": {**budget, "usage": usage}}
                await rt.replace_state(ADDRESS, edited)
                await rt.send(ADDRESS, "prompt", "second")
                await watch.until("turn.completed", 2)
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            view = await rt.inspect(ADDRESS)
    assert view.state["budget"]["usage"] == {
        "input_tokens": 7, "output_tokens": 5, "model_calls": 2, "tool_calls": 0, "cost": 0.0,
    }  # fmt: skip
