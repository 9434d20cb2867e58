"""Spawn refuses a spec it would otherwise half-apply: a key no field takes (a
misspelling would leave the default in force) and a workspace that is not a
directory here (every tool call would fail, and a task could still "succeed").
Nothing refused is stored."""

from __future__ import annotations

import pytest
import trio
from scripted_model import ScriptedModel
from task_helpers import spec

import callboard
from callboard.agent import builtin_kinds

SESSION_FIELDS = (
    "workspace, model, base_url, system_prompt, approvals, on_restart, "
    "background_on_timeout, executor, api_key_env, provider, approval_timeout, approval_default, "
    "context_window, keep_turns, max_tokens, max_cost, max_model_calls, max_tool_calls, prices, "
    "turn_deadline, on_budget, outage_retry_limit, outage_retry_for"
)
TASK_FIELDS = (
    "prompt, base_url, model, deadline, approve, workspace, system_prompt, executor, "
    "api_key_env, provider, approval_timeout, approval_default, context_window, keep_turns, "
    "max_tokens, max_cost, max_model_calls, max_tool_calls, prices, on_budget, "
    "outage_retry_limit, outage_retry_for"
)


async def test_a_misspelt_session_spec_key_is_refused_naming_it_and_the_fields(tmp_path, workspace):
    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path / "data", kinds=builtin_kinds()) as rt:
            with pytest.raises(callboard.BadRequest) as refused:
                await rt.spawn(
                    "session", {"workspace": str(workspace), "aprovals": "never"}, name="s1"
                )
            actors = await rt.list()
    assert str(refused.value) == (
        "the spec for 'session/s1' has an unknown key 'aprovals' (did you mean "
        f"'approvals'?); a SessionSpec takes {SESSION_FIELDS}"
    )
    assert actors == []


async def test_several_unknown_task_spec_keys_are_each_named(tmp_path, workspace):
    task = {"prompt": "go", "workspace": str(workspace), "aprove": "always", "colour": "red"}
    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path / "data", kinds=builtin_kinds()) as rt:
            with pytest.raises(callboard.BadRequest) as refused:
                await rt.spawn("task", task, name="t1")
    assert str(refused.value) == (
        "the spec for 'task/t1' has unknown keys 'aprove', 'colour' (did you mean 'approve' "
        f"for 'aprove'?); a RunSpec takes {TASK_FIELDS}"
    )


async def test_a_session_whose_workspace_does_not_exist_is_refused(tmp_path):
    missing = tmp_path / "missing"
    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path / "data", kinds=builtin_kinds()) as rt:
            with pytest.raises(callboard.BadRequest) as refused:
                await rt.spawn("session", {"workspace": str(missing)}, name="s1")
            actors = await rt.list()
    assert str(refused.value) == (
        f"the workspace {str(missing)!r} does not exist; create the directory first or "
        "name one that exists"
    )
    assert actors == []


async def test_a_task_whose_workspace_is_a_file_is_refused_and_asks_no_model(tmp_path):
    note = tmp_path / "note.txt"
    note.write_text("not a directory")
    with ScriptedModel([]) as model, trio.fail_after(20):
        async with callboard.open_runtime(tmp_path / "data", kinds=builtin_kinds()) as rt:
            with pytest.raises(callboard.BadRequest) as refused:
                await rt.tasks.spawn(spec(model, workspace=str(note)))
            actors = await rt.list()
    assert str(refused.value) == f"the workspace {str(note)!r} is not a directory; name a directory"
    assert actors == []
    assert model.requests == []


async def test_a_task_without_a_workspace_is_refused_when_the_hosts_does_not_exist(tmp_path):
    missing = tmp_path / "missing"
    kinds = builtin_kinds({"workspace": missing})
    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path / "data", kinds=kinds) as rt:
            with pytest.raises(callboard.BadRequest) as refused:
                await rt.spawn("task", {"prompt": "write the note"}, name="t1")
            actors = await rt.list()
    assert str(refused.value) == (
        f"the host's workspace {str(missing)!r} does not exist; create the directory first "
        "or name one that exists"
    )
    assert actors == []


@pytest.mark.parametrize(
    ("kind", "fields", "said"),
    [
        ("session", {"background_on_timeout": "no"},
         'SessionSpec: must be true or false, got "no" (a string) @ $.background_on_timeout'),
        ("session", {"on_restart": "never"},
         "SessionSpec: must be 'continue' or 'interrupt', got \"never\" (a string) @ $.on_restart"),
        ("task", {"approve": "maybe"},
         "RunSpec: must be 'always', 'ask' or 'never', got \"maybe\" (a string) @ $.approve"),
        ("task", {"deadline": "60"}, 'RunSpec: must be a number, got "60" (a string) @ $.deadline'),
        ("task", {"model": 5}, "RunSpec: must be a string, got 5 (a number) @ $.model"),
    ],
    ids=["flag-as-text", "session-word", "task-word", "number-as-text", "text-as-number"],
)  # fmt: skip
async def test_a_spec_value_of_the_wrong_json_type_is_refused_not_coerced(
    tmp_path, workspace, kind, fields, said
):
    base = {"workspace": str(workspace)} | ({"prompt": "go"} if kind == "task" else {})
    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path / "data", kinds=builtin_kinds()) as rt:
            with pytest.raises(callboard.BadRequest) as refused:
                await rt.spawn(kind, base | fields, name="x")
            actors = await rt.list()
    assert str(refused.value) == f"the spec for '{kind}/x' is not a valid {said}"
    assert actors == []


async def test_a_relative_host_workspace_given_as_a_runtime_setting_is_refused_at_spawn(tmp_path):
    with ScriptedModel([]) as model, trio.fail_after(20):
        async with callboard.open_runtime(
            tmp_path / "data", kinds=builtin_kinds(), settings={"workspace": "ws/"}
        ) as rt:
            with pytest.raises(callboard.ConfigurationError) as refused:
                await rt.tasks.spawn(spec(model))
            actors = await rt.list()
    assert str(refused.value) == (
        "the host's workspace 'ws/' is a relative path; give it to builtin_kinds({'workspace': "
        "...}), which makes it absolute, or make it absolute"
    )
    assert actors == []
