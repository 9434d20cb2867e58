"""A session's turn parked through a model outage: it waits, durably, and goes on.

A model server that answers 503 or refuses connections for longer than the
client's own retries parks the turn (``turn.waiting_for_model``) with a
durable timer; the turn is asked again when the timer fires, in this
runtime or in the next one on the same data directory, after a clean close
or a SIGKILL, and answers exactly once. Cancel still ends a parked turn, a
prompt that arrives meanwhile waits in the queue, the limit fails the turn
saying how long and how many times it tried, and a failure that no wait
cures fails at once, as before.

The settings make every wait small: one client attempt per call (no backoff
inside the client) and outage backoffs of hundredths of a second, so the
tests wait on events, never on the clock.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import trio
from scripted_model import ScriptedModel, status, text
from session_helpers import ADDRESS, NAME, Child, Watch, occurrences, spec

import callboard
from callboard.agent import builtin_kinds

FAST = {"model_call_attempts": 1, "outage_backoff_initial": 0.01, "outage_backoff_max": 0.05}
"""No backoff inside the client, and parked turns retried within hundredths of a second."""

PARKED = {"model_call_attempts": 1, "outage_backoff_initial": 3600, "outage_backoff_max": 3600}
"""A parked turn stays parked for the whole test (its timer is an hour away)."""

DOWN = status(503, {"error": {"message": "upstream is restarting", "type": "server_error"}})

CHILD = Path(__file__).with_name("outage_child.py")


def closed_port() -> int:
    """A loopback port nothing listens on (connections to it are refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def session_spec(base_url: str, workspace: Path, **overrides: Any) -> dict[str, Any]:
    return {
        "workspace": str(workspace),
        "base_url": base_url,
        "model": "test-model",
        "approvals": "always",
        **overrides,
    }


async def all_events_until(rt: callboard.Runtime, type: str) -> list[callboard.Event]:
    """Every durable event of the session from the first, up to the first ``type``."""
    seen: list[callboard.Event] = []
    async with rt.subscribe(ADDRESS, after=0) as sub:
        async for event in sub:
            if event.seq is not None:
                seen.append(event)
                if event.type == type:
                    return seen
    raise AssertionError(f"the events ended before {type}")


async def test_a_turn_parked_through_503s_is_asked_again_and_completes_once(data, workspace):
    # One client attempt and one more ask by the turn: two requests a try.
    script = [DOWN, DOWN, DOWN, DOWN, text("back again")]
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=builtin_kinds(FAST)) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "hello")
                done = await watch.until("turn.completed")
    waited = watch.of("turn.waiting_for_model")
    assert [w["attempt"] for w in waited] == [1, 2]
    assert all("HTTP 503" in w["error"] and w["status"] == 503 for w in waited)
    assert all(w["turn_id"] == done.data["turn_id"] for w in waited)
    assert waited[0]["since"] == waited[1]["since"] <= waited[0]["retry_at"]
    assert done.data["answer"] == "back again"
    assert "turn.failed" not in watch.types()
    assert len(model.requests) == 5
    assert occurrences(model.requests[-1], "hello") == 1


async def test_a_parked_turn_survives_a_closed_runtime_and_completes_once_when_the_model_is_back(
    data, workspace, store_url
):
    port = closed_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    with trio.fail_after(60):
        async with callboard.open_runtime(data, kinds=builtin_kinds(FAST), store=store_url) as rt:
            await rt.spawn("session", session_spec(base_url, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                await rt.send(ADDRESS, "prompt", "hello")
                waited = await Watch(sub).until("turn.waiting_for_model")
        with ScriptedModel([text("the answer")], port=port) as model:
            async with callboard.open_runtime(
                data, kinds=builtin_kinds(FAST), store=store_url
            ) as rt:
                events = await all_events_until(rt, "turn.completed")
                log = await rt.read_log(ADDRESS, "conversation")
    assert "127.0.0.1" in waited.data["error"] and waited.data["status"] is None
    types = [e.type for e in events]
    assert types.count("turn.started") == 1 and types.count("turn.completed") == 1
    assert "turn.failed" not in types
    assert len(model.requests) == 1 and occurrences(model.requests[0], "hello") == 1
    assert [(m["role"], m["content"]) for m in log] == [
        ("user", "hello"),
        ("assistant", "the answer"),
    ]


async def test_a_parked_turn_survives_sigkill_and_answers_once_when_the_model_is_back(
    data, workspace
):
    up = threading.Event()
    answered: list[int] = []

    def reply(body: dict[str, Any]) -> Any:
        if not up.is_set():
            return DOWN
        answered.append(1)
        return text("the answer")

    # Half a second or less between asks: the kill most likely finds the turn
    # waiting, so the timer that asks again fires in the next runtime.
    settings = {**FAST, "outage_backoff_initial": 0.5, "outage_backoff_max": 0.5}
    with ScriptedModel([reply] * 1000) as model, trio.fail_after(60):
        argv = [
            sys.executable, str(CHILD), str(data), json.dumps(settings),
            json.dumps(spec(model, workspace)), "hello",
        ]  # fmt: skip
        process = await trio.lowlevel.open_process(argv, stdout=subprocess.PIPE)
        try:
            await Child(process).until_event("turn.waiting_for_model")
        finally:
            process.kill()
            with trio.move_on_after(10, shield=True):
                await process.wait()
                assert process.stdout is not None
                await process.stdout.aclose()
        assert process.returncode == -9
        up.set()
        async with callboard.open_runtime(data, kinds=builtin_kinds(settings)) as rt:
            events = await all_events_until(rt, "turn.completed")
            log = await rt.read_log(ADDRESS, "conversation")
    types = [e.type for e in events]
    assert types.count("turn.started") == 1 and types.count("turn.completed") == 1
    assert "turn.waiting_for_model" in types and "turn.failed" not in types
    assert answered == [1]
    assert occurrences(model.requests[-1], "hello") == 1
    assert [m["role"] for m in log] == ["user", "assistant"]
    assert log[-1]["content"] == "the answer"


async def test_cancel_ends_a_parked_turn_and_the_prompt_queued_meanwhile_runs_next(data, workspace):
    script = [DOWN, DOWN, text("second answer")]
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=builtin_kinds(PARKED)) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "first")
                parked = await watch.until("turn.waiting_for_model")
                await rt.send(ADDRESS, "prompt", "second")
                await watch.until("queue.enqueued", 2)
                await rt.send(ADDRESS, "cancel", {"turn_id": parked.data["turn_id"]})
                cancelled = await watch.until("turn.cancelled")
                done = await watch.until("turn.completed")
            view = await rt.inspect(ADDRESS)
    after = watch.types()[watch.types().index("turn.waiting_for_model") :]
    assert after[:4] == [
        "turn.waiting_for_model",
        "queue.enqueued",
        "turn.cancelled",
        "queue.dequeued",
    ]
    assert cancelled.data["turn_id"] == parked.data["turn_id"] == "turn-1"
    assert (done.data["turn_id"], done.data["answer"]) == ("turn-2", "second answer")
    assert len(model.requests) == 3
    assert view.state["active"] is None and view.state["queue"] == []


async def test_the_retry_limit_fails_the_turn_saying_how_many_times_it_tried(data, workspace):
    with ScriptedModel([DOWN] * 6) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=builtin_kinds(FAST)) as rt:
            await rt.spawn("session", spec(model, workspace, outage_retry_limit=2), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "hello")
                failed = await watch.until("turn.failed")
            view = await rt.inspect(ADDRESS)
    error = failed.data["error"]
    assert error.startswith("the model could not be reached: the turn asked it 3 times over ")
    assert "(outage_retry_limit 2; raise it to wait longer)" in error
    assert "HTTP 503" in error and failed.data["status"] == 503
    assert [w["attempt"] for w in watch.of("turn.waiting_for_model")] == [1, 2]
    assert len(model.requests) == 6
    assert view.state["active"] is None and view.status == "active"


async def test_the_retry_time_fails_the_turn_saying_how_long_it_waited(data, workspace):
    # Each try is two refused connections; the turn stops asking after 0.2 s.
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    with trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=builtin_kinds(FAST)) as rt:
            spec_ = session_spec(base_url, workspace, outage_retry_for=0.2)
            await rt.spawn("session", spec_, name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "hello")
                failed = await watch.until("turn.failed")
    error = failed.data["error"]
    assert error.startswith("the model could not be reached: the turn asked it ")
    assert "(outage_retry_for 0.2 s; raise it to wait longer)" in error
    waited = watch.of("turn.waiting_for_model")
    assert waited and error.count(" times over ") == 1
    # The last retry comes when the time is up, not a whole backoff after it.
    assert all(w["retry_at"] <= w["since"] + 0.2 + 0.001 for w in waited)


@pytest.mark.parametrize(
    "refusal",
    [
        status(401, {"error": {"message": "bad key"}}),
        status(429, {"error": {"message": "out of credit", "code": "insufficient_quota"}}),
        status(400, {"error": {"message": "x", "code": "context_length_exceeded"}}),
    ],
    ids=["401", "insufficient_quota", "context_overflow"],
)
async def test_a_failure_no_wait_cures_fails_the_turn_at_once_without_parking(
    data, workspace, refusal
):
    with ScriptedModel([refusal]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=builtin_kinds(FAST)) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "hello")
                failed = await watch.until("turn.failed")
    assert failed.data["retryable"] is False
    assert "turn.waiting_for_model" not in watch.types()
    assert len(model.requests) == 1


async def test_with_the_retry_limit_at_zero_an_outage_fails_the_turn_as_before(data, workspace):
    with ScriptedModel([DOWN, DOWN]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=builtin_kinds(FAST)) as rt:
            await rt.spawn("session", spec(model, workspace, outage_retry_limit=0), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "hello")
                failed = await watch.until("turn.failed")
    assert "HTTP 503" in failed.data["error"] and failed.data["retryable"] is True
    assert "turn.waiting_for_model" not in watch.types()
    assert len(model.requests) == 2


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"outage_retry_limit": -1}, "'outage_retry_limit' must be a whole number of retries"),
        ({"outage_retry_limit": 1.5}, "outage_retry_limit"),
        ({"outage_retry_for": "soon"}, "outage_retry_for"),
        ({"outage_retry_for": -3}, "'outage_retry_for' must be a number of seconds >= 0"),
    ],
)
async def test_an_outage_setting_that_cannot_work_is_refused_at_spawn_naming_it(
    data, workspace, overrides, named
):
    with trio.fail_after(10):
        async with callboard.open_runtime(data, kinds=builtin_kinds()) as rt:
            with pytest.raises(callboard.BadRequest, match=named):
                await rt.spawn("session", {"workspace": str(workspace), **overrides})


async def test_stopping_a_session_ends_its_parked_turn_as_cancelled(data, workspace):
    with ScriptedModel([DOWN, DOWN]) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=builtin_kinds(PARKED)) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "hello")
                await watch.until("turn.waiting_for_model")
                await rt.stop(ADDRESS)
                cancelled = await watch.until("turn.cancelled")
            view = await rt.inspect(ADDRESS)
    assert cancelled.data["reason"] == "the session was stopped"
    assert view.status == "stopped" and view.state["active"] is None
    assert len(model.requests) == 2


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ({"outage_retry_limit": -2}, "'outage_retry_limit' must be a whole number >= 0, got -2"),
        ({"model_call_attempts": 0}, "'model_call_attempts' must be a whole number >= 1, got 0"),
        ({"outage_backoff_max": "1m"}, "'outage_backoff_max' must be a number of seconds >= 0"),
    ],
)
def test_a_host_outage_setting_that_cannot_work_is_refused_when_the_kinds_are_made(setting, said):
    with pytest.raises(callboard.ConfigurationError, match=said):
        builtin_kinds(setting)


async def test_a_steer_sent_to_a_parked_turn_reaches_the_model_once_when_it_is_back(
    data, workspace
):
    up = threading.Event()

    def reply(body: dict[str, Any]) -> Any:
        return text("steered answer") if up.is_set() else DOWN

    with ScriptedModel([reply] * 1000) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=builtin_kinds(FAST)) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "hello")
                await watch.until("turn.waiting_for_model")
                await rt.send(ADDRESS, "prompt", {"text": "and mind the tests", "mode": "steer"})
                await watch.until("steer.accepted")
                up.set()
                done = await watch.until("turn.completed")
    types = watch.types()
    assert types.count("turn.started") == 1 and types.count("turn.steered") == 1
    assert (done.data["turn_id"], done.data["answer"]) == ("turn-1", "steered answer")
    assert occurrences(model.requests[-1], "and mind the tests") == 1
    assert occurrences(model.requests[-1], "hello") == 1


async def test_an_interrupting_prompt_ends_a_parked_turn_and_runs_next(data, workspace):
    script = [DOWN, DOWN, text("done instead")]
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=builtin_kinds(PARKED)) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "hello")
                await watch.until("turn.waiting_for_model")
                await rt.send(ADDRESS, "prompt", {"text": "do this instead", "mode": "interrupt"})
                interrupted = await watch.until("turn.interrupted")
                done = await watch.until("turn.completed")
    assert interrupted.data["turn_id"] == "turn-1"
    assert (done.data["turn_id"], done.data["answer"]) == ("turn-2", "done instead")
    assert len(model.requests) == 3


async def test_with_on_restart_interrupt_a_parked_turn_waits_on_across_a_restart(data, workspace):
    # The retry timer is an hour away: the turn is parked when the runtime closes and
    # when the next one opens; an outage.retry message then asks the model at once.
    with ScriptedModel([DOWN, DOWN, text("the answer")]) as model, trio.fail_after(60):
        async with callboard.open_runtime(data, kinds=builtin_kinds(PARKED)) as rt:
            await rt.spawn("session", spec(model, workspace, on_restart="interrupt"), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                await rt.send(ADDRESS, "prompt", "hello")
                parked = await Watch(sub).until("turn.waiting_for_model")
        async with callboard.open_runtime(data, kinds=builtin_kinds(PARKED)) as rt:
            await all_events_until(rt, "turn.resumed")  # not turn.interrupted
            await rt.send(ADDRESS, "outage.retry", {"turn_id": parked.data["turn_id"]})
            events = await all_events_until(rt, "turn.completed")
    types = [e.type for e in events]
    assert "turn.interrupted" not in types and "session.paused" not in types
    assert types.count("turn.completed") == 1
    assert len(model.requests) == 3


async def test_a_parked_session_is_passivated_and_its_retry_brings_it_back_to_answer_once(
    data, workspace
):
    # Parked, the session holds no task: an idle runtime drops it from memory.
    config = callboard.RuntimeConfig(passivate_after=0.01)
    with ScriptedModel([DOWN, DOWN, text("the answer")]) as model, trio.fail_after(30):
        kinds = builtin_kinds(PARKED)
        async with callboard.open_runtime(data, kinds=kinds, config=config) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "hello")
                parked = await watch.until("turn.waiting_for_model")
                await watch.until("actor.passivated")
                await rt.send(ADDRESS, "outage.retry", {"turn_id": parked.data["turn_id"]})
                done = await watch.until("turn.completed")
    assert done.data["answer"] == "the answer"
    types = [e.type for e in watch.seen if e.seq is not None]
    assert types.index("actor.passivated") < types.index("turn.resumed")
    assert types.count("turn.completed") == 1
    assert len(model.requests) == 3
