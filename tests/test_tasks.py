"""The ``task`` kind and the `Tasks` facade against a scripted model on loopback.

Each scenario of the durable tasks issue is its own test. Crash tests run the
first life in a real child process (``task_child.py``) that is SIGKILLed while
its model request is held, then a second runtime on the same data directory
settles the task. Counts are exact: model requests, how often the prompt and
the message are in them, what the file the tool wrote holds on disk. The
turn-journal tests (the first three) run over both model wires (``wires``).
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
import trio
import trio.testing
from scripted_model import ScriptedModel, hold, text, tool_call
from session_helpers import pid_from, slow_command
from shell_helpers import marked_processes, no_leaked_job_processes  # noqa: F401
from task_helpers import KINDS, MESSAGE, PROMPT, events_of, first_life, kinds_in, occurrences, spec
from wires import WIRES

import callboard
from callboard.agent import (
    NO_WORKSPACE_HELP,
    Cancelled,
    DeadlineExceeded,
    Failed,
    RunSpec,
    Settled,
    Succeeded,
    Tasks,
    WaitOutcome,
    WaitTimedOut,
)
from callboard.tools._procs import wait_group_gone


def write(content: str) -> Any:
    return tool_call("write_file", {"path": "note.txt", "content": content})


def settled(outcome: WaitOutcome) -> Any:
    assert isinstance(outcome, Settled), outcome
    return outcome.record


@pytest.mark.parametrize("wire", WIRES)
async def test_a_task_killed_mid_tool_round_is_continued_not_settled_on_the_cut_off_turn(
    data, workspace, wire
):
    script = [write("once"), hold(first_delta="the note is wri"), text("the note is written")]
    with ScriptedModel(script, wire=wire) as model, trio.fail_after(30):
        async with first_life(data, workspace, model) as life:
            await model.wait_for_requests(2)
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            tasks = Tasks(rt)
            # Nothing has run yet in this runtime: recovery only scheduled the task.
            assert await tasks.terminal(life.handle) is None
            record = settled(await tasks.wait(life.handle, timeout=20))
            types = await events_of(rt, life.handle, "task.settled")
    assert life.process.returncode == -9
    assert record.terminal == Succeeded("the note is written")
    assert record.result == "the note is written"
    assert len(model.requests) == 3
    assert occurrences(model.chat_requests[2], PROMPT) == 1
    assert model.chat_requests[2]["messages"][-1]["content"] == "created 'note.txt': 4 bytes"
    assert "the note is wri" not in str(model.chat_requests[2]["messages"])
    assert types.count("tool.started") == 1
    assert (workspace / "note.txt").read_text() == "once"


@pytest.mark.parametrize("wire", WIRES)
async def test_a_message_cut_off_mid_tool_round_gets_its_reply_from_the_continued_turn(
    data, workspace, wire
):
    released = threading.Event()

    def ready(body: dict[str, Any]) -> Any:
        released.wait(20)  # until the message is queued: the prompt's turn must not settle
        return text("ready")

    script = [ready, write("from the message"), hold(), text("done with the message")]
    with ScriptedModel(script, wire=wire) as model, trio.fail_after(30):
        async with first_life(data, workspace, model, message=MESSAGE) as life:
            released.set()
            await model.wait_for_requests(3)
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            tasks = Tasks(rt)
            reply = settled(await tasks.wait_message(life.handle, life.message_id, timeout=20))
            record = settled(await tasks.wait(life.handle, timeout=20))
            types = await events_of(rt, life.handle, "task.settled")
    assert life.process.returncode == -9
    assert (reply.message_id, reply.result) == (life.message_id, "done with the message")
    assert record.terminal == Succeeded("done with the message")
    assert len(model.requests) == 4
    assert occurrences(model.chat_requests[3], MESSAGE) == 1
    assert occurrences(model.chat_requests[3], PROMPT) == 1
    assert types.count("tool.started") == 1
    assert (workspace / "note.txt").read_text() == "from the message"


@pytest.mark.parametrize("wire", WIRES)
async def test_leaving_the_runtime_mid_answer_ends_every_wait_at_once_and_records_nothing(
    data, workspace, wire
):
    script = [hold(), text("after the stop"), text("the reply")]
    outcomes: list[WaitOutcome] = []

    async def waiting(tasks: Tasks, handle: str, message_id: str | None, limit: float | None):
        if message_id is None:
            outcomes.append(await tasks.wait(handle, timeout=limit))
        else:
            outcomes.append(await tasks.wait_message(handle, message_id, timeout=limit))

    with ScriptedModel(script, wire=wire) as model, trio.fail_after(30):
        async with trio.open_nursery() as outside:
            async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
                tasks = Tasks(rt)
                handle = await tasks.spawn(spec(model))
                message_id = await tasks.send(handle, MESSAGE)
                outside.start_soon(waiting, tasks, handle, None, None)
                outside.start_soon(waiting, tasks, handle, None, 60.0)
                outside.start_soon(waiting, tasks, handle, message_id, None)
                await model.wait_for_requests(1)
                await trio.testing.wait_all_tasks_blocked()
                assert outcomes == [] and await tasks.is_attached(handle)
        assert outcomes == [WaitTimedOut(attached=False)] * 3
        assert not await tasks.is_attached(handle)
        with trio.fail_after(1):  # a closed runtime drives nothing: the wait ends at once
            assert await tasks.wait(handle, timeout=10) == WaitTimedOut(attached=False)
        assert len(model.requests) == 1
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            tasks = Tasks(rt)
            record = settled(await tasks.wait(handle, timeout=20))
            reply = settled(await tasks.wait_message(handle, message_id, timeout=20))
            types = await events_of(rt, handle, "task.settled")
    first = types[: types.index("actor.started", 1)]
    assert sorted(first) == ["actor.started", "message.queued", "task.started", "turn.started"]
    assert record.terminal == Succeeded("the reply") and reply.result == "the reply"
    assert model.disconnects == 1
    assert len(model.requests) == 3
    assert [m["role"] for m in model.chat_requests[1]["messages"]] == ["system", "user"]
    assert occurrences(model.chat_requests[1], PROMPT) == 1
    assert occurrences(model.chat_requests[2], PROMPT) == 1
    assert occurrences(model.chat_requests[2], MESSAGE) == 1


async def test_a_deadline_that_passed_while_no_runtime_ran_settles_without_calling_the_model(
    data, workspace
):
    with ScriptedModel([hold()]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            handle = await Tasks(rt).spawn(spec(model, deadline=timedelta(minutes=1)))
            await model.wait_for_requests(1)
        later = time.time() + 120
        async with callboard.open_runtime(
            data, kinds=kinds_in(workspace), clock=lambda: later
        ) as rt:
            record = settled(await Tasks(rt).wait(handle, timeout=10))
            types = await events_of(rt, handle, "task.settled")
    assert record.terminal == DeadlineExceeded()
    assert record.status == "deadline_exceeded"
    assert len(model.requests) == 1
    assert types[types.index("actor.started", 1) :] == ["actor.started", "task.settled"]


async def test_a_deadline_that_passes_mid_answer_settles_and_closes_the_model_stream(
    data, workspace
):
    with ScriptedModel([hold(first_delta="Hel")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            tasks = Tasks(rt)
            handle = await tasks.spawn(spec(model, deadline=0.5))
            record = settled(await tasks.wait(handle, timeout=10))
            await model.wait_for_disconnects(1)
    assert record.terminal == DeadlineExceeded()
    assert len(model.requests) == 1


async def test_approve_ask_emits_approval_requested_and_waits_durably_across_a_restart(
    data, workspace
):
    with ScriptedModel([write("once"), text("written")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            async with rt.subscribe("task/*") as sub:
                handle = await Tasks(rt).spawn(spec(model, approve="ask"))
                async for event in sub:
                    if event.type == "approval.requested":
                        break
        assert not (workspace / "note.txt").exists()
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            tasks = Tasks(rt)
            await tasks.approve(handle, event.data["call_id"])
            record = settled(await tasks.wait(handle, timeout=10))
            types = await events_of(rt, handle, "task.settled")
    assert record.terminal == Succeeded("written")
    assert types.count("approval.requested") == 1
    assert types.count("tool.started") == 1
    assert (workspace / "note.txt").read_text() == "once"
    assert len(model.requests) == 2
    assert occurrences(model.requests[1], PROMPT) == 1


async def test_approve_never_refuses_the_tool_and_tells_the_model(data, workspace):
    with ScriptedModel([write("once"), text("I may not write")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            tasks = Tasks(rt)
            handle = await tasks.spawn(spec(model, approve="never"))
            record = settled(await tasks.wait(handle, timeout=10))
    assert record.terminal == Succeeded("I may not write")
    assert not (workspace / "note.txt").exists()
    assert len(model.requests) == 2
    assert "never allows write_file" in model.requests[1]["messages"][-1]["content"]


async def test_cancel_settles_cancelled_at_once_and_closes_the_model_stream(data, workspace):
    with ScriptedModel([hold(first_delta="Hel")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            tasks = Tasks(rt)
            handle = await tasks.spawn(spec(model))
            await model.wait_for_requests(1)
            message_id = await tasks.send(handle, MESSAGE)
            assert await tasks.cancel(handle) == Cancelled()
            assert await tasks.terminal(handle) == Cancelled()
            assert (await rt.inspect(handle)).status == "cancelled"
            unanswered = settled(await tasks.wait_message(handle, message_id, timeout=10))
            await model.wait_for_disconnects(1)
            assert await tasks.cancel(handle) == Cancelled()
            with pytest.raises(callboard.ActorStopped, match=r"has settled \(cancelled\)"):
                await tasks.send(handle, MESSAGE)
    assert (unanswered.result, unanswered.terminal) == (None, Cancelled())
    assert len(model.requests) == 1


async def test_cancel_stops_a_running_tool(data, workspace):
    fifo, arguments = slow_command(workspace)
    with ScriptedModel([tool_call("shell_run", arguments)]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            tasks = Tasks(rt)
            handle = await tasks.spawn(spec(model))
            pid = await pid_from(fifo)
            assert await tasks.cancel(handle) == Cancelled()
            await wait_group_gone(pid)
    assert (workspace / "runs.txt").read_text() == "run\n"
    assert len(model.requests) == 1


async def test_each_follow_up_message_gets_an_id_and_a_reply_and_the_last_answer_settles(
    data, workspace
):
    released = threading.Event()

    def first(body: dict[str, Any]) -> Any:
        released.wait(20)
        return text("ready")

    script = [first, text("one"), text("two")]
    with ScriptedModel(script) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            tasks = Tasks(rt)
            handle = await tasks.spawn(spec(model))
            first_id = await tasks.send(handle, "first message")
            second_id = await tasks.send(handle, "second message", key="second")
            assert await tasks.send(handle, "second message", key="second") == second_id
            await rt.wait_handled(handle, int(second_id.removeprefix("msg-")))
            released.set()
            one = settled(await tasks.wait_message(str(handle), first_id, timeout=10))
            two = settled(await tasks.wait_message(str(handle), second_id, timeout=10))
            record = settled(await tasks.wait(str(handle), timeout=10))
    assert first_id != second_id
    assert (one.result, two.result) == ("one", "two")
    assert record.terminal == Succeeded("two")
    assert len(model.requests) == 3
    assert [occurrences(r, "first message") for r in model.requests] == [0, 1, 1]
    assert [occurrences(r, "second message") for r in model.requests] == [0, 0, 1]
    assert [occurrences(r, PROMPT) for r in model.requests] == [1, 1, 1]


async def test_a_wait_that_times_out_says_the_live_runtime_is_still_attached(data, workspace):
    with ScriptedModel([hold()]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            tasks = Tasks(rt)
            handle = await tasks.spawn(spec(model))
            await model.wait_for_requests(1)
            assert await tasks.wait(handle, timeout=0.05) == WaitTimedOut(attached=True)
            assert await tasks.is_attached(handle) and await tasks.terminal(handle) is None
            await tasks.cancel(handle)
            assert not await tasks.is_attached(handle)


async def test_a_task_without_a_model_fails_saying_how_to_configure_one(
    data, workspace, monkeypatch
):
    monkeypatch.delenv("CALLBOARD_MODEL_URL", raising=False)
    monkeypatch.delenv("CALLBOARD_MODEL", raising=False)
    with trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            tasks = Tasks(rt)
            handle = await tasks.spawn(RunSpec(PROMPT))
            record = settled(await tasks.wait(handle, timeout=10))
    assert isinstance(record.terminal, Failed)
    assert "no model is configured" in record.terminal.error
    assert record.status == "failed"


async def test_a_spec_is_checked_and_the_workspace_defaults_to_the_runtimes(
    data, workspace, monkeypatch
):
    monkeypatch.delenv("CALLBOARD_MODEL_URL", raising=False)
    with pytest.raises(TypeError, match=r"^'approve' must be 'always', 'ask' or 'never'"):
        RunSpec(PROMPT, approve="sometimes")  # type: ignore[arg-type]
    assert RunSpec(PROMPT, deadline=timedelta(minutes=2)).deadline == 120.0
    with trio.fail_after(10):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            with pytest.raises(callboard.BadRequest, match="a task needs a workspace"):
                await Tasks(rt).spawn(RunSpec(PROMPT))
            with pytest.raises(callboard.BadAddress, match="is not a task handle"):
                await Tasks(rt).terminal("session/s1")
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            handle = await Tasks(rt).spawn(RunSpec(PROMPT), name="t1")
            settled(await Tasks(rt).wait(handle, timeout=10))  # no model: it fails at once
            view = await rt.inspect(handle)
    assert handle == "task/t1" and str(handle) == "task/t1"
    assert view.state["workspace"] == str(workspace)


async def test_a_task_spawned_from_json_without_any_workspace_fails_saying_how_to_give_one(
    data,
):
    with trio.fail_after(10):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            handle = await rt.spawn("task", {"prompt": PROMPT, "deadline": 60})
            record = settled(await Tasks(rt).wait(handle, timeout=5))
            view = await rt.inspect(handle)
    assert record.terminal == Failed(NO_WORKSPACE_HELP)
    assert view.status == "failed" and view.state["deadline_at"] is not None


async def test_stopping_a_task_settles_it_cancelled_and_closes_the_model_stream(data, workspace):
    with ScriptedModel([hold()]) as model, trio.fail_after(10):
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            tasks = Tasks(rt)
            handle = await tasks.spawn(spec(model))
            await model.wait_for_requests(1)
            assert await rt.stop(handle) == "cancelled"
            assert await tasks.terminal(handle) == Cancelled()
            await model.wait_for_disconnects(1)
    assert len(model.requests) == 1


@pytest.mark.skipif(
    not hasattr(callboard.Runtime, "tasks"), reason="rt.tasks is not on the runtime yet"
)
async def test_rt_tasks_runs_a_built_in_task_from_the_top_level_names(tmp_path, workspace):
    with ScriptedModel([text("done")]) as model, trio.fail_after(10):
        async with callboard.open_runtime(tmp_path / "data", kinds=kinds_in(workspace)) as rt:
            tasks = rt.tasks
            run = callboard.RunSpec(PROMPT, base_url=model.base_url, model="m", approve="always")
            handle = await tasks.spawn(run)
            outcome = await tasks.wait(str(handle), timeout=5)
    assert outcome == callboard.Settled(
        callboard.TaskRecord(handle, "succeeded", callboard.Succeeded("done"), "done")
    )
    assert rt.tasks is tasks
