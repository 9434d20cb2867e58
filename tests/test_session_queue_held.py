"""A prompt whose turn could not start stays queued, at the front.

The store itself refuses the commit that dequeues the prompt: a trigger added
to the real database from a second connection aborts the insert of the
``queue.dequeued`` event while the session has never restarted (so it
refuses exactly one attempt). The writer reports `StoreUnavailable`, the
session crashes before anything of the dequeue is announced, restarts from
its last snapshot, and takes the same prompt from the front of the queue.

Why not hold the write lock from a second connection: every write waits for
it, so the first one to give up is whichever write comes first (the
``resume`` message's own, or an earlier commit); nothing can aim the failure
at the dequeue commit itself.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import trio
from scripted_model import ScriptedModel, text
from session_helpers import ADDRESS, KINDS, NAME, Watch, gate, spec

import callboard

REFUSE_FIRST_DEQUEUE = f"""
CREATE TRIGGER refuse_the_first_dequeue BEFORE INSERT ON events
WHEN NEW.type = 'queue.dequeued'
    AND (SELECT restarts FROM actors WHERE address = '{ADDRESS}') = 0
BEGIN
    SELECT RAISE(ABORT, 'the disk refused the write');
END
"""


def _user_messages(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def refuse_the_first_dequeue(data: Path) -> None:
    conn = sqlite3.connect(data / "callboard.sqlite3", isolation_level=None)
    try:
        conn.execute(REFUSE_FIRST_DEQUEUE)
    finally:
        conn.close()


async def test_a_prompt_whose_dequeue_commit_fails_stays_at_the_front_and_its_turn_runs_once(
    data, workspace
):
    released, first_answer = gate()
    with ScriptedModel([first_answer, text("second done")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            refuse_the_first_dequeue(data)
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "pause")
                await rt.send(ADDRESS, "prompt", "first")
                await rt.send(ADDRESS, "prompt", "second")
                await watch.until("queue.enqueued", 2)
                await rt.send(ADDRESS, "resume")
                crashed = await watch.until("actor.crashed")
                started = await watch.until("turn.started")
                await model.wait_for_requests(1)  # the model holds the first answer
                running = await rt.inspect(ADDRESS)
                released.set()
                await watch.until("turn.completed", 2)
                done = await rt.inspect(ADDRESS)
    durable = [(e.type, e.data) for e in watch.seen if e.seq is not None]
    assert [type for type, _ in durable] == [
        "actor.started",
        "session.paused",
        "queue.enqueued",
        "queue.enqueued",
        "session.resumed",
        "actor.crashed",
        "actor.restarted",
        "queue.dequeued",
        "turn.started",
        "assistant.message",
        "turn.completed",
        "queue.dequeued",
        "turn.started",
        "assistant.message",
        "turn.completed",
    ]
    assert [e.seq for e in watch.seen if e.seq is not None] == list(range(1, len(durable) + 1))
    assert crashed.data["error"] == (
        "StoreUnavailable: the store could not persist the write (the disk refused the write); "
        "nothing was accepted"
    )
    assert watch.of("queue.dequeued") == [
        {"id": "p1", "turn_id": "turn-1"},
        {"id": "p2", "turn_id": "turn-2"},
    ]
    assert started.data == {"turn_id": "turn-1", "prompt_id": "p1", "prompt": "first"}
    assert running.state["active"]["prompt_id"] == "p1"
    assert running.state["queue"] == [{"id": "p2", "text": "second"}]
    assert (running.state["turns"], running.state["paused"]) == (1, False)
    assert running.restarts == 1
    assert [c["answer"] for c in watch.of("turn.completed")] == ["first done", "second done"]
    assert (done.state["queue"], done.state["active"]) == ([], None)
    assert len(model.requests) == 2
    # The failed attempt appended nothing to the conversation: each prompt is in it once.
    assert _user_messages(model.requests[0]) == ["first"]
    assert _user_messages(model.requests[1]) == ["first", "second"]
