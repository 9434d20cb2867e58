"""SQLite baselines: what the disk allows, measured the way the store writes.

Same settings as ``callboard.store`` (WAL, ``synchronous=FULL``, autocommit
connection with explicit ``BEGIN IMMEDIATE`` / ``COMMIT``), a table shaped
like the mailbox, and the same kind of row (an address, a seq, a small JSON
body). Two figures:

- one row per commit: every row waits for its own fsync; rows/s is the
  ceiling of a runtime that commits once per message;
- 100 rows per commit: the fsync is shared; rows/s shows what group commit
  can reach on this disk before any Python overhead of the runtime.

``p50_ms``/``p99_ms`` are the latencies of one commit.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from . import CpuClock, Result, Scenario, Settings, percentile

__all__ = ["SCENARIOS"]

_SCHEMA = """
CREATE TABLE mailbox (
    address TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    body BLOB NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (address, seq)
) WITHOUT ROWID;
"""
_INSERT = "INSERT INTO mailbox (address, seq, type, body, at) VALUES (?, ?, ?, ?, ?)"
_BODY = b'{"n":1}'
_ADDRESSES = 64
_WARMUP_COMMITS = 50


def _open(directory: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(directory / "baseline.sqlite3", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.executescript(_SCHEMA)
    return conn


def _measure(workdir: Path, *, rows: int, per_commit: int) -> Result:
    conn = _open(workdir)
    seqs = [0] * _ADDRESSES
    counter = 0

    def one_commit() -> float:
        nonlocal counter
        batch = []
        for _ in range(per_commit):
            slot = counter % _ADDRESSES
            counter += 1
            seqs[slot] += 1
            batch.append((f"counter/a{slot}", seqs[slot], "add", _BODY, time.time()))
        started = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        if per_commit == 1:
            conn.execute(_INSERT, batch[0])
        else:
            conn.executemany(_INSERT, batch)
        conn.execute("COMMIT")
        return time.perf_counter() - started

    try:
        for _ in range(_WARMUP_COMMITS):
            one_commit()
        commits = rows // per_commit
        latencies = []
        clock = CpuClock()
        for _ in range(commits):
            latencies.append(one_commit())
        timing = clock.stop()
    finally:
        conn.close()
    done = commits * per_commit
    return Result(
        ops_per_s=done / timing["seconds"],
        p50_ms=percentile(latencies, 50) * 1e3,
        p99_ms=percentile(latencies, 99) * 1e3,
        unit="rows",
        details={
            "rows": done,
            "rows_per_commit": per_commit,
            "commits_per_s": round(commits / timing["seconds"], 1),
            **timing,
        },
    )


def commit_per_row(settings: Settings, workdir: Path) -> Result:
    return _measure(workdir, rows=1_000 if settings.quick else 6_000, per_commit=1)


def hundred_rows_per_commit(settings: Settings, workdir: Path) -> Result:
    return _measure(workdir, rows=30_000 if settings.quick else 200_000, per_commit=100)


def _summary(result: Result) -> str:
    d = result.details
    return f"{d['rows']} rows, {d['commits_per_s']} commits/s"


SCENARIOS = [
    Scenario(
        "sqlite-commit-per-row",
        commit_per_row,
        quick_repeats=3,
        note="1 row/commit: the fsync ceiling",
        summary=_summary,
    ),
    Scenario(
        "sqlite-100-rows-per-commit",
        hundred_rows_per_commit,
        baseline="sqlite-commit-per-row",
        quick_repeats=3,
        note="100 rows/commit",
        summary=_summary,
    ),
]
