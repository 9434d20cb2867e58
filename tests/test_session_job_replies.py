"""Machine events reach a session's running turn: one reply for jobs that end together.

When the model answers with text while machine events wait, the turn goes on
with them instead of ending, so a job that ends during a reply's last model
call joins that reply. Each job waits for a file the test creates, and the
model's answers are held until the test releases them: the order is the
test's, never a clock's.
"""

from __future__ import annotations

import trio
from scripted_model import ScriptedModel, hold, text, tool_call, tool_calls
from session_helpers import ADDRESS, KINDS, NAME, Watch, killed_at_exit, spec
from shell_helpers import JOBS_DIR, marked_processes, no_leaked_job_processes  # noqa: F401
from test_session_jobs import JOB_ID, WAIT_GO, background, held

import callboard


async def test_two_jobs_finishing_together_start_one_reply(data, workspace, settings):
    released, first_answer = held(text("both are running"))
    script = [
        tool_calls([
            ("shell_run", {"command": WAIT_GO + "echo one", "background": True}),
            ("shell_run", {"command": WAIT_GO + "echo two", "background": True}),
        ]),
        first_answer,
        text("both finished"),
    ]  # fmt: skip
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS, settings=settings) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "start both")
                await model.wait_for_requests(2)
                (workspace / "go").touch()
                await watch.until("job.ended", 2)
                released.set()
                completed = await watch.until("turn.completed")
                view = await rt.inspect(ADDRESS)
    ids = sorted(view.state["jobs"])
    assert sorted(e["job_id"] for e in watch.of("job.ended")) == ids
    assert [e["delivery"] for e in watch.of("job.ended")] == ["running turn", "running turn"]
    assert len(watch.of("turn.started")) == 1
    assert completed.data["answer"] == "both finished"
    assert len(model.requests) == 3
    last = model.requests[2]["messages"]
    assert [m["role"] for m in last[-2:]] == ["assistant", "user"]
    assert last[-2]["content"] == "both are running"
    assert sorted(JOB_ID.findall(last[-1]["content"])) == ids
    assert last[-1]["content"].count("[machine event]") == 2
    assert view.state["machine_events"] == [] and view.state["active"] is None


async def test_a_job_ending_during_the_last_model_call_of_a_reply_joins_that_reply(
    data, workspace, settings
):
    released, first_reply = held(text("one finished"))
    script = [
        tool_calls([
            ("shell_run", {"command": "while [ ! -e go-one ]; do sleep 0.02; done; echo one",
                           "background": True}),
            ("shell_run", {"command": "while [ ! -e go-two ]; do sleep 0.02; done; echo two",
                           "background": True}),
        ]),
        text("both are running"),
        first_reply,
        text("both finished"),
    ]  # fmt: skip
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS, settings=settings) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "start both")
                await watch.until("turn.completed")
                (workspace / "go-one").touch()
                await model.wait_for_requests(3)  # the reply to job one is being asked
                (workspace / "go-two").touch()
                await watch.until("job.ended", 2)
                released.set()
                completed = await watch.until("turn.completed", 2)
                view = await rt.inspect(ADDRESS)
    first, second = (e["job_id"] for e in watch.of("job.ended"))
    assert [e["delivery"] for e in watch.of("job.ended")] == ["new turn", "running turn"]
    replies = [e for e in watch.of("turn.started") if e["prompt_id"] == ""]
    assert len(replies) == 1
    assert len(watch.of("turn.started")) == 2
    assert completed.data == {"turn_id": "turn-2", "prompt_id": "", "answer": "both finished"}
    assert len(model.requests) == 4
    asked = model.requests[3]["messages"]
    assert [m["role"] for m in asked[-4:]] == ["assistant", "user", "assistant", "user"]
    assert JOB_ID.findall(asked[-3]["content"]) == [first]
    assert asked[-2]["content"] == "one finished"
    assert JOB_ID.findall(asked[-1]["content"]) == [second]
    assert asked[-1]["content"].startswith(f"[machine event] background job {second} finished")
    assert watch.of("machine_event.delivered") == [
        {"turn_id": "turn-2", "prompt_id": "", "count": 1},
        {"turn_id": "turn-2", "prompt_id": "", "count": 1},
    ]
    assert view.state["machine_events"] == [] and view.state["active"] is None


async def test_a_busy_session_gets_the_machine_event_in_its_running_turn(data, workspace, settings):
    released, listing = held(tool_call("list_dir", {}))
    script = [background(WAIT_GO + "echo ready"), listing, text("saw it finish")]
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS, settings=settings) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "start it and look around")
                await model.wait_for_requests(2)
                (workspace / "go").touch()
                ended = await watch.until("job.ended")
                released.set()
                await watch.until("turn.completed")
    job_id = ended.data["job_id"]
    assert ended.data == {"job_id": job_id, "status": "exited 0", "delivery": "running turn"}
    assert len(watch.of("turn.started")) == 1
    assert len(model.requests) == 3
    last = model.requests[2]["messages"]
    assert [m["role"] for m in last[-3:]] == ["assistant", "tool", "user"]
    assert last[-1]["content"].startswith(f"[machine event] background job {job_id} finished")
    assert "[machine event]" not in str(model.requests[1]["messages"])
    assert watch.of("machine_event.delivered") == [
        {"turn_id": "turn-1", "prompt_id": "p1", "count": 1}
    ]


async def test_a_turn_continued_for_a_machine_event_is_taken_up_after_a_kill_without_a_new_turn(
    data, workspace
):
    released, started = held(text("started"))
    script = [background(WAIT_GO + "echo ready"), started, hold(), text("it is ready")]
    with ScriptedModel(script) as model, trio.fail_after(60):
        async with killed_at_exit(data, spec(model, workspace), "start it") as child:
            await model.wait_for_requests(2)
            (workspace / "go").touch()
            await child.until_event("job.ended")
            released.set()
            await model.wait_for_requests(3)  # the continued turn asks again, and is held
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                completed = await watch.until("turn.completed")
            view = await rt.inspect(ADDRESS)
    [job_id] = view.state["jobs"]
    assert completed.data == {"turn_id": "turn-1", "prompt_id": "p1", "answer": "it is ready"}
    assert len(watch.of("turn.started")) == 1
    assert watch.of("turn.resumed") == [
        {"turn_id": "turn-1", "prompt_id": "p1", "prompt": "start it"}
    ]
    assert len(model.requests) == 4
    assert model.requests[3]["messages"] == model.requests[2]["messages"]
    asked = model.requests[3]["messages"]
    assert [m["role"] for m in asked[-2:]] == ["assistant", "user"]
    assert asked[-2]["content"] == "started"
    assert asked[-1]["content"].startswith(f"[machine event] background job {job_id} finished")
    assert str(asked).count("[machine event]") == 1
    assert view.state["machine_events"] == [] and view.state["active"] is None
