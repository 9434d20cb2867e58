"""Approvals with deadlines, and "allow this tool for the rest of the session".

A real runtime on a ``tmp_path`` data directory and the scripted model on
loopback. The runtime's wall clock is the test's (``Clock``): it stands
still until the test moves it past a deadline, so nothing waits on the time
itself, and a deadline passes while no runtime runs by opening the next one
with its clock further on. The timer service reads a moved clock at its next
recheck (``TIMER_RECHECK``); the tests wait for the events that follow.
Counts are exact: the requests the model saw, the runs of a tool, the
timers left in the store.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
import trio
from scripted_model import ScriptedModel, text, tool_call, tool_calls
from session_helpers import ADDRESS, KINDS, NAME, WRITE_NOTE, Watch, killed_at_exit, spec
from task_helpers import kinds_in
from task_helpers import spec as task_spec

import callboard
from callboard.agent import ToolDeadline
from callboard.agent._approval_deadlines import read_approvals

DENIED_BY_DEADLINE = (
    "denied: nobody answered the approval request for this write_file call before its "
    "deadline, so it was not run."
)


class Clock:
    """A wall clock that stands still until the test moves it."""

    def __init__(self, now: float | None = None) -> None:
        self.now = time.time() if now is None else now

    def __call__(self) -> float:
        return self.now


async def send_and_wait(rt: callboard.Runtime, type: str, body: object) -> callboard.MessageOutcome:
    """Send to the session and return how it took the message, as ``send --wait`` does."""
    head = await rt.head(ADDRESS)
    ack = await rt.send(ADDRESS, type, body)
    return await rt.wait_outcome(ADDRESS, ack.seq, head)


def timers_of(data: Path, address: str) -> list[tuple[str, str]]:
    """The (type, key) of the timers the store holds for ``address``."""
    with sqlite3.connect(data / "callboard.sqlite3") as db:
        rows = db.execute("SELECT type, key FROM timers WHERE address = ?", (address,))
        return [(type_, key) for type_, key in rows]


async def test_an_approval_nobody_answers_is_denied_at_its_deadline_and_the_model_is_told(
    data, workspace
):
    clock = Clock()
    the_spec = spec_asking(workspace, approval_timeout=30)
    with ScriptedModel([WRITE_NOTE, text("not written")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS, clock=clock) as rt:
            await rt.spawn("session", the_spec(model), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "write the note")
                asked = await watch.until("approval.requested")
                (pending,) = await rt.approvals(ADDRESS)
                clock.now += 31
                expired = await watch.until("approval.expired")
                await watch.until("turn.completed")
            after = await rt.approvals(ADDRESS)
    call_id = asked.data["call_id"]
    deadline_at = asked.data["deadline_at"]
    assert asked.data["timeout"] == 30 and asked.data["on_expiry"] == "deny"
    assert (pending.deadline_at, pending.on_expiry) == (deadline_at, "deny")
    assert deadline_at == pending.requested_at + 30
    assert expired.data == {
        "turn_id": "turn-1", "prompt_id": "p1", "call_id": call_id, "name": "write_file",
        "approved": False, "deadline_at": deadline_at, "on_expiry": "deny",
    }  # fmt: skip
    assert "tool.started" not in watch.types()
    assert "approval.answered" not in watch.types()
    assert not (workspace / "note.txt").exists()
    assert model.requests[1]["messages"][-1]["content"] == DENIED_BY_DEADLINE
    assert len(model.requests) == 2
    assert after == []


async def test_a_tools_own_deadline_with_default_approve_runs_the_call_once_at_expiry(
    data, workspace
):
    clock = Clock()
    approvals = {"write_file": {"approval": "ask", "timeout": 10, "default": "approve"}}
    with ScriptedModel([WRITE_NOTE, text("written")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS, clock=clock) as rt:
            await rt.spawn("session", spec(model, workspace, approvals=approvals), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "write the note")
                asked = await watch.until("approval.requested")
                clock.now += 10
                expired = await watch.until("approval.expired")
                await watch.until("turn.completed")
    assert (asked.data["timeout"], asked.data["on_expiry"]) == (10, "approve")
    assert expired.data["approved"] is True
    assert watch.types().count("tool.started") == 1
    assert (workspace / "note.txt").read_text() == "once"
    assert model.requests[1]["messages"][-1]["role"] == "tool"


async def test_an_approval_answered_before_its_deadline_leaves_no_timer_and_never_expires(
    data, workspace
):
    clock = Clock()
    the_spec = spec_asking(workspace, approval_timeout=30)
    script = [WRITE_NOTE, text("written"), text("second")]
    with ScriptedModel(script) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS, clock=clock) as rt:
            await rt.spawn("session", the_spec(model), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "write the note")
                asked = await watch.until("approval.requested")
                waiting = timers_of(data, ADDRESS)
                await rt.send(ADDRESS, "approve", {"call_id": asked.data["call_id"]})
                await watch.until("turn.completed")
                left = timers_of(data, ADDRESS)
                clock.now += 60  # past the deadline: a timer left behind would fire
                await rt.send(ADDRESS, "prompt", "and now?")
                await watch.until("turn.completed", 2)
        # And a runtime opened after the deadline finds nothing to expire either.
        async with callboard.open_runtime(data, kinds=KINDS, clock=clock) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                replay = Watch(sub)
                await replay.until("turn.completed", 2)
    assert waiting == [("approval.deadline", f"approval:turn-1:{asked.data['call_id']}")]
    assert left == []
    assert "approval.expired" not in watch.types() + replay.types()
    assert (workspace / "note.txt").read_text() == "once"
    assert len(model.requests) == 3


async def test_cancelling_a_turn_whose_approval_has_a_deadline_removes_its_timer(data, workspace):
    the_spec = spec_asking(workspace, approval_timeout=30)
    with ScriptedModel([WRITE_NOTE]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS, clock=Clock()) as rt:
            await rt.spawn("session", the_spec(model), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "write the note")
                await watch.until("approval.requested")
                waiting = timers_of(data, ADDRESS)
                await rt.send(ADDRESS, "cancel")
                await watch.until("turn.cancelled")
                left = timers_of(data, ADDRESS)
    assert len(waiting) == 1
    assert left == []


async def test_a_turn_interrupted_by_a_restart_takes_its_approvals_timer_with_it(data, workspace):
    clock = Clock()
    the_spec = spec_asking(workspace, approval_timeout=30, on_restart="interrupt")
    with ScriptedModel([WRITE_NOTE]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS, clock=clock) as rt:
            await rt.spawn("session", the_spec(model), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                await rt.send(ADDRESS, "prompt", "write the note")
                await Watch(sub).until("approval.requested")
        waiting = timers_of(data, ADDRESS)
        async with callboard.open_runtime(data, kinds=KINDS, clock=clock) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await watch.until("turn.interrupted")  # announced once committed
                left = timers_of(data, ADDRESS)
    assert len(waiting) == 1
    assert left == []
    assert "approval.expired" not in watch.types()
    assert len(model.requests) == 1


async def test_an_approval_whose_deadline_passed_while_no_runtime_ran_is_denied_on_the_next_start(
    data, workspace
):
    clock = Clock()
    the_spec = spec_asking(workspace, approval_timeout=300)
    with ScriptedModel([WRITE_NOTE, text("not written")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS, clock=clock) as rt:
            await rt.spawn("session", the_spec(model), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                await rt.send(ADDRESS, "prompt", "write the note")
                asked = await Watch(sub).until("approval.requested")
        clock.now += 3600  # the runtime is down while the deadline passes
        async with callboard.open_runtime(data, kinds=KINDS, clock=clock) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                expired = await watch.until("approval.expired")
                await watch.until("turn.completed")
    assert expired.data["call_id"] == asked.data["call_id"]
    assert expired.data["approved"] is False
    assert watch.types().count("approval.requested") == 1
    assert "tool.started" not in watch.types()
    assert model.requests[1]["messages"][-1]["content"] == DENIED_BY_DEADLINE
    assert len(model.requests) == 2
    assert timers_of(data, ADDRESS) == []


async def test_an_approval_asked_before_a_sigkill_takes_its_default_when_the_deadline_passed(
    data, workspace
):
    the_spec = spec_asking(workspace, approval_timeout=600, approval_default="approve")
    with ScriptedModel([WRITE_NOTE, text("written")]) as model, trio.fail_after(30):
        async with killed_at_exit(data, the_spec(model), "write the note") as child:
            await child.until_event("approval.requested")
        # The child ran on the real clock; this runtime opens an hour after it.
        later = Clock(time.time() + 3600)
        async with callboard.open_runtime(data, kinds=KINDS, clock=later) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                expired = await watch.until("approval.expired")
                await watch.until("turn.completed")
    assert expired.data["approved"] is True and expired.data["on_expiry"] == "approve"
    assert watch.types().count("approval.requested") == 1
    assert watch.types().count("tool.started") == 1
    assert (workspace / "note.txt").read_text() == "once"
    assert len(model.requests) == 2


WRITE_B = tool_call("write_file", {"path": "b.txt", "content": "two"}, "call_2")
WRITE_C = tool_call("write_file", {"path": "c.txt", "content": "three"}, "call_4")
ECHO = tool_call("shell_run", {"command": "echo hi"}, "call_3")


async def test_allowing_a_tool_for_the_session_skips_its_later_approvals_also_after_a_restart(
    data, workspace
):
    script = [
        tool_call("write_file", {"path": "note.txt", "content": "once"}, "call_1"),
        text("one"),
        tool_calls([WRITE_B, ECHO]),
        text("two"),
        WRITE_C,
        text("three"),
    ]
    the_spec = spec_asking(workspace)
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", the_spec(model), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "write the note")
                await watch.until("approval.requested")
                await rt.send(ADDRESS, "approve", {"call_id": "call_1", "scope": "session"})
                await watch.until("turn.completed")
                await rt.send(ADDRESS, "prompt", "write b and echo")
                second = await watch.until("approval.requested", 2)
                await rt.send(ADDRESS, "approve", {"call_id": "call_3", "approved": False})
                await watch.until("turn.completed", 2)
            allowed = (await rt.inspect(ADDRESS)).state["allowed_tools"]
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                after = Watch(sub)
                await after.until("turn.completed", 2)
                await rt.send(ADDRESS, "prompt", "write c")
                await after.until("turn.completed", 3)
    assert watch.of("approval.answered")[0] == {
        "turn_id": "turn-1", "prompt_id": "p1", "call_id": "call_1", "approved": True,
        "scope": "session",
    }  # fmt: skip
    assert second.data["call_id"] == "call_3"  # shell_run still asks; write_file did not
    assert allowed == ["write_file"]
    assert [c["call_id"] for c in after.of("approval.requested")] == ["call_1", "call_3"]
    assert [c["call_id"] for c in after.of("tool.started")] == ["call_1", "call_2", "call_4"]
    assert [(workspace / f).read_text() for f in ("note.txt", "b.txt", "c.txt")] == [
        "once", "two", "three"
    ]  # fmt: skip
    assert len(model.requests) == 6


async def test_a_session_scope_goes_only_with_an_approval_and_a_bad_scope_changes_nothing(
    data, workspace
):
    with ScriptedModel([WRITE_NOTE]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec_asking(workspace)(model), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "write the note")
                await watch.until("approval.requested")
                body = {"approved": False, "scope": "session"}
                outcome = await send_and_wait(rt, "approve", body)
                unknown = await send_and_wait(rt, "approve", {"scope": "forever"})
                waiting = await rt.approvals(ADDRESS)
                allowed = (await rt.inspect(ADDRESS)).state["allowed_tools"]
    assert outcome.status == "rejected"
    assert outcome.reason == (
        "'scope': 'session' allows a tool for the rest of the session, so it goes only "
        "with 'approved': true"
    )
    assert (unknown.status, unknown.reason) == ("rejected", (
        "the body of 'approve' to session/s1: $.scope must be 'call' or 'session', "
        'got "forever" (a string)'
    ))  # fmt: skip
    assert len(waiting) == 1 and allowed == []


async def test_a_deadline_message_from_anyone_but_the_actor_itself_is_rejected(data, workspace):
    the_spec = spec_asking(workspace, approval_timeout=30)
    with ScriptedModel([WRITE_NOTE]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS, clock=Clock()) as rt:
            await rt.spawn("session", the_spec(model), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "write the note")
                asked = await watch.until("approval.requested")
                forged = {"turn_id": "turn-1", "call_id": asked.data["call_id"]}
                outcome = await send_and_wait(rt, "approval.deadline", forged)
                waiting = await rt.approvals(ADDRESS)
    assert outcome.status == "rejected"
    assert outcome.reason == (
        "'approval.deadline' is the actor's own timer; answer an approval with an 'approve' message"
    )
    assert [p.call_id for p in waiting] == [asked.data["call_id"]]
    assert "approval.expired" not in watch.types()


async def test_a_task_approval_expires_with_its_default_after_a_restart(tmp_path, workspace):
    clock = Clock()
    data = tmp_path / "data"
    with ScriptedModel([WRITE_NOTE, text("done")]) as model, trio.fail_after(20):
        the_spec = task_spec(model, approve="ask", approval_timeout=60, approval_default="approve")
        async with callboard.open_runtime(data, kinds=kinds_in(workspace), clock=clock) as rt:
            handle = await rt.tasks.spawn(the_spec)
            async with rt.subscribe(handle, after=0) as sub:
                asked = await Watch(sub).until("approval.requested")
        clock.now += 61  # past the approval's deadline, not the task's own (two minutes)
        async with callboard.open_runtime(data, kinds=kinds_in(workspace), clock=clock) as rt:
            terminal = await rt.tasks.wait(handle)
            async with rt.subscribe(handle, after=0) as sub:
                watch = Watch(sub)
                expired = await watch.until("approval.expired")
    assert (asked.data["timeout"], asked.data["on_expiry"]) == (60, "approve")
    assert expired.data["approved"] is True
    assert terminal.record.terminal == callboard.Succeeded("done")
    assert (workspace / "note.txt").read_text() == "once"
    assert len(model.requests) == 2


def spec_asking(workspace: Path, **fields: object):
    """A session spec (for a model given later) whose tools all ask first."""

    def for_model(model: ScriptedModel) -> dict[str, object]:
        return spec(model, workspace, approvals="ask", **fields)

    return for_model


@pytest.mark.parametrize(
    ("kind", "fields", "said"),
    [
        ("session", {"approval_timeout": -5},
         "SessionSpec: invalid type ('approval_timeout' must be a positive number of "
         "seconds, got -5.0) @ $"),
        ("session", {"approval_timeout": "60"},
         'SessionSpec: must be a number, got "60" (a string) @ $.approval_timeout'),
        ("session", {"approval_default": "allow"},
         "SessionSpec: must be 'deny' or 'approve', got \"allow\" (a string) @ $.approval_default"),
        ("task", {"approval_timeout": 0},
         "RunSpec: invalid type ('approval_timeout' must be a positive number of seconds, "
         "got 0.0) @ $"),
        ("task", {"approval_default": "yes"},
         "RunSpec: must be 'deny' or 'approve', got \"yes\" (a string) @ $.approval_default"),
        ("session", {"approvals": {"shell_run": {"timeout": -1}}},
         "SessionSpec: invalid type ('approvals': the timeout for tool 'shell_run' must be a "
         "positive number of seconds, got -1) @ $"),
        ("session", {"approvals": {"shell_run": {"timeout": "5"}}},
         "SessionSpec: invalid type ('approvals': the timeout for tool 'shell_run' must be a "
         "number of seconds, got '5') @ $"),
        ("session", {"approvals": {"shell_run": {"default": "maybe"}}},
         "SessionSpec: invalid type ('approvals': the default for tool 'shell_run' must be "
         "'deny' or 'approve', got 'maybe') @ $"),
        ("session", {"approvals": {"shell_run": {"approval": "always", "timeout": 5}}},
         "SessionSpec: invalid type ('approvals': the approval for tool 'shell_run' is "
         "'always': a timeout or a default is only for a tool that asks) @ $"),
        ("session", {"approvals": {"shell_run": {"ask": True}}},
         "SessionSpec: invalid type ('approvals': the entry for tool 'shell_run' takes "
         "approval, timeout, default, not 'ask') @ $"),
    ],
    ids=[
        "negative-timeout", "timeout-as-text", "session-default", "zero-task-timeout",
        "task-default", "tool-negative-timeout", "tool-timeout-as-text", "tool-default",
        "timeout-on-a-tool-that-never-asks", "unknown-entry-key",
    ],
)  # fmt: skip
async def test_a_bad_approval_deadline_or_default_is_refused_at_spawn_naming_the_field(
    tmp_path, workspace, kind, fields, said
):
    base = {"workspace": str(workspace)} | ({"prompt": "go"} if kind == "task" else {})
    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path / "data", kinds=KINDS) as rt:
            with pytest.raises(callboard.BadRequest) as refused:
                await rt.spawn(kind, base | fields, name="x")
            actors = await rt.list()
    assert str(refused.value) == f"the spec for '{kind}/x' is not a valid {said}"
    assert actors == []


async def test_a_task_approved_always_runs_the_tools_later_calls_in_the_same_turn_unasked(
    tmp_path, workspace
):
    script = [WRITE_NOTE, WRITE_B, text("done")]
    with ScriptedModel(script) as model, trio.fail_after(20):
        async with callboard.open_runtime(tmp_path / "data", kinds=kinds_in(workspace)) as rt:
            handle = await rt.tasks.spawn(task_spec(model, approve="ask"))
            async with rt.subscribe(handle, after=0) as sub:
                watch = Watch(sub)
                asked = await watch.until("approval.requested")
                await rt.tasks.approve(handle, asked.data["call_id"], always=True)
                settled = await watch.until("task.settled")
    assert settled.data["status"] == "succeeded"
    assert watch.types().count("approval.requested") == 1
    assert [c["call_id"] for c in watch.of("tool.started")] == [asked.data["call_id"], "call_2"]
    assert (workspace / "b.txt").read_text() == "two"
    assert len(model.requests) == 3


def test_a_tools_own_entry_comes_before_the_star_entry_and_that_before_the_specs_default():
    policy, deadlines = read_approvals(
        {
            "shell_run": {"approval": "ask", "timeout": 5, "default": "approve"},
            "*": {"approval": "ask", "timeout": 50},
            "write_file": "ask",
            "edit_file": {"default": "approve"},
        },
        timeout=500,
    )
    assert policy is not None and policy.for_tool("read_file") == "ask"
    assert deadlines.for_tool("shell_run") == ToolDeadline(5, "approve")
    assert deadlines.for_tool("write_file") == ToolDeadline(50, "deny")
    assert deadlines.for_tool("edit_file") == ToolDeadline(500, "approve")
    plain, spec_wide = read_approvals("ask", timeout=500, on_expiry="approve")
    assert plain is not None and plain.for_tool("read_file") == "ask"
    assert spec_wide.for_tool("shell_run") == ToolDeadline(500, "approve")
    assert read_approvals(None)[0] is None
