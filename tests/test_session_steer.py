"""A prompt's mode against a running turn: ``steer`` joins it at its next model call,
``interrupt`` cancels it and starts its own turn, ``queue`` (the default) waits.

Each test runs a real runtime on a ``tmp_path`` data directory and the scripted
model on loopback. The order is the test's: a model answer is held until the
test releases it, or the turn waits on an approval, or a tool blocks in a real
``/bin/sh``. Recovery of a steer after a SIGKILL is in ``test_session_steer_recovery``.
"""

from __future__ import annotations

import trio
from scripted_model import ScriptedModel, hold, text, tool_call
from session_helpers import (
    ADDRESS,
    KINDS,
    NAME,
    WRITE_NOTE,
    Watch,
    occurrences,
    pid_from,
    slow_command,
    spec,
)
from shell_helpers import marked_processes, no_leaked_job_processes  # noqa: F401
from test_session_jobs import held

import callboard
from callboard.agent import CANCELLED_RESULT
from callboard.tools._procs import wait_group_gone

STEER = "also say which file you wrote"


def steer(text: str) -> dict[str, str]:
    return {"text": text, "mode": "steer"}


async def test_a_steer_sent_during_a_tool_round_joins_the_turn_at_its_next_model_call(
    data, workspace
):
    with ScriptedModel([WRITE_NOTE, text("wrote note.txt")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace, approvals="ask"), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "write the note")
                asked = await watch.until("approval.requested")
                await rt.send(ADDRESS, "prompt", steer(STEER))
                accepted = await watch.until("steer.accepted")
                waiting = await rt.inspect(ADDRESS)
                await rt.send(ADDRESS, "approve", {"call_id": asked.data["call_id"]})
                done = await watch.until("turn.completed")
            view = await rt.inspect(ADDRESS)
    assert accepted.data == {"turn_id": "turn-1", "prompt_id": "p1", "id": "p2", "text": STEER}
    assert waiting.state["steering"] == [{"id": "p2", "text": STEER}]
    assert watch.of("turn.steered") == [
        {"turn_id": "turn-1", "prompt_id": "p1", "id": "p2", "text": STEER}
    ]
    types = watch.types()
    assert types.index("tool.finished") < types.index("turn.steered")
    assert types.count("turn.started") == 1 and types.count("queue.enqueued") == 1
    assert done.data["answer"] == "wrote note.txt"
    assert len(model.requests) == 2
    assert occurrences(model.requests[0], STEER) == 0
    last = model.requests[1]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "user"]
    assert last[-1]["content"] == STEER
    assert occurrences(model.requests[1], STEER) == 1
    assert view.state["steering"] == [] and view.state["active"] is None


async def test_a_steer_sent_while_the_model_answers_with_text_continues_that_turn(data, workspace):
    released, first = held(text("first answer"))
    with ScriptedModel([first, text("second answer")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "answer me")
                await model.wait_for_requests(1)
                await rt.send(ADDRESS, "prompt", steer(STEER))
                await watch.until("steer.accepted")
                released.set()
                done = await watch.until("turn.completed")
    assert done.data == {"turn_id": "turn-1", "prompt_id": "p1", "answer": "second answer"}
    types = watch.types()
    assert types.count("turn.started") == 1 and types.count("turn.completed") == 1
    assert types.count("turn.steered") == 1
    assert len(model.requests) == 2
    last = model.requests[1]["messages"]
    assert [m["role"] for m in last[-3:]] == ["user", "assistant", "user"]
    assert last[-2]["content"] == "first answer" and last[-1]["content"] == STEER
    assert occurrences(model.requests[1], STEER) == 1


async def test_a_steer_to_an_idle_session_starts_a_turn_like_any_prompt(data, workspace):
    with ScriptedModel([text("hello")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", steer("hi"))
                done = await watch.until("turn.completed")
    assert watch.types() == [
        "queue.enqueued", "queue.dequeued", "turn.started", "assistant.message", "turn.completed",
    ]  # fmt: skip
    assert done.data["answer"] == "hello"
    assert len(model.requests) == 1


async def test_a_prompt_in_queue_mode_waits_for_the_running_turn_as_before(data, workspace):
    released, first = held(text("first done"))
    with ScriptedModel([first, text("second done")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "first")
                await model.wait_for_requests(1)
                await rt.send(ADDRESS, "prompt", {"text": "second", "mode": "queue"})
                queued = await watch.until("queue.enqueued", 2)
                released.set()
                await watch.until("turn.completed", 2)
    assert queued.data == {"id": "p2", "text": "second", "position": 0}
    assert [e["answer"] for e in watch.of("turn.completed")] == ["first done", "second done"]
    assert [e["prompt"] for e in watch.of("turn.started")] == ["first", "second"]
    assert "turn.steered" not in watch.types() and "steer.accepted" not in watch.types()
    assert len(model.requests) == 2
    assert occurrences(model.requests[0], "second") == 0


async def test_an_unknown_mode_is_rejected_naming_the_modes_and_changes_nothing(data, workspace):
    with ScriptedModel([]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                ack = await rt.send(ADDRESS, "prompt", {"text": "hi", "mode": "now"})
                rejected = await watch.until("message.rejected")
                await rt.wait_handled(ADDRESS, ack.seq)
            view = await rt.inspect(ADDRESS)
    assert rejected.data == {
        "seq": ack.seq,
        "type": "prompt",
        "reason": "the body of 'prompt' to session/s1: $.mode must be 'queue', 'steer' or "
        "'interrupt', got \"now\" (a string)",
    }
    assert watch.types() == ["message.rejected"]
    assert view.state["queue"] == [] and view.state["prompts"] == 0
    assert model.requests == []


async def test_interrupt_stops_a_turn_blocked_in_a_tool_and_runs_the_new_prompt(data, workspace):
    fifo, arguments = slow_command(workspace)
    script = [tool_call("shell_run", arguments), text("stopped it")]
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "run the slow thing")
                pid = await pid_from(fifo)
                await rt.send(ADDRESS, "prompt", {"text": "stop, do this", "mode": "interrupt"})
                interrupted = await watch.until("turn.interrupted")
                await wait_group_gone(pid)
                done = await watch.until("turn.completed")
    assert interrupted.data == {
        "turn_id": "turn-1", "prompt_id": "p1", "by": "p2", "reason": "interrupted by p2",
    }  # fmt: skip
    assert watch.of("tool.finished")[0]["status"] == "interrupted"
    assert done.data == {"turn_id": "turn-2", "prompt_id": "p2", "answer": "stopped it"}
    assert [e["prompt"] for e in watch.of("turn.started")] == [
        "run the slow thing",
        "stop, do this",
    ]
    assert "turn.completed" not in watch.types()[: watch.types().index("turn.interrupted")]
    assert (workspace / "runs.txt").read_text() == "run\n"
    assert len(model.requests) == 2
    last = model.requests[1]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "user"]
    assert last[-2]["content"] == CANCELLED_RESULT
    assert occurrences(model.requests[1], "stop, do this") == 1


async def test_interrupt_closes_a_slow_model_stream_and_goes_before_the_queued_prompts(
    data, workspace
):
    script = [hold(first_delta="Hel"), text("interrupting answer"), text("queued answer")]
    with ScriptedModel(script) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "first")
                await watch.until("turn.delta")
                await rt.send(ADDRESS, "prompt", "queued")
                await rt.send(ADDRESS, "prompt", {"text": "now this", "mode": "interrupt"})
                await watch.until("turn.interrupted")
                await model.wait_for_disconnects(1)
                await watch.until("turn.completed", 2)
    assert [e["prompt"] for e in watch.of("turn.started")] == ["first", "now this", "queued"]
    assert [e["answer"] for e in watch.of("turn.completed")] == [
        "interrupting answer", "queued answer",
    ]  # fmt: skip
    assert "turn.cancelled" not in watch.types()
    assert model.disconnects == 1
    assert len(model.requests) == 3
    assert occurrences(model.requests[1], "first") == 1
    assert occurrences(model.requests[1], "now this") == 1
    assert occurrences(model.requests[1], "queued") == 0


async def test_a_steer_the_cancelled_turn_never_took_goes_back_to_the_queue(data, workspace):
    with ScriptedModel([WRITE_NOTE, text("steer answered")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace, approvals="ask"), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "write the note")
                await watch.until("approval.requested")
                await rt.send(ADDRESS, "prompt", steer(STEER))
                await watch.until("steer.accepted")
                await rt.send(ADDRESS, "cancel")
                await watch.until("turn.cancelled")
                done = await watch.until("turn.completed")
    types = watch.types()
    assert types.index("turn.cancelled") < types.index(
        "queue.enqueued", types.index("steer.accepted")
    )
    assert watch.of("queue.enqueued")[-1] == {"id": "p2", "text": STEER, "position": 0}
    assert done.data == {"turn_id": "turn-2", "prompt_id": "p2", "answer": "steer answered"}
    assert "turn.steered" not in types
    assert not (workspace / "note.txt").exists()
    assert len(model.requests) == 2
    assert occurrences(model.requests[1], STEER) == 1


async def test_an_interrupt_to_a_paused_session_ends_the_turn_and_its_prompt_waits_for_resume(
    data, workspace
):
    with ScriptedModel([hold(), text("after resume")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "first")
                await model.wait_for_requests(1)
                await rt.send(ADDRESS, "pause")
                ack = await rt.send(ADDRESS, "prompt", {"text": "instead", "mode": "interrupt"})
                await rt.wait_handled(ADDRESS, ack.seq)
                await model.wait_for_disconnects(1)
                held_view = await rt.inspect(ADDRESS)
                await rt.send(ADDRESS, "resume")
                done = await watch.until("turn.completed")
    assert held_view.state["active"] is None and held_view.state["paused"] is True
    assert [q["text"] for q in held_view.state["queue"]] == ["instead"]
    assert watch.of("turn.interrupted")[0]["by"] == "p2"
    assert done.data == {"turn_id": "turn-2", "prompt_id": "p2", "answer": "after resume"}
    types = watch.types()
    assert types.index("session.resumed") < types.index(
        "turn.started", types.index("turn.interrupted")
    )
    assert len(model.requests) == 2
