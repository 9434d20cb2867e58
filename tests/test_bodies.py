"""The bodies of the built-in kinds' messages are structured strictly by the codec's
converter, and a body that does not fit is refused naming the field.

First the strict structuring itself (`strict_json`, `structure_json`) and the
body types, pure; then a session, a task and a job each answering a bad body
with the field-naming reason and changing nothing.
"""

from __future__ import annotations

import os
from typing import Any

import attrs
import pytest
import trio
from job_kinds import Inbox
from scripted_model import ScriptedModel, hold
from session_helpers import ADDRESS, Watch, spec
from task_helpers import kinds_in
from task_helpers import spec as task_spec

import callboard
from callboard.agent import Session, Tasks
from callboard.agent._bodies import (
    ApproveBody,
    CancelBody,
    QueueMoveBody,
    QueueRemoveBody,
    TextBody,
)
from callboard.codec import JSONShapeError, converter, strict_json, structure_json
from callboard.jobs import Job
from callboard.jobs._bodies import WatchBody
from callboard.tools import process_start_time

WHAT = "the body of 'x' to session/s1"


def refused(value: Any, cls: type) -> str:
    with pytest.raises(JSONShapeError) as caught:
        structure_json(value, cls, what=WHAT)
    return str(caught.value)


@strict_json()
@attrs.frozen
class Scalars:
    text: str
    count: int
    flag: bool
    ratio: float
    maybe: int | None = None
    extra: dict[str, Any] | None = None


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("text", 5, "must be a string, got 5 (a number)"),
        ("text", None, "must be a string, got null (null)"),
        ("count", True, "must be an integer, got true (a boolean)"),
        ("count", 1.0, "must be an integer, got 1.0 (a number)"),
        ("count", "1", 'must be an integer, got "1" (a string)'),
        ("flag", 1, "must be true or false, got 1 (a number)"),
        ("flag", "true", 'must be true or false, got "true" (a string)'),
        ("ratio", False, "must be a number, got false (a boolean)"),
        ("maybe", "2", 'must be an integer, got "2" (a string)'),
        ("extra", [1], "must be an object, got [1] (an array)"),
    ],
)
def test_a_strict_field_takes_only_its_own_json_type(field, value, says):
    good = {"text": "t", "count": 1, "flag": False, "ratio": 0.5}
    assert refused({**good, field: value}, Scalars) == f"{WHAT}: $.{field} {says}"


def test_strict_structuring_keeps_what_fits_and_ignores_unknown_keys():
    value = {"text": "t", "count": -3, "flag": True, "ratio": 2, "maybe": None, "new": 1}
    assert structure_json(value, Scalars, what=WHAT) == Scalars("t", -3, True, 2.0)


def test_every_wrong_field_is_named_in_field_order_and_a_missing_one_too():
    assert refused({"count": "x", "ratio": None}, Scalars) == (
        f'{WHAT}: $.text is missing; $.count must be an integer, got "x" (a string); '
        "$.flag is missing; $.ratio must be a number, got null (null)"
    )


def test_a_body_that_is_no_object_is_refused_as_a_whole():
    assert refused([1], ApproveBody) == f"{WHAT} must be an object, got [1] (an array)"
    assert refused("yes", CancelBody) == f'{WHAT} must be an object, got "yes" (a string)'


@pytest.mark.parametrize(
    "body",
    [
        TextBody("hello"),
        CancelBody(),
        CancelBody("turn-3"),
        ApproveBody(),
        ApproveBody("call_1", False),
        QueueRemoveBody("p2"),
        QueueMoveBody("p2", 0),
        WatchBody("j1", "make", "session/s1", 42, "/jobs/j1", 1234, {"ssh": {"host": "h"}}),
    ],
    ids=repr,
)
def test_each_body_type_round_trips_through_the_converter(body):
    assert structure_json(converter.unstructure(body), type(body), what=WHAT) == body


def test_a_text_body_may_be_the_text_alone_and_no_body_is_every_field_absent():
    assert structure_json("hi", TextBody, what=WHAT) == TextBody("hi")
    assert structure_json(None, ApproveBody, what=WHAT) == ApproveBody(None, True)
    assert structure_json(None, CancelBody, what=WHAT) == CancelBody(None)
    assert refused(None, TextBody) == f"{WHAT}: $.text is missing"
    assert refused(5, TextBody) == f"{WHAT}: $.text must be a string, got 5 (a number)"
    # An approval is never guessed: null is no answer.
    assert refused({"approved": None}, ApproveBody) == (
        f"{WHAT}: $.approved must be true or false, got null (null)"
    )


BAD_SESSION_BODIES = [
    ("prompt", {"text": 5}, "$.text must be a string, got 5 (a number)"),
    ("prompt", [1], "$.text must be a string, got [1] (an array)"),
    ("prompt", None, "$.text is missing"),
    ("queue.remove", {"id": 1}, "$.id must be a string, got 1 (a number)"),
    ("queue.move", {"id": "p1", "to": "top"}, '$.to must be an integer, got "top" (a string)'),
    ("queue.move", {"id": "p1"}, "$.to is missing"),
    ("cancel", {"turn_id": 3}, "$.turn_id must be a string, got 3 (a number)"),
    ("approve", {"approved": "yes"}, '$.approved must be true or false, got "yes" (a string)'),
]


async def test_a_session_rejects_a_bad_body_naming_the_field_and_changes_nothing(data, workspace):
    with ScriptedModel([]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=[Session]) as rt:
            await rt.spawn("session", spec(model, workspace), name="s1")
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                for type_, body, _ in BAD_SESSION_BODIES:
                    await rt.send(ADDRESS, type_, body)
                await rt.send(ADDRESS, "approve", 5)
                await watch.until("message.rejected", count=len(BAD_SESSION_BODIES) + 1)
            view = await rt.inspect(ADDRESS)
    reasons = [e["reason"] for e in watch.of("message.rejected")]
    assert reasons == [
        *(f"the body of {t!r} to session/s1: {says}" for t, _, says in BAD_SESSION_BODIES),
        "the body of 'approve' to session/s1 must be an object, got 5 (a number)",
    ]
    assert watch.types() == ["message.rejected"] * len(reasons)
    assert (view.state["queue"], view.state["active"], view.restarts) == ([], None, 0)
    assert model.requests == []


async def test_a_task_rejects_a_bad_body_naming_the_field_and_runs_on(data, workspace):
    with ScriptedModel([hold()]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            tasks = Tasks(rt)
            handle = await tasks.spawn(task_spec(model))
            await model.wait_for_requests(1)
            async with rt.subscribe(handle, after=0) as sub:
                watch = Watch(sub)
                await rt.send(handle, "message", {"text": ["hi"]})
                await rt.send(handle, "approve", {"call_id": 7})
                await watch.until("message.rejected", count=2)
                view = await rt.inspect(handle)
                await tasks.cancel(handle)
    assert [e["reason"] for e in watch.of("message.rejected")] == [
        f"the body of 'message' to {handle}: $.text must be a string, got [\"hi\"] (an array)",
        f"the body of 'approve' to {handle}: $.call_id must be a string, got 7 (a number)",
    ]
    assert view.status == "active" and view.state["messages"] == []
    assert view.state["terminal"] is None and view.restarts == 0


async def test_a_job_refuses_a_watch_whose_body_does_not_fit_naming_the_field(tmp_path):
    body = {"job_id": "bad", "command": "x", "owner": "inbox/o", "pid": str(os.getpid()),
            "start_time": process_start_time(os.getpid()), "directory": str(tmp_path)}  # fmt: skip
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path / "data", kinds=[Job, Inbox]) as rt:
            async with rt.subscribe("job/bad", after=0) as events:
                await rt.send("job/bad", "watch", body, sender="inbox/o")
                async for event in events:
                    if event.type == "job.refused":
                        break
            view = await rt.inspect("job/bad")
    assert event.data == {
        "from": "inbox/o",
        "reason": "the body of 'watch' to job/bad: $.pid must be an integer, "
        f'got "{os.getpid()}" (a string)',
    }
    assert view.state["status"] == "new" and view.restarts == 0
