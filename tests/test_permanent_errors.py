"""Errors that fail every time (`callboard.Permanent`) fail the actor at once, and
relative paths given to `open_runtime` and `builtin_kinds` are taken against
the directory the app is in when it opens them.

Each kind below would wait a minute before a restart: a test that sees the
actor fail within its bound has seen it fail without one.
"""

from __future__ import annotations

import attrs
import trio
from scripted_model import ScriptedModel, text, tool_call
from store_backends import write_rows
from task_helpers import spec

import callboard
from callboard.agent import Failed, Settled, Succeeded, builtin_kinds

SLOW_RESTARTS = callboard.Supervision(intensity=100, backoff_initial=60, backoff_max=60)


class Misconfigured(callboard.Actor):
    """Its handler finds a setting it cannot work with."""

    kind = "misconfigured"
    virtual = True
    supervision = SLOW_RESTARTS

    async def handle(self, ctx: callboard.Context, message: callboard.Message) -> None:
        ctx.emit("handling", {"seq": message.seq})
        raise callboard.ConfigurationError("the setting 'inbox' names no directory; create it")


class NeverStarts(callboard.Actor):
    """Its ``on_start`` meets an error of the user's own that will never go away."""

    kind = "never"
    supervision = SLOW_RESTARTS

    async def on_start(self, ctx: callboard.Context) -> None:
        raise callboard.Permanent("the licence file is missing")


@attrs.frozen
class Plan:
    size: int


class Planned(callboard.Actor):
    """Spawned with a `Plan`; counts what it is sent."""

    kind = "planned"
    spec_type = Plan
    supervision = SLOW_RESTARTS

    async def handle(self, ctx: callboard.Context, message: callboard.Message) -> None:
        self.state["seen"] = self.state.get("seen", 0) + 1


async def _types_until(rt: callboard.Runtime, address: str, last: str) -> list[str]:
    types: list[str] = []
    async with rt.subscribe(address, after=0) as events:
        async for event in events:
            types.append(event.type)
            if event.type == last:
                return types
    raise AssertionError("the subscription ended")


async def test_a_configuration_error_in_a_handler_fails_the_actor_at_once_with_it(tmp_path):
    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path, kinds=[Misconfigured]) as rt:
            await rt.send("misconfigured/m", "go", {})
            types = await _types_until(rt, "misconfigured/m", "actor.failed")
            view = await rt.inspect("misconfigured/m")
    assert types == ["actor.started", "actor.failed"]
    assert (view.status, view.restarts) == ("failed", 0)
    assert view.last_error is not None
    assert view.last_error["type"] == "ConfigurationError"
    assert view.last_error["message"] == "the setting 'inbox' names no directory; create it"


async def test_a_permanent_error_in_on_start_fails_the_actor_without_a_restart(tmp_path):
    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path, kinds=[NeverStarts]) as rt:
            await rt.spawn("never", None, name="n")
            types = await _types_until(rt, "never/n", "actor.failed")
            view = await rt.inspect("never/n")
    # actor.started would have been committed with what on_start did: nothing is.
    assert types == ["actor.failed"]
    assert (view.status, view.restarts) == ("failed", 0)
    assert view.last_error is not None
    assert (view.last_error["type"], view.last_error["message"]) == (
        "Permanent",
        "the licence file is missing",
    )


async def test_a_task_with_a_relative_jobs_directory_fails_at_once_naming_the_setting(
    tmp_path, workspace
):
    kinds = builtin_kinds({"workspace": workspace})
    with ScriptedModel([text("never asked")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(
            tmp_path / "data", kinds=kinds, settings={"jobs_dir": "jobs"}
        ) as rt:
            handle = await rt.tasks.spawn(spec(model))
            outcome = await rt.tasks.wait(handle, timeout=15)
            view = await rt.inspect(handle)
    assert isinstance(outcome, Settled)
    assert outcome.record.terminal == Failed(
        "the task's actor failed: the jobs directory 'jobs' (from the setting 'jobs_dir') "
        "is a relative path; give an absolute one (builtin_kinds and open_runtime make "
        "theirs absolute)"
    )
    assert view.restarts == 0
    assert model.requests == []


async def test_relative_data_and_workspace_paths_are_taken_against_the_directory_at_open(
    tmp_path, monkeypatch
):
    (tmp_path / "ws").mkdir()
    monkeypatch.chdir(tmp_path)
    kinds = builtin_kinds({"workspace": "ws/"})
    shell = tool_call("shell_run", {"command": "echo hi > note.txt"})
    with ScriptedModel([shell, text("the note is written")]) as model, trio.fail_after(20):
        async with callboard.open_runtime("data/", kinds=kinds) as rt:
            handle = await rt.tasks.spawn(spec(model))
            outcome = await rt.tasks.wait(handle, timeout=15)
            data_dir = rt.data_dir
    assert isinstance(outcome, Settled)
    assert outcome.record.terminal == Succeeded("the note is written")
    assert (tmp_path / "ws" / "note.txt").read_text() == "hi\n"
    assert data_dir == tmp_path / "data"
    assert len(model.requests) == 2


async def test_a_stored_spec_that_no_longer_structures_fails_the_actor_at_once_naming_it(
    store_url, tmp_path
):
    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path, kinds=[Planned], store=store_url) as rt:
            await rt.spawn("planned", {"size": 1}, name="p")
        # What the spec class takes changed under the spec it was spawned with.
        write_rows(tmp_path, store_url, "UPDATE actors SET spec = ?", (b'{"size": "big"}',))
        async with callboard.open_runtime(tmp_path, kinds=[Planned], store=store_url) as rt:
            await rt.send("planned/p", "count", {})
            async with rt.subscribe("planned/p", after=0) as events:
                async for event in events:
                    if event.type == "actor.failed":
                        break
            view = await rt.inspect("planned/p")
    assert (view.status, view.restarts, view.mailbox) == ("failed", 0, 1)
    assert view.state is None  # inspect shows no state it cannot build, and says why:
    assert view.last_error is not None
    assert (view.last_error["type"], view.last_error["message"]) == (
        "StateError",
        "the spec 'planned/p' was spawned with does not structure into Plan: invalid value "
        "for type, expected int @ $.size; make the spec class take what it was spawned with",
    )
