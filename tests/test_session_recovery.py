"""Sessions after a restart: a second runtime on the same data directory, after a
clean close (which cancels the turn where it stands) or a SIGKILL of a real
child process (``session_child.py``). The prompt is asked once more at most,
a tool never runs twice, and an approval outlives the process that asked it.
Each test runs over both model wires (``wires``): the journal is the same.
"""

from __future__ import annotations

import pytest
import trio
from scripted_model import ScriptedModel, hold, text, tool_call
from session_helpers import (
    ADDRESS,
    KINDS,
    NAME,
    WRITE_NOTE,
    Watch,
    killed_at_exit,
    occurrences,
    pid_from,
    slow_command,
    spec,
)
from shell_helpers import marked_processes, no_leaked_job_processes  # noqa: F401
from wires import WIRES

import callboard
from callboard.agent import INTERRUPTED_RESULT
from callboard.tools._procs import wait_group_gone

pytestmark = pytest.mark.parametrize("wire", WIRES)


async def test_an_approval_asked_before_a_restart_is_answered_after_it_and_runs_once(
    data, workspace, wire
):
    with ScriptedModel([WRITE_NOTE, text("written")], wire=wire) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace, approvals="ask"), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                await rt.send(ADDRESS, "prompt", "write the note")
                asked = await Watch(sub).until("approval.requested")
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await watch.until("turn.resumed")
                await rt.send(ADDRESS, "approve", {"call_id": asked.data["call_id"]})
                await watch.until("turn.completed")
    assert watch.types().count("approval.requested") == 1
    assert watch.types().count("tool.started") == 1
    assert (workspace / "note.txt").read_text() == "once"
    assert len(model.requests) == 2
    assert occurrences(model.chat_requests[1], "write the note") == 1


async def test_a_restart_while_the_model_answers_the_prompt_asks_it_exactly_once_more(
    data, workspace, wire
):
    with (
        ScriptedModel([hold(), text("after the restart")], wire=wire) as model,
        trio.fail_after(20),
    ):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            await rt.send(ADDRESS, "prompt", "write the note")
            await model.wait_for_requests(1)
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                done = await watch.until("turn.completed")
    assert done.data["answer"] == "after the restart"
    assert watch.types().count("turn.started") == 1
    assert watch.types().count("turn.resumed") == 1
    assert len(model.requests) == 2
    assert occurrences(model.chat_requests[1], "write the note") == 1


async def test_a_restart_mid_tool_round_continues_the_turn_without_rerunning_the_tool(
    data, workspace, wire
):
    script = [WRITE_NOTE, hold(), text("the note is written")]
    with ScriptedModel(script, wire=wire) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            await rt.send(ADDRESS, "prompt", "write the note")
            await model.wait_for_requests(2)
        (workspace / "note.txt").write_text("changed after the tool ran")
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                done = await watch.until("turn.completed")
    assert done.data["answer"] == "the note is written"
    assert watch.types().count("tool.started") == 1
    assert (workspace / "note.txt").read_text() == "changed after the tool ran"
    assert len(model.requests) == 3
    last = model.chat_requests[2]
    assert occurrences(last, "write the note") == 1
    assert [m["role"] for m in last["messages"]] == ["system", "user", "assistant", "tool"]
    assert last["messages"][-1]["content"] == "created 'note.txt': 4 bytes"


async def test_with_on_restart_interrupt_a_cut_off_turn_is_reported_and_the_queue_waits(
    data, workspace, wire
):
    with ScriptedModel([hold(), text("second")], wire=wire) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace, on_restart="interrupt"), name=NAME)
            await rt.send(ADDRESS, "prompt", "first")
            await model.wait_for_requests(1)
            ack = await rt.send(ADDRESS, "prompt", "queued behind")
            await rt.wait_handled(ADDRESS, ack.seq)
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                interrupted = await watch.until("turn.interrupted")
                await watch.until("session.paused")
                view = await rt.inspect(ADDRESS)
                assert len(model.requests) == 1
                await rt.send(ADDRESS, "resume")
                done = await watch.until("turn.completed")
    assert interrupted.data == {"turn_id": "turn-1", "prompt_id": "p1", "prompt": "first"}
    assert [q["text"] for q in view.state["queue"]] == ["queued behind"]
    assert view.state["active"] is None and view.state["paused"] is True
    assert done.data["prompt_id"] == "p2"
    assert len(model.requests) == 2
    assert occurrences(model.chat_requests[1], "first") == 1


async def test_a_tool_cut_off_by_a_restart_is_reported_interrupted_and_not_run_again(
    data, workspace, wire
):
    fifo, arguments = slow_command(workspace)
    script = [tool_call("shell_run", arguments), text("I will check")]
    with ScriptedModel(script, wire=wire) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            await rt.send(ADDRESS, "prompt", "run the slow thing")
            pid = await pid_from(fifo)
        await wait_group_gone(pid)
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                done = await watch.until("turn.completed")
    assert done.data["answer"] == "I will check"
    assert watch.types().count("tool.started") == 1
    assert watch.of("tool.finished")[0]["status"] == "interrupted"
    assert (workspace / "runs.txt").read_text() == "run\n"
    assert len(model.requests) == 2
    last = model.chat_requests[1]
    assert last["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1_0",
        "content": INTERRUPTED_RESULT,
    }
    assert occurrences(last, "run the slow thing") == 1


async def test_sigkill_mid_tool_round_continues_the_turn_without_rerunning_the_tool(
    data, workspace, wire
):
    script = [WRITE_NOTE, hold(), text("the note is written")]
    with ScriptedModel(script, wire=wire) as model, trio.fail_after(30):
        async with killed_at_exit(data, spec(model, workspace), "write the note") as child:
            await child.until_event("tool.finished")
            await model.wait_for_requests(2)
        assert child.process.returncode == -9
        (workspace / "note.txt").write_text("changed after the tool ran")
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                done = await watch.until("turn.completed")
    assert done.data["answer"] == "the note is written"
    assert watch.types().count("tool.started") == 1
    assert (workspace / "note.txt").read_text() == "changed after the tool ran"
    assert len(model.requests) == 3
    assert occurrences(model.chat_requests[2], "write the note") == 1
    assert model.chat_requests[2]["messages"][-1]["content"] == "created 'note.txt': 4 bytes"


async def test_sigkill_while_the_model_answers_the_prompt_asks_it_exactly_once_more(
    data, workspace, wire
):
    with ScriptedModel([hold(), text("after the kill")], wire=wire) as model, trio.fail_after(30):
        async with killed_at_exit(data, spec(model, workspace), "write the note") as child:
            await child.until_event("turn.started")
            await model.wait_for_requests(1)
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                done = await watch.until("turn.completed")
    assert done.data["answer"] == "after the kill"
    assert watch.types().count("turn.started") == 1
    assert len(model.requests) == 2
    assert occurrences(model.chat_requests[1], "write the note") == 1


async def test_an_approval_asked_before_a_sigkill_is_answered_after_it_and_runs_once(
    data, workspace, wire
):
    with ScriptedModel([WRITE_NOTE, text("written")], wire=wire) as model, trio.fail_after(30):
        the_spec = spec(model, workspace, approvals="ask")
        async with killed_at_exit(data, the_spec, "write the note") as child:
            await child.until_event("approval.requested")
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                asked = await watch.until("approval.requested")
                await watch.until("turn.resumed")
                await rt.send(ADDRESS, "approve", {"call_id": asked.data["call_id"]})
                await watch.until("turn.completed")
    assert watch.types().count("approval.requested") == 1
    assert watch.types().count("tool.started") == 1
    assert (workspace / "note.txt").read_text() == "once"
    assert len(model.requests) == 2
