"""Budget fields of a spec: a value that does not fit is refused at spawn naming the
field, and ``max_cost`` without a price for the model in use is refused naming
the model. Nothing refused is stored.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

import callboard
from callboard.agent import builtin_kinds

SESSION = "the spec for 'session/s1' is not a valid SessionSpec: "


def _invalid(said: str) -> str:
    """How cattrs words a field's validator refusing a value of the right type."""
    return f"invalid type ({said}) @ $"


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"max_tokens": -1}, _invalid("'max_tokens' must be a whole number above 0, got -1")),
        ({"max_model_calls": 0}, _invalid("'max_model_calls' must be a whole number above 0, got 0")),  # noqa: E501
        ({"max_tool_calls": "3"}, 'must be an integer, got "3" (a string) @ $.max_tool_calls'),
        ({"max_cost": "1"}, 'must be a number, got "1" (a string) @ $.max_cost'),
        ({"max_cost": -0.5}, _invalid("'max_cost' must be a number above 0, got -0.5")),
        ({"turn_deadline": 0}, _invalid("'turn_deadline' must be seconds above 0, got 0.0")),
        (
            {"on_budget": "stop"},
            "must be 'pause', 'ask' or 'fail', got \"stop\" (a string) @ $.on_budget",
        ),
        (
            {"prices": {"m": {"input": 1e-6}}},
            "invalid type ('prices' must give 'm' exactly 'input' and 'output' ({'MODEL': "
            "{'input': PRICE, 'output': PRICE}} with prices per token), got {'input': 1e-06}) @ $",
        ),
        (
            {"prices": {"m": {"input": -1, "output": 0}}},
            "invalid type ('prices' must give 'm' a price of 0 or more for 'input', got -1) @ $",
        ),
    ],
)  # fmt: skip
async def test_a_budget_field_that_does_not_fit_is_refused_at_spawn_naming_it(
    tmp_path, workspace, fields: dict[str, Any], said: str
):
    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path / "data", kinds=builtin_kinds()) as rt:
            with pytest.raises(callboard.BadRequest) as refused:
                await rt.spawn("session", {"workspace": str(workspace), **fields}, name="s1")
            actors = await rt.list()
    assert str(refused.value) == SESSION + said
    assert actors == []


async def test_a_task_budget_field_is_refused_naming_it(tmp_path, workspace):
    task = {"prompt": "go", "workspace": str(workspace), "max_tool_calls": 1.5}
    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path / "data", kinds=builtin_kinds()) as rt:
            with pytest.raises(callboard.BadRequest) as refused:
                await rt.spawn("task", task, name="t1")
    assert str(refused.value) == (
        "the spec for 'task/t1' is not a valid RunSpec: must be an integer, got 1.5 (a number) "
        "@ $.max_tool_calls"
    )


async def test_max_cost_without_a_price_for_the_model_in_use_is_refused_naming_the_model(
    tmp_path, workspace
):
    prices = {"other-model": {"input": 1e-6, "output": 2e-6}}
    session = {"workspace": str(workspace), "model": "m1", "max_cost": 1.0, "prices": prices}
    settings = {"model": "served-model"}
    with trio.fail_after(20):
        kinds = builtin_kinds(settings)
        async with callboard.open_runtime(tmp_path / "data", kinds=kinds) as rt:
            with pytest.raises(callboard.SpecRefused) as named:
                await rt.spawn("session", session, name="s1")
            task = {"prompt": "go", "workspace": str(workspace), "max_cost": 1.0}
            with pytest.raises(callboard.SpecRefused) as served:
                await rt.spawn("task", task, name="t1")
            actors = await rt.list()
    assert str(named.value) == (
        "'max_cost' needs a price for the model 'm1': give 'prices': {'m1': {'input': PRICE, "
        "'output': PRICE}} (per token) in the spec, or start the server with --prices FILE "
        "naming it"
    )
    assert "the model 'served-model'" in str(served.value)
    assert actors == []


async def test_max_cost_priced_by_the_operators_table_is_accepted(tmp_path, workspace):
    settings = {"model": "served-model", "prices": {"served-model": {"input": 0, "output": 1}}}
    task = {"prompt": "go", "workspace": str(workspace), "max_cost": 1.0}
    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path / "data", kinds=builtin_kinds(settings)) as rt:
            handle = await rt.spawn("task", task, name="t1")
            await rt.stop(handle)
    assert handle == "task/t1"
