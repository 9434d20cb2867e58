"""The ``session`` kind against a scripted OpenAI-compatible model on loopback.

Each test runs a real runtime on a ``tmp_path`` data directory and a real
model server (``scripted_model``). Counts are exact: requests the model saw,
how often the prompt is in the last request, what the file on disk holds.
Recovery after a restart or a SIGKILL is in ``test_session_recovery``.
"""

from __future__ import annotations

import sqlite3

import trio
import trio.testing
from scripted_model import ScriptedModel, hold, text, tool_call
from session_helpers import (
    ADDRESS,
    KINDS,
    NAME,
    WRITE_NOTE,
    Watch,
    gate,
    occurrences,
    pid_from,
    slow_command,
    spec,
)
from shell_helpers import marked_processes, no_leaked_job_processes  # noqa: F401

import callboard
from callboard.agent import CANCELLED_RESULT, INTERRUPTED_RESULT, NOT_RUN_RESULT
from callboard.tools._procs import wait_group_gone


async def test_a_prompt_runs_a_turn_that_writes_a_file_through_a_tool_and_answers(data, workspace):
    with ScriptedModel([WRITE_NOTE, text("the note is written")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", {"text": "write the note"})
                done = await watch.until("turn.completed")
            view = await rt.inspect(ADDRESS)
    assert done.data["answer"] == "the note is written"
    assert watch.types() == [
        "queue.enqueued", "queue.dequeued", "turn.started", "assistant.message",
        "tool.started", "tool.finished", "assistant.message", "turn.completed",
    ]  # fmt: skip
    assert len(model.requests) == 2
    last = model.requests[1]
    assert [m["role"] for m in last["messages"]] == ["system", "user", "assistant", "tool"]
    assert occurrences(last, "write the note") == 1
    assert (workspace / "note.txt").read_text() == "once"
    assert watch.of("tool.finished")[0]["status"] == "ok"
    assert view.state["active"] is None and view.state["queue"] == []


async def test_turn_deltas_are_ephemeral_and_the_finished_message_is_durable(data, workspace):
    with ScriptedModel([text("Hello, world", pieces=3)]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "hi")
                await watch.until("turn.completed")
    deltas = [e for e in watch.seen if e.type == "turn.delta"]
    assert "".join(e.data["text"] for e in deltas) == "Hello, world"
    assert all(e.seq is None for e in deltas)
    assert watch.of("assistant.message")[0]["content"] == "Hello, world"


async def test_cancel_during_a_streamed_answer_ends_the_turn_and_closes_the_stream(data, workspace):
    script = [hold(first_delta="Hel"), text("second answer")]
    with ScriptedModel(script) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "first question")
                await watch.until("turn.delta")
                await rt.send(ADDRESS, "cancel")
                cancelled = await watch.until("turn.cancelled")
                await model.wait_for_disconnects(1)
                await rt.send(ADDRESS, "prompt", "second question")
                done = await watch.until("turn.completed")
    assert cancelled.data["turn_id"] == "turn-1"
    assert done.data == {"turn_id": "turn-2", "prompt_id": "p2", "answer": "second answer"}
    assert "assistant.message" not in watch.types()[: watch.types().index("turn.cancelled")]
    assert model.disconnects == 1
    assert len(model.requests) == 2
    assert occurrences(model.requests[1], "first question") == 1
    assert occurrences(model.requests[1], "second question") == 1


async def test_an_approval_asked_then_answered_runs_the_tool_once(data, workspace):
    with ScriptedModel([WRITE_NOTE, text("written")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace, approvals="ask"), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "write the note")
                asked = await watch.until("approval.requested")
                waiting = await rt.inspect(ADDRESS)
                assert not (workspace / "note.txt").exists()
                await rt.send(ADDRESS, "approve", {"call_id": asked.data["call_id"]})
                await watch.until("turn.completed")
    (call,) = waiting.state["active"]["calls"]
    assert (call["approval"], call["status"]) == ("asked", "pending")
    assert watch.of("approval.answered") == [
        {"turn_id": "turn-1", "prompt_id": "p1", "call_id": asked.data["call_id"], "approved": True}
    ]
    assert watch.types().count("tool.started") == 1
    assert (workspace / "note.txt").read_text() == "once"
    assert len(model.requests) == 2


async def test_a_denied_approval_tells_the_model_and_runs_nothing(data, workspace):
    with ScriptedModel([WRITE_NOTE, text("ok, not writing")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace, approvals="ask"), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "write the note")
                await watch.until("approval.requested")
                await rt.send(ADDRESS, "approve", {"approved": False})
                await watch.until("turn.completed")
    assert "tool.started" not in watch.types()
    assert not (workspace / "note.txt").exists()
    tool_message = model.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["content"].startswith("denied")


async def test_a_never_policy_refuses_the_tool_and_tells_the_model(data, workspace):
    with ScriptedModel([WRITE_NOTE, text("refused")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            approvals = {"write_file": "never"}
            await rt.spawn("session", spec(model, workspace, approvals=approvals), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "write the note")
                await watch.until("turn.completed")
    assert watch.of("tool.finished")[0]["status"] == "refused"
    assert not (workspace / "note.txt").exists()
    assert "never allows write_file" in model.requests[1]["messages"][-1]["content"]


async def test_pause_lets_the_running_turn_finish_and_holds_the_queue(data, workspace):
    released, first = gate()
    with ScriptedModel([first, text("second done")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "first")
                await model.wait_for_requests(1)
                await rt.send(ADDRESS, "prompt", "second")
                await rt.send(ADDRESS, "pause")
                await watch.until("session.paused")
                released.set()
                await watch.until("turn.completed")
                held = await rt.inspect(ADDRESS)
                await rt.send(ADDRESS, "resume")
                done = await watch.until("turn.completed", count=2)
    assert [q["text"] for q in held.state["queue"]] == ["second"]
    assert held.state["active"] is None and held.state["paused"] is True
    assert done.data["answer"] == "second done"
    types = watch.types()
    second_dequeued = types.index("queue.dequeued", types.index("turn.completed"))
    assert types.index("session.resumed") < second_dequeued
    assert len(model.requests) == 2


async def test_queued_prompts_can_be_moved_and_removed_while_a_turn_runs(data, workspace):
    released, first = gate()
    script = [first, text("D done"), text("B done")]
    with ScriptedModel(script) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "A")
                await model.wait_for_requests(1)
                for prompt in "BCD":
                    await rt.send(ADDRESS, "prompt", prompt)
                await rt.send(ADDRESS, "queue.move", {"id": "p4", "to": 0})
                await rt.send(ADDRESS, "queue.remove", {"id": "p3"})
                await rt.send(ADDRESS, "queue.remove", {"id": "p9"})
                await watch.until("message.rejected")
                released.set()
                await watch.until("turn.completed", count=3)
    assert [e["prompt"] for e in watch.of("turn.started")] == ["A", "D", "B"]
    assert watch.of("queue.moved") == [{"id": "p4", "position": 0}]
    assert watch.of("queue.removed") == [{"id": "p3"}]
    assert "p9" in watch.of("message.rejected")[0]["reason"]
    assert len(model.requests) == 3


async def test_a_dequeued_prompt_is_recorded_as_active_when_its_turn_is_announced(data, workspace):
    with ScriptedModel([hold()]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "first")
                await watch.until("turn.started")
                view = await rt.inspect(ADDRESS)
                await model.wait_for_requests(1)
    assert view.state["active"]["prompt"] == "first"
    assert view.state["queue"] == []
    assert INTERRUPTED_RESULT  # the name is public for clients that show it


async def test_cancel_during_a_running_tool_stops_its_command(data, workspace):
    fifo, arguments = slow_command(workspace)
    with ScriptedModel([tool_call("shell_run", arguments)]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "run the slow thing")
                await watch.until("tool.started")
                pid = await pid_from(fifo)
                await rt.send(ADDRESS, "cancel")
                await watch.until("turn.cancelled")
                await wait_group_gone(pid)
                finished = await watch.until("tool.finished")
    assert (finished.data["status"], finished.data["result"]) == ("interrupted", CANCELLED_RESULT)
    assert (workspace / "runs.txt").read_text() == "run\n"
    assert len(model.requests) == 1


async def test_a_prompt_sent_twice_with_one_key_is_queued_once(data, workspace):
    with ScriptedModel([text("once")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                first = await rt.send(ADDRESS, "prompt", "hello", key="k1")
                again = await rt.send(ADDRESS, "prompt", "hello", key="k1")
                await watch.until("turn.completed")
    assert again == callboard.Ack(first.seq, duplicate=True)
    assert watch.types().count("queue.enqueued") == 1
    assert len(model.requests) == 1


async def test_nothing_is_announced_while_the_commit_that_dequeues_a_prompt_is_held_up(
    data, workspace
):
    with ScriptedModel([hold()]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "pause")
                await rt.send(ADDRESS, "prompt", "first")
                await watch.until("queue.enqueued")
                before = len(watch.seen)
                # Another writer holds the database (well under its 5 s busy timeout).
                blocker = sqlite3.connect(data / "callboard.sqlite3", isolation_level=None)
                try:
                    await rt.send(ADDRESS, "resume")
                    # No checkpoint since the ack: the session has not handled it yet.
                    blocker.execute("BEGIN IMMEDIATE")
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(watch.until, "turn.started")
                        await trio.testing.wait_all_tasks_blocked()
                        announced_while_held = watch.seen[before:]
                        held = await rt.inspect(ADDRESS)
                        blocker.execute("ROLLBACK")
                finally:
                    blocker.close()
                started = await watch.until("turn.started")
                active = await rt.inspect(ADDRESS)  # the model holds its answer
                await model.wait_for_requests(1)
    assert announced_while_held == []
    assert [q["text"] for q in held.state["queue"]] == ["first"]
    assert (held.state["active"], held.state["paused"]) == (None, True)
    assert watch.types()[2:5] == ["session.resumed", "queue.dequeued", "turn.started"]
    assert active.state["active"]["turn_id"] == started.data["turn_id"]
    assert len(model.requests) == 1


async def test_stopping_a_session_mid_turn_cancels_the_turn_before_it_stops(data, workspace):
    with ScriptedModel([hold()]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "first")
                await model.wait_for_requests(1)
                assert await rt.stop(ADDRESS) == "stopped"
                await watch.until("actor.stopped")
                await model.wait_for_disconnects(1)
    assert watch.types()[-1] == "turn.cancelled"
    assert watch.of("turn.cancelled")[0]["reason"] == "the session was stopped"
    assert len(model.requests) == 1


async def test_cancel_while_an_approval_waits_ends_the_turn_and_the_call_never_runs(
    data, workspace
):
    with ScriptedModel([WRITE_NOTE, text("next")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace, approvals="ask"), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "write the note")
                asked = await watch.until("approval.requested")
                await rt.send(ADDRESS, "cancel")
                await watch.until("turn.cancelled")
                await rt.send(ADDRESS, "approve", {"call_id": asked.data["call_id"]})
                rejected = await watch.until("message.rejected")
                await rt.send(ADDRESS, "prompt", "something else")
                await watch.until("turn.completed")
    assert "is waiting for approval" in rejected.data["reason"]
    assert "tool.started" not in watch.types()
    assert not (workspace / "note.txt").exists()
    assert model.requests[1]["messages"][3] == {
        "role": "tool",
        "tool_call_id": asked.data["call_id"],
        "content": NOT_RUN_RESULT,
    }
    assert occurrences(model.requests[1], "write the note") == 1


async def test_messages_a_session_cannot_apply_are_rejected_and_change_nothing(data, workspace):
    with ScriptedModel([]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                for type, body in [
                    ("cancel", None),
                    ("prompt", {"text": "  "}),
                    ("queue.move", {"id": "p1", "to": 0}),
                    ("approve", {"call_id": "call_1"}),
                    ("dance", None),
                ]:
                    await rt.send(ADDRESS, type, body)
                await watch.until("message.rejected", count=5)
            view = await rt.inspect(ADDRESS)
    assert [e["type"] for e in watch.of("message.rejected")] == [
        "cancel", "prompt", "queue.move", "approve", "dance",
    ]  # fmt: skip
    assert watch.types() == ["message.rejected"] * 5
    assert (view.state["queue"], view.state["active"], view.restarts) == ([], None, 0)
    assert model.requests == []
