"""Task budgets: a breach settles the task ``failed`` with the budget error (a task
has no person to wait for) unless its spec says ``pause`` or ``ask``; usage is
exact across a SIGKILL of a real child process (``task_child.py``) and a restart
on the same data directory. Every scripted answer reports 7 tokens in, 5 out.
"""

from __future__ import annotations

from typing import Any

import trio
from scripted_model import ScriptedModel, hold, text, tool_call
from task_helpers import events_of, first_life, kinds_in, spec

import callboard
from callboard.agent import Failed, Settled, Succeeded, Tasks, WaitOutcome


def write(content: str) -> Any:
    return tool_call("write_file", {"path": "note.txt", "content": content})


def settled(outcome: WaitOutcome) -> Any:
    assert isinstance(outcome, Settled), outcome
    return outcome.record


async def test_a_task_past_its_tokens_after_a_sigkill_settles_failed_charged_exactly_once(
    data, workspace
):
    script = [write("once"), hold(), write("twice"), text("never asked")]
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with first_life(data, workspace, model, max_tokens=24) as life:
            await model.wait_for_requests(2)  # the first answer and its tool are committed
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            tasks = Tasks(rt)
            record = settled(await tasks.wait(life.handle, timeout=20))
            types = await events_of(rt, life.handle, "task.settled")
            view = await rt.inspect(life.handle)
    assert life.process.returncode == -9
    assert record.terminal == Failed("budget exceeded: max_tokens is 24 and 24 was used")
    assert view.state["budget"]["usage"] == {
        "input_tokens": 14, "output_tokens": 10, "model_calls": 2, "tool_calls": 2, "cost": 0.0,
    }  # fmt: skip
    assert types.count("budget.exceeded") == 1
    assert len(model.requests) == 3
    assert (workspace / "note.txt").read_text() == "twice"


async def test_a_paused_task_waits_across_a_restart_and_succeeds_once_raised(data, workspace):
    with ScriptedModel([write("once"), text("written")]) as model, trio.fail_after(30):
        the_spec = spec(model, max_model_calls=1, on_budget="pause")
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            handle = await Tasks(rt).spawn(the_spec)
            await events_of(rt, handle, "budget.exceeded")
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            tasks = Tasks(rt)
            assert await tasks.terminal(handle) is None
            await rt.send(handle, "raise_budget", {"max_model_calls": 2})
            record = settled(await tasks.wait(handle, timeout=20))
            types = await events_of(rt, handle, "task.settled")
            view = await rt.inspect(handle)
    assert record.terminal == Succeeded("written")
    assert types.count("budget.exceeded") == 1 and types.count("budget.raised") == 1
    assert view.state["budget"]["limits"]["max_model_calls"] == 2
    assert view.state["budget"]["usage"]["model_calls"] == 2
    assert len(model.requests) == 2


async def test_a_raise_that_does_not_fit_is_rejected_saying_why(data, workspace):
    with ScriptedModel([write("once")]) as model, trio.fail_after(30):
        the_spec = spec(model, max_model_calls=1, on_budget="pause")
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            handle = await Tasks(rt).spawn(the_spec)
            await events_of(rt, handle, "budget.exceeded")
            empty = await rt.send(handle, "raise_budget", {})
            negative = await rt.send(handle, "raise_budget", {"max_tokens": 0})
            per_turn = await rt.send(handle, "raise_budget", {"turn_deadline": 60})
            misspelt = await rt.send(handle, "raise_budget", {"max_tokens": 9, "max_tool_call": 3})
            sent = (empty, negative, per_turn, misspelt)
            outcomes = [await rt.wait_outcome(handle, ack.seq) for ack in sent]
    assert [o.reason for o in outcomes] == [
        "'raise_budget' needs at least one of 'max_tokens', 'max_cost', 'max_model_calls', "
        "'max_tool_calls', 'turn_deadline'",
        f"the body of 'raise_budget' to {handle} is not valid ('max_tokens' must be a whole "
        "number above 0, got 0)",
        "a task has no 'turn_deadline': its time is the spec's 'deadline'",
        "'raise_budget' has no limit 'max_tool_call': give any of 'max_tokens', 'max_cost', "
        "'max_model_calls', 'max_tool_calls', 'turn_deadline'",
    ]
