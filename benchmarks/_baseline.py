"""SQLite baselines: what the disk allows, measured the way the store writes.

Same settings as ``callboard.store`` (WAL, ``synchronous=FULL``, autocommit
connection with explicit ``BEGIN IMMEDIATE`` / ``COMMIT``), a table shaped
like the mailbox, and the same kind of row (an address, a seq, a small JSON
body). Two figures:

- one row per commit: every row waits for its own fsync; rows/s is the
  ceiling of a runtime that commits once per message;
- 100 rows per commit: the fsync is shared; rows/s shows what group commit
  can reach on this disk before any Python overhead of the runtime.

``p50_ms``/``p99_ms`` of these two are the latencies of one commit.

A third, ``bare-group-commit``, is what the durable scenarios are held
against: the runtime's shape of work with nothing of the runtime in it.
64 trio tasks each send a row and await its ack, then send the next; one
writer on one long-lived OS thread takes everything queued, writes it in one
``BEGIN IMMEDIATE`` ... ``COMMIT`` on a table with the store's mailbox
columns, and hands the acks back to trio in one ``run_sync_soon`` per commit.
No actor, no handling, no encoding: a runtime that commits its sends in
groups cannot beat it on this disk and this interpreter. Its ``p50_ms``/
``p99_ms`` are ack latencies (queued to woken), as the durable scenarios'.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import outcome  # trio's own dependency
import trio

from . import CpuClock, Result, Scenario, Settings, cpu_per_op, percentile

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


def _open(directory: Path, schema: str = _SCHEMA, **kwargs: Any) -> sqlite3.Connection:
    conn = sqlite3.connect(directory / "baseline.sqlite3", isolation_level=None, **kwargs)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.executescript(schema)
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
            **cpu_per_op(timing, done),
        },
    )


def commit_per_row(settings: Settings, workdir: Path) -> Result:
    return _measure(workdir, rows=1_000 if settings.quick else 6_000, per_commit=1)


def hundred_rows_per_commit(settings: Settings, workdir: Path) -> Result:
    return _measure(workdir, rows=30_000 if settings.quick else 200_000, per_commit=100)


# -- bare group commit ----------------------------------------------------------------

# The columns of the store's mailbox table (callboard/store/_schema.py), and the
# columns its writer fills.
_MAILBOX_SCHEMA = """
CREATE TABLE mailbox (
    address TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    body BLOB NOT NULL,
    sender TEXT,
    key TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    at REAL NOT NULL,
    life INTEGER,
    PRIMARY KEY (address, seq)
) WITHOUT ROWID;
"""
_MAILBOX_INSERT = (
    "INSERT INTO mailbox (address, seq, type, body, sender, key, at, life) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_LIFE = 1 << 61  # a store life's size (see `Store.life`)
_SENDERS = 64
_WARMUP_SENDS = 5  # per sender, before the clock starts


def _refuse_abort(_: object) -> trio.lowlevel.Abort:
    return trio.lowlevel.Abort.FAILED  # a queued row will be written: wait for the outcome


def _wake(tasks: list[trio.lowlevel.Task], error: BaseException | None) -> None:
    """On the trio thread: the acks of one commit."""
    for task in tasks:
        if error is None:
            trio.lowlevel.reschedule(task)
        else:
            trio.lowlevel.reschedule(task, outcome.Error(error))


class _Writer(threading.Thread):
    """One OS thread for the whole run: takes every row queued, one transaction
    for all of them, then one ``run_sync_soon`` that wakes their senders."""

    def __init__(self, conn: sqlite3.Connection, token: trio.lowlevel.TrioToken) -> None:
        super().__init__(name="bare-group-commit-writer", daemon=True)
        self.queue: queue.SimpleQueue[tuple[tuple[Any, ...], trio.lowlevel.Task] | None] = (
            queue.SimpleQueue()
        )
        self._conn = conn
        self._token = token
        self.commits = 0
        self.rows = 0
        self.largest = 0
        self.commit_s = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        get, get_nowait, conn = self.queue.get, self.queue.get_nowait, self._conn
        stopping = False
        while not stopping:
            first = get()
            if first is None:
                return
            batch = [first]
            while True:
                try:
                    op = get_nowait()
                except queue.Empty:
                    break
                if op is None:
                    stopping = True
                    break
                batch.append(op)
            started = time.perf_counter()
            if self.error is None:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    conn.executemany(_MAILBOX_INSERT, [row for row, _ in batch])
                    conn.execute("COMMIT")
                except Exception as exc:  # every waiter must hear of it, or it hangs
                    self.error = exc
            self.commit_s += time.perf_counter() - started
            self.commits += 1
            self.rows += len(batch)
            self.largest = max(self.largest, len(batch))
            self._token.run_sync_soon(_wake, [task for _, task in batch], self.error)


async def _bare_group_commit(conn: sqlite3.Connection, messages: int) -> Result:
    writer = _Writer(conn, trio.lowlevel.current_trio_token())
    writer.start()
    put = writer.queue.put
    per_sender = messages // _SENDERS
    seqs = [0] * _SENDERS
    latencies: list[list[float]] = []

    async def sender(slot: int, count: int, mine: list[float] | None) -> None:
        address = f"counter/a{slot}"
        current, now = trio.lowlevel.current_task(), time.perf_counter
        for _ in range(count):
            seqs[slot] += 1
            row = (address, seqs[slot], "add", _BODY, None, None, time.time(), _LIFE)
            started = now()
            put((row, current))
            await trio.lowlevel.wait_task_rescheduled(_refuse_abort)
            if mine is not None:
                mine.append(now() - started)

    try:
        async with trio.open_nursery() as nursery:
            for slot in range(_SENDERS):
                nursery.start_soon(sender, slot, _WARMUP_SENDS, None)
        commits, rows, commit_s = writer.commits, writer.rows, writer.commit_s
        clock = CpuClock()
        async with trio.open_nursery() as nursery:
            for slot in range(_SENDERS):
                mine: list[float] = []
                latencies.append(mine)
                nursery.start_soon(sender, slot, per_sender, mine)
        timing = clock.stop()
    finally:
        put(None)
        writer.join()
    commits, rows = writer.commits - commits, writer.rows - rows
    sent = per_sender * _SENDERS
    if rows != sent:
        raise RuntimeError(f"{sent} rows sent but {rows} written")
    flat = [x for mine in latencies for x in mine]
    return Result(
        ops_per_s=sent / timing["seconds"],
        p50_ms=percentile(flat, 50) * 1e3,
        p99_ms=percentile(flat, 99) * 1e3,
        unit="rows",
        details={
            "rows": sent,
            "senders": _SENDERS,
            "ack_max_ms": round(max(flat) * 1e3, 3),
            "commits": commits,
            "rows_per_commit": round(rows / commits, 2),
            "largest_commit": writer.largest,
            "commits_per_s": round(commits / timing["seconds"], 1),
            "writer_busy": round((writer.commit_s - commit_s) / timing["seconds"], 3),
            **timing,
            **cpu_per_op(timing, sent),
        },
    )


def bare_group_commit(settings: Settings, workdir: Path) -> Result:
    # The same number of messages as the durable scenarios it is their baseline for.
    messages = 12_000 if settings.quick else 100_000
    # Made here, used on the writer's thread only (sqlite3 checks the thread otherwise).
    conn = _open(workdir, _MAILBOX_SCHEMA, check_same_thread=False)
    try:
        return trio.run(_bare_group_commit, conn, messages)
    finally:
        conn.close()


def _summary(result: Result) -> str:
    d = result.details
    return (
        f"{d['rows']} rows, {d['commits_per_s']} commits/s, {d['rows_per_commit']} rows/commit; "
        f"cpu {d['cpu_us_per_op']} us/row"
    )


def _group_summary(result: Result) -> str:
    d = result.details
    return (
        f"{d['rows']} rows in {d['seconds']:.2f}s; {d['commits']} commits, "
        f"{d['rows_per_commit']} rows/commit, writer busy {d['writer_busy']:.0%}; "
        f"cpu trio thread {d['cpu_us_per_op_trio_thread']} us/row, writer thread "
        f"{d['cpu_us_per_op_other_threads']} us/row"
    )


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
    Scenario(
        "bare-group-commit",
        bare_group_commit,
        quick_repeats=3,
        note="64 trio senders, 1 writer thread, all queued rows in 1 commit; ack after COMMIT",
        summary=_group_summary,
    ),
]
