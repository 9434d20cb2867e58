"""What both task facades conclude from a snapshot and an event (``views.task_logic``).

Pure: each case is an `ActorView` as ``inspect`` gives it, locally or over the
wire, and what `Tasks` and `RemoteTasks` must both make of it.
"""

from __future__ import annotations

from typing import Any

import pytest

from callboard import (
    ActorStopped,
    ActorView,
    BadAddress,
    BadMessage,
    Cancelled,
    DeadlineExceeded,
    Event,
    Failed,
    Succeeded,
    TaskRecord,
)
from callboard.views.task_logic import (
    answer_in,
    check_text,
    is_attached_view,
    message_progress,
    might_settle,
    replied,
    settled_record,
    settled_refusal,
    task_address,
    task_record,
)

HANDLE = "task/t1"


def view(
    status: str = "active", last_error: dict[str, Any] | None = None, **state: Any
) -> ActorView:
    return ActorView(HANDLE, "task", status, state, 3, 0, 7, 0, last_error)


def event(type: str, data: Any = None, seq: int | None = 8) -> Event:
    return Event(HANDLE, seq, type, data, 0.0)


@pytest.mark.parametrize(
    ("terminal", "expected"),
    [
        ({"status": "succeeded", "result": "done"}, Succeeded("done")),
        ({"status": "failed", "error": "no model"}, Failed("no model")),
        ({"status": "cancelled", "error": "the task was stopped"}, Cancelled()),
        ({"status": "deadline_exceeded"}, DeadlineExceeded()),
    ],
)
def test_a_snapshot_with_a_terminal_is_that_terminal(terminal, expected):
    record = task_record(view(terminal["status"], terminal=terminal))
    result = "done" if isinstance(expected, Succeeded) else None
    assert record == TaskRecord(HANDLE, terminal["status"], expected, result)
    assert settled_record(view(terminal["status"], terminal=terminal)) == record


@pytest.mark.parametrize("status", ["active", "failing", "idle"])
def test_a_task_that_is_not_final_is_running(status):
    record = task_record(view(status, terminal=None))
    assert record == TaskRecord(HANDLE, "running", None)
    assert settled_record(view(status)) is None
    assert is_attached_view(view(status)) == (status != "idle")


def test_an_actor_that_ended_without_settling_failed():
    record = task_record(view("failed", {"message": "boom"}, terminal=None))
    assert record == TaskRecord(HANDLE, "failed", Failed("the task's actor failed: boom"))
    assert not is_attached_view(view("failed"))


def test_a_message_is_answered_at_its_reply_unanswered_once_settled_or_pending():
    answered = {"id": "msg-2", "status": "answered", "reply_at": 5}
    progress = message_progress(view(messages=[answered]), "msg-2")
    assert (progress.reply_at, progress.unanswered) == (5, False)
    settled = {"status": "cancelled"}
    dropped = {"id": "msg-2", "status": "unanswered"}
    progress = message_progress(view("cancelled", messages=[dropped], terminal=settled), "msg-2")
    assert (progress.reply_at, progress.unanswered) == (None, True)
    assert replied(progress.record, "msg-2", None) == TaskRecord(
        HANDLE, "cancelled", Cancelled(), None, "msg-2"
    )
    queued = {"id": "msg-2", "status": "queued"}
    progress = message_progress(view(messages=[queued]), "msg-2")
    assert (progress.reply_at, progress.unanswered) == (None, False)
    assert message_progress(view("cancelled", terminal=settled), "msg-9").unanswered


def test_the_events_a_wait_reads_the_snapshot_again_for():
    assert answer_in(event("message.answered", {"message_id": "msg-2", "result": "hi"}), "msg-2")
    assert answer_in(event("message.answered", {"message_id": "msg-3"}), "msg-2") is None
    assert answer_in(event("message.answered", {"message_id": "msg-2"}), "msg-2") == ""
    endings = ["task.settled", "actor.failed", "actor.stopped"]
    assert [t for t in [*endings, "turn.delta", "message.queued"] if might_settle(event(t))] == (
        endings
    )


def test_handles_texts_and_the_refusal_of_a_settled_task():
    assert task_address(HANDLE) == HANDLE
    with pytest.raises(BadAddress, match="'session/s1' is not a task handle"):
        task_address("session/s1")
    with pytest.raises(BadMessage, match="needs non-empty text"):
        check_text(HANDLE, "  ")
    refusal = settled_refusal(HANDLE, TaskRecord(HANDLE, "succeeded", Succeeded("x")))
    assert isinstance(refusal, ActorStopped)
    assert str(refusal) == (
        "task/t1 has settled (succeeded) and takes no more messages; spawn a new task to go on"
    )
    assert "has settled and takes" in str(settled_refusal(HANDLE, None))
