"""The benchmarks' own plumbing, in a second or two: the group-commit baseline
writes and acknowledges every row, and the JSON carries the CPU figures, the
spread over runs and the ratios the issue's targets are read from."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks import (  # noqa: E402
    Result,
    Scenario,
    Settings,
    _baseline,
    _gateway_floor,
    _runtime_floor,
)
from benchmarks._report import Outcome, to_json  # noqa: E402

_CPU = ("cpu_us_per_op", "cpu_us_per_op_trio_thread", "cpu_us_per_op_other_threads")


def test_bare_group_commit_writes_every_row_in_groups(tmp_path: Path) -> None:
    result = _baseline.bare_group_commit(Settings(quick=True), tmp_path)
    d = result.details
    assert d["rows"] == 12_000 // 64 * 64
    # More than one row per fsync: the senders' rows share commits.
    assert d["rows_per_commit"] > 1
    assert d["largest_commit"] <= 64
    assert all(d[key] > 0 for key in _CPU)
    assert result.p50_ms is not None and result.p50_ms <= result.p99_ms


def _result(ops: float, cpu: float) -> Result:
    return Result(
        ops_per_s=ops,
        details={
            "cpu_us_per_op": cpu,
            "cpu_us_per_op_trio_thread": cpu - 1,
            "cpu_us_per_op_other_threads": 1.0,
        },
    )


def test_json_has_spread_and_ratios() -> None:
    def run(settings: Settings, workdir: Path) -> Result:
        raise AssertionError("not run")

    base = Outcome(Scenario("base", run), runs=[_result(100, 10), _result(200, 9), _result(50, 12)])
    mine = Outcome(
        Scenario("mine", run, baseline="base"),
        runs=[_result(40, 30), _result(60, 20), _result(30, 50)],
    )
    entries = {e["name"]: e for e in to_json([base, mine], {})["scenarios"]}
    entry = entries["mine"]
    assert entry["ops_per_s"] == 40  # the median run by ops/s, and its details
    assert entry["cpu_us_per_op"] == 30
    assert entry["ratio"] == 0.4  # 40 over the baseline's median, 100
    assert entry["ratio_runs"] == [0.4, 0.3, 0.6]  # round by round
    assert (entry["ops_per_s_min"], entry["ops_per_s_max"]) == (30, 60)
    assert entry["cpu_us_per_op_runs"] == [30, 20, 50]
    assert (entry["cpu_us_per_op_median"], entry["cpu_us_per_op_min"]) == (30, 20)
    assert entry["cpu_us_per_op_max"] == 50
    assert entry["cpu_us_per_op_trio_thread_runs"] == [29, 19, 49]
    assert entries["base"]["baseline"] is None and entries["base"]["ratio"] is None


def test_the_baseline_table_has_the_store_mailbox_columns() -> None:
    # The baseline stays a bare loop apart from the store, so it keeps its own
    # copy of the table: this is what keeps the copy from drifting.
    from callboard.store._schema import SCHEMA

    def columns(schema: str) -> list[tuple[object, ...]]:
        conn = sqlite3.connect(":memory:")
        for statement in schema.split(";"):
            if "CREATE TABLE" in statement and " mailbox " in statement:
                conn.execute(statement.replace("IF NOT EXISTS ", ""))
        return [tuple(row) for row in conn.execute("PRAGMA table_info(mailbox)")]

    assert columns(_baseline._MAILBOX_SCHEMA) == columns(SCHEMA)


def test_only_postgresql_runs_every_baseline_its_ratios_are_taken_against() -> None:
    from benchmarks.__main__ import _select

    # Two nodes against one, one against the batched psycopg baseline, that
    # against one row per COMMIT: a baseline's baseline comes along too.
    assert [s.name for s in _select(["postgresql"])] == [
        "bare-psycopg-commit-per-row",
        "bare-psycopg-group-commit",
        "durable-64-senders-64-actors-postgresql",
        "durable-64-senders-64-actors-postgresql-2-nodes",
    ]


def test_only_a_whole_name_picks_that_scenario_and_its_baseline_alone() -> None:
    from benchmarks.__main__ import _select

    # Its PostgreSQL forms have this name in theirs; a part of a name still finds them.
    assert [s.name for s in _select(["durable-64-senders-64-actors"])] == [
        "bare-group-commit",
        "durable-64-senders-64-actors",
    ]
    assert "durable-64-senders-64-actors-postgresql" in {
        s.name for s in _select(["durable-64-senders-64"])
    }


def test_against_quotes_the_change_round_by_round() -> None:
    from benchmarks._against import against_json, format_against

    def run(settings: Settings, workdir: Path) -> Result:
        raise AssertionError("not run")

    scenario = Scenario("mine", run)
    before = Outcome(scenario, runs=[_result(100, 10), _result(50, 20), _result(80, 10)])
    after = Outcome(scenario, runs=[_result(120, 8), _result(45, 25), _result(100, 8)])
    (change,) = against_json("v1", [before], [after], {"quick": True})["change"]
    assert change["ops_change_runs"] == [1.2, 0.9, 1.25]  # each round's run over its pair's
    assert change["ops_change_median"] == 1.2 and change["rounds_ahead"] == 2
    assert change["cpu_change_runs"] == [0.8, 1.25, 0.8]
    table = format_against("v1", [before], [after])
    assert "1.20x (2/3)" in table
    assert "80 (50-100)" in table and "100 (45-120)" in table  # medians and ranges
    failed = Outcome(scenario, error="RuntimeError: exit status 1")
    assert "RuntimeError" in format_against("v1", [failed], [after])


def test_against_runs_the_code_of_the_revision_beside_this_tree(tmp_path: Path) -> None:
    from benchmarks.__main__ import main
    from benchmarks._against import snapshot_at

    code = snapshot_at(_ROOT, "HEAD")
    try:
        shown = subprocess.run(
            ["git", "-C", str(_ROOT), "show", "HEAD:callboard/__init__.py"],
            capture_output=True,
            check=True,
        ).stdout
        assert (code / "callboard" / "__init__.py").read_bytes() == shown
    finally:
        shutil.rmtree(code)
    out = tmp_path / "against.json"
    argv = ["--quick", "--only", "sqlite-commit-per-row", "--repeats", "2", "--against", "HEAD"]
    assert main([*argv, "--tmpdir", str(tmp_path / "data"), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["against"] == "HEAD"
    assert [len(s["runs"]) for s in (*report["before"], *report["after"])] == [2, 2]
    (change,) = report["change"]
    assert change["name"] == "sqlite-commit-per-row" and len(change["ops_change_runs"]) == 2
    assert main(["--only", "sqlite-commit-per-row", "--against", "no-such-revision"]) == 2


def test_the_bare_send_ack_server_stores_acknowledges_and_handles_every_send(
    tmp_path: Path,
) -> None:
    result = _named(_gateway_floor.SCENARIOS, "bare-send-ack-32-clients").run(
        Settings(quick=True), tmp_path
    )
    d = result.details
    # Every send was answered ok (the client checks each reply), and afterwards
    # the mailbox is empty with every cursor at its last seq (the run checks).
    assert result.unit == "acked sends"
    assert d["requests"] == 2000 // 32 * 4 * 32
    # The 32 clients' sends share commits.
    assert d["sends_per_commit"] > 1
    assert d["server_cpu_us_per_op"] > 0 and d["client_cpu_us_per_op"] > 0


def test_the_bare_send_ack_server_refuses_to_count_a_send_it_did_not_handle(
    tmp_path: Path,
) -> None:
    conn = _gateway_floor._open(tmp_path / "floor.sqlite3")
    try:
        writer = _gateway_floor._Writer(conn)
        acked: list[int] = []
        writer.enqueue("sink/c0", "t", b"{}", acked.append)
        writer.commit()  # stored and acked; its handling waits for the next commit
        assert acked == [1]
        refused = r"^2 sent by 1 clients: 1 acked, 1 stored, 1 actors with cursors 1\.\.1 "
        with pytest.raises(RuntimeError, match=refused):
            writer.check(1, 2)
        writer.check(1, 1)  # what it did do: one send, acked, stored and handled
    finally:
        conn.close()


def test_the_runtime_behind_the_leanest_server_acknowledges_and_handles_every_send(
    tmp_path: Path,
) -> None:
    result = _named(_runtime_floor.SCENARIOS, "runtime-send-ack-32-clients").run(
        Settings(quick=True), tmp_path
    )
    d = result.details
    # Every send was answered ok (the client checks each reply), with no error,
    # and every client's actor handled its last message (the run checks both).
    assert result.unit == "acked sends"
    assert d["requests"] == 2000 // 32 * 4 * 32
    # Through the runtime's own store: its writer's figures are there, and shared.
    assert d["writer_operations"] >= d["requests"]
    assert d["writer_batches"] < d["requests"]


def test_a_send_the_runtime_refuses_ends_the_run_behind_the_leanest_server_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trio

    import callboard

    sent = callboard.Runtime.send_nowait

    def refusing_the_fifth(self: callboard.Runtime, to: str, type: str, body: Any = None,
                           **kw: Any) -> bool:  # fmt: skip
        if body == {"i": 5}:
            kw["then"](RuntimeError("refused for the test"))
            return True
        return sent(self, to, type, body, **kw)

    monkeypatch.setattr(callboard.Runtime, "send_nowait", refusing_the_fifth)
    # Its client would wait for that ok for ever: the run ends, saying why.
    refused = r"^1 sends failed; the first: RuntimeError\('refused for the test'\)$"
    with pytest.raises(RuntimeError, match=refused):
        trio.run(_runtime_floor._floor, tmp_path, 2, 20, 1)


def _named(scenarios: list[Scenario], name: str) -> Scenario:
    (scenario,) = (s for s in scenarios if s.name == name)
    return scenario
