"""An approval deadline that passes while live attach holds the session paused: the
deadline's timer is a message like any other, so it waits in the mailbox and is
applied, once, when the session is resumed. The runtime's wall clock is the
test's and a deadline passes while no runtime runs (as in
``test_approval_deadlines``), so nothing waits on the time itself."""

from __future__ import annotations

import time

import trio
from scripted_model import ScriptedModel, text
from session_helpers import ADDRESS, KINDS, NAME, WRITE_NOTE, Watch, spec

import callboard


class Clock:
    """A wall clock that stands still until the test moves it."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def test_a_deadline_that_passed_while_paused_is_applied_once_after_the_resume(
    data, workspace
):
    clock = Clock()
    with ScriptedModel([WRITE_NOTE, text("not written")]) as model, trio.fail_after(20):
        the_spec = spec(model, workspace, approvals="ask", approval_timeout=300)
        async with callboard.open_runtime(data, kinds=KINDS, clock=clock) as rt:
            await rt.spawn("session", the_spec, name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                await rt.send(ADDRESS, "prompt", "write the note")
                asked = await Watch(sub).until("approval.requested")
            await rt.pause(ADDRESS)
        clock.now += 3600  # the runtime is down while the deadline passes
        async with callboard.open_runtime(data, kinds=KINDS, clock=clock) as rt:
            held = await rt.approvals(ADDRESS)
            await rt.resume(ADDRESS)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                expired = await watch.until("approval.expired")
                await watch.until("turn.completed")
    assert [a.call_id for a in held] == [asked.data["call_id"]]
    resumed = next(e for e in watch.seen if e.type == "actor.resumed")
    assert resumed.seq is not None and expired.seq is not None
    assert resumed.seq < expired.seq, "nothing is handled while paused, the timer's neither"
    assert expired.data["approved"] is False
    assert watch.types().count("approval.expired") == 1
    assert "tool.started" not in watch.types()
    assert len(model.requests) == 2
