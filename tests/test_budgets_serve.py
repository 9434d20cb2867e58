"""``callboard serve --prices FILE``: the operator's prices let a spec set ``max_cost``
for the served model, and a file that does not fit stops serve naming it."""

from __future__ import annotations

import json
import sys

import pytest
import trio
from serve_helpers import serve_env, serving

import callboard
from callboard.client import connect

CALLBOARD = [sys.executable, "-m", "callboard"]


async def test_a_spec_may_set_max_cost_for_the_model_the_operator_priced(tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"served-model": {"input": 1e-6, "output": 4e-6}}))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    spec = {"workspace": str(workspace), "max_cost": 0.5}
    with trio.fail_after(40):
        async with serving(
            tmp_path / "data", "--prices", str(prices), "--model", "served-model", cwd=tmp_path
        ) as served:
            async with connect(served.url, token=served.token) as client:
                address = await client.spawn("session", spec, name="priced")
                with pytest.raises(callboard.SpecRefused) as refused:
                    await client.spawn("session", {**spec, "model": "unpriced"}, name="other")
    assert address == "session/priced"
    assert "'max_cost' needs a price for the model 'unpriced'" in str(refused.value)


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ("{", "--prices {path}: not JSON ("),
        ('{"m": {"input": 1}}', "--prices {path}: the table must give 'm' exactly 'input' and"),
        ('{"m": {"input": -1, "output": 0}}', "--prices {path}: the table must give 'm' a price"),
    ],
)
async def test_a_prices_file_that_does_not_fit_stops_serve_naming_it(tmp_path, table, said):
    prices = tmp_path / "prices.json"
    prices.write_text(table)
    with trio.fail_after(20):
        done = await trio.run_process(
            [*CALLBOARD, "serve", "--data", str(tmp_path / "data"), "--port", "0",
             "--prices", str(prices)],
            cwd=tmp_path, env=serve_env(), capture_stdout=True, capture_stderr=True, check=False,
        )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.decode().startswith("callboard serve: " + said.format(path=prices))
    assert not (tmp_path / "data").exists()
