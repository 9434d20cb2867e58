"""A task's turn parked through a model outage: the task does not fail, it waits.

The task keeps its turn (a tool that ran is not run again), answers once
the model is back, in this runtime or the next one on the same data
directory; cancel settles a parked task ``cancelled``; the limit settles it
``failed`` with a sentence saying how many times it tried.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import trio
from scripted_model import ScriptedModel, status, text, tool_call
from task_helpers import PROMPT, events_of, occurrences, spec

import callboard
from callboard.agent import builtin_kinds
from callboard.views import (
    Cancelled,
    DeadlineExceeded,
    Failed,
    Settled,
    Succeeded,
    WaitOutcome,
)

FAST = {"model_call_attempts": 1, "outage_backoff_initial": 0.01, "outage_backoff_max": 0.05}
"""No backoff inside the client, and parked turns retried within hundredths of a second."""

PARKED = {"model_call_attempts": 1, "outage_backoff_initial": 3600, "outage_backoff_max": 3600}
"""A parked turn stays parked for the whole test (its timer is an hour away)."""

DOWN = status(503, {"error": {"message": "upstream is restarting", "type": "server_error"}})


def kinds(workspace: Any, settings: dict[str, Any]) -> tuple[type[callboard.Actor], ...]:
    return builtin_kinds({"workspace": workspace, **settings})


def settled(outcome: WaitOutcome) -> Any:
    assert isinstance(outcome, Settled), outcome
    return outcome.record


async def test_a_task_parked_mid_tool_round_goes_on_without_running_the_tool_again(data, workspace):
    write = tool_call("write_file", {"path": "note.txt", "content": "once"})
    script = [write, DOWN, DOWN, DOWN, DOWN, text("the note is written")]
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=kinds(workspace, FAST)) as rt:
            handle = await rt.tasks.spawn(spec(model))
            record = settled(await rt.tasks.wait(handle, timeout=20))
            types = await events_of(rt, handle, "task.settled")
    assert record.terminal == Succeeded("the note is written")
    assert types.count("turn.waiting_for_model") == 2
    assert types.count("tool.started") == 1 and types.count("turn.completed") == 1
    assert (workspace / "note.txt").read_text() == "once"
    assert len(model.requests) == 6
    assert occurrences(model.requests[-1], PROMPT) == 1
    assert [m["role"] for m in model.requests[-1]["messages"][-2:]] == ["assistant", "tool"]


async def test_a_parked_task_survives_a_closed_runtime_and_succeeds_once_when_the_model_is_back(
    data, workspace
):
    up = threading.Event()
    answered: list[int] = []

    def reply(body: dict[str, Any]) -> Any:
        if not up.is_set():
            return DOWN
        answered.append(1)
        return text("done after the outage")

    with ScriptedModel([reply] * 1000) as model, trio.fail_after(60):
        async with callboard.open_runtime(data, kinds=kinds(workspace, FAST)) as rt:
            handle = await rt.tasks.spawn(spec(model))
            async with rt.subscribe(handle, after=0) as sub:
                async for event in sub:
                    if event.type == "turn.waiting_for_model":
                        break
        up.set()
        async with callboard.open_runtime(data, kinds=kinds(workspace, FAST)) as rt:
            record = settled(await rt.tasks.wait(handle, timeout=30))
            types = await events_of(rt, handle, "task.settled")
    assert record.terminal == Succeeded("done after the outage")
    assert answered == [1]
    assert types.count("turn.started") == 1 and types.count("turn.completed") == 1
    assert types.count("task.settled") == 1


async def test_cancelling_a_parked_task_settles_it_cancelled(data, workspace):
    with ScriptedModel([DOWN, DOWN]) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=kinds(workspace, PARKED)) as rt:
            handle = await rt.tasks.spawn(spec(model))
            async with rt.subscribe(handle, after=0) as sub:
                async for event in sub:
                    if event.type == "turn.waiting_for_model":
                        break
            terminal = await rt.tasks.cancel(handle)
            record = settled(await rt.tasks.wait(handle, timeout=10))
            view = await rt.inspect(handle)
    assert terminal == Cancelled() and record.terminal == Cancelled()
    assert view.status == "cancelled" and view.state["active"] is None
    assert len(model.requests) == 2


async def test_the_retry_limit_settles_a_task_failed_saying_how_many_times_it_tried(
    data, workspace
):
    with ScriptedModel([DOWN] * 4) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=kinds(workspace, FAST)) as rt:
            handle = await rt.tasks.spawn(spec(model, outage_retry_limit=1))
            record = settled(await rt.tasks.wait(handle, timeout=20))
    assert isinstance(record.terminal, Failed)
    error = record.terminal.error
    assert error.startswith("the model could not be reached: the turn asked it 2 times over ")
    assert "(outage_retry_limit 1; raise it to wait longer)" in error and "HTTP 503" in error
    assert len(model.requests) == 4


async def test_a_message_sent_to_a_parked_task_is_queued_and_answered_after_the_outage(
    data, workspace
):
    up = threading.Event()

    def reply(body: dict[str, Any]) -> Any:
        return text(f"answer {len(body['messages'])}") if up.is_set() else DOWN

    with ScriptedModel([reply] * 1000) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=kinds(workspace, FAST)) as rt:
            handle = await rt.tasks.spawn(spec(model))
            async with rt.subscribe(handle, after=0) as sub:
                async for event in sub:
                    if event.type == "turn.waiting_for_model":
                        break
            message_id = await rt.tasks.send(handle, "and then?")
            up.set()
            reply_to = settled(await rt.tasks.wait_message(handle, message_id, timeout=20)).result
            record = settled(await rt.tasks.wait(handle, timeout=20))
    assert record.terminal == Succeeded(reply_to)
    assert occurrences(model.requests[-1], PROMPT) == 1
    assert occurrences(model.requests[-1], "and then?") == 1


async def test_a_parked_tasks_deadline_settles_it_deadline_exceeded(data, workspace):
    with ScriptedModel([DOWN, DOWN]) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=kinds(workspace, PARKED)) as rt:
            handle = await rt.tasks.spawn(spec(model, deadline=timedelta(seconds=0.5)))
            record = settled(await rt.tasks.wait(handle, timeout=20))
            types = await events_of(rt, handle, "task.settled")
    assert record.terminal == DeadlineExceeded()
    assert types.count("turn.waiting_for_model") == 1
    assert len(model.requests) == 2
