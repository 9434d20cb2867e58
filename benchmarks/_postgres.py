"""Scenarios on PostgreSQL: the durable core on the PostgreSQL store, beside a
bare psycopg group commit of the same rows (its baseline), as the SQLite
scenarios stand beside ``bare-group-commit``.

The database: ``CALLBOARD_BENCH_PG`` (a ``postgresql://`` URL of a server to
use; each run makes and drops a database of its own there), or else a
throwaway server each run starts (in a temporary directory) and stops (``initdb`` and
``pg_ctl`` from Debian's ``postgresql``; as root, run as the ``postgres``
user, which ``initdb`` insists on). The bare baseline writes the store's own
``mailbox`` rows, with ``synchronous_commit=on``, one transaction for every
row queued, from one writer thread: what the store's writer does, with no
runtime, no handling and no commit of an actor. A second baseline,
``bare-psycopg-commit-per-row``, writes the same rows one COMMIT each (the
analogue of ``sqlite-commit-per-row``): what a runtime that committed every
message on its own would be held to, one round trip and one WAL flush a row.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import trio

from . import CpuClock, Result, Scenario, Settings, _baseline, _core, cpu_per_op, percentile

__all__ = ["SCENARIOS"]

_USER = "callboard"


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(
        Path("/usr/lib/postgresql").glob(f"*/bin/{name}"),
        key=lambda path: int(path.parts[-3]) if path.parts[-3].isdigit() else 0,
    )
    if not versions:
        raise RuntimeError(
            f"PostgreSQL's {name} is not installed (apt-get install postgresql), and "
            "CALLBOARD_BENCH_PG names no server"
        )
    return str(versions[-1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _admin(url: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement)


@contextmanager
def _database(workdir: Path) -> Iterator[str]:
    """The URL of an empty database for one run (see the module)."""
    given = os.environ.get("CALLBOARD_BENCH_PG")
    if given:
        name = f"bench_{os.getpid()}"
        _admin(given, f"CREATE DATABASE {name}")
        try:
            yield re.sub(r"/[^/?]*(\?|$)", f"/{name}\\1", given, count=1)
        finally:
            _admin(given, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        return
    # Not in ``workdir``: the postgres user must reach it, and may not reach
    # the directories above the repository.
    root = Path(tempfile.mkdtemp(prefix="callboard-bench-pg-"))
    prefix: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    root.chmod(0o700)

    def run(*argv: str) -> None:
        subprocess.run([*prefix, *argv], check=True, capture_output=True)

    port, pg_ctl = _free_port(), _binary("pg_ctl")
    run(_binary("initdb"), "-D", str(root / "db"), "-A", "trust", "-U", _USER, "-E", "UTF8")
    options = f"-k {root} -c listen_addresses=127.0.0.1 -p {port}"
    run(pg_ctl, "-D", str(root / "db"), "-o", options, "-l", str(root / "log"), "-w", "start")
    try:
        url = f"postgresql://{_USER}@127.0.0.1:{port}/postgres"
        _admin(url, "CREATE DATABASE bench")
        yield url.rsplit("/", 1)[0] + "/bench"
    finally:
        try:
            run(pg_ctl, "-D", str(root / "db"), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(root, ignore_errors=True)


class _Psycopg:
    """The part of `sqlite3.Connection` the bare baseline's writer calls, on psycopg."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str) -> None:
        if sql == "COMMIT":
            self._conn.commit()
        # "BEGIN IMMEDIATE": psycopg begins the transaction with its first statement.

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._conn.cursor() as cursor:
            cursor.executemany(sql.replace("?", "%s"), rows)


def bare_psycopg_group_commit(settings: Settings, workdir: Path) -> Result:
    from callboard.store._pg_connect import connect
    from callboard.store._pg_schema import prepare

    messages = 12_000 if settings.quick else 100_000
    with _database(workdir) as url:
        conn = connect(url, autocommit=False)  # synchronous_commit=on, as the store's
        try:
            prepare(conn, url)  # the store's own tables
            writer: Any = _Psycopg(conn)  # what `_baseline._Writer` calls of sqlite3's
            return trio.run(_baseline._bare_group_commit, writer, messages)
        finally:
            conn.close()


def bare_psycopg_commit_per_row(settings: Settings, workdir: Path) -> Result:
    from callboard.store._pg_connect import connect
    from callboard.store._pg_schema import prepare

    rows = 1_000 if settings.quick else 6_000  # as many as sqlite-commit-per-row
    insert = _baseline._MAILBOX_INSERT.replace("?", "%s")
    seqs = [0] * _baseline._SENDERS
    counter = 0

    def one_commit(conn: Any) -> float:
        nonlocal counter
        slot = counter % _baseline._SENDERS
        counter += 1
        seqs[slot] += 1
        address, body, life = f"counter/a{slot}", _baseline._BODY, _baseline._LIFE
        row = (address, seqs[slot], "add", body, None, None, time.time(), life)
        started = time.perf_counter()
        conn.execute(insert, row)
        conn.commit()
        return time.perf_counter() - started

    with _database(workdir) as url:
        conn = connect(url, autocommit=False)  # synchronous_commit=on, as the store's
        try:
            prepare(conn, url)
            for _ in range(_baseline._WARMUP_COMMITS):
                one_commit(conn)
            clock = CpuClock()
            latencies = [one_commit(conn) for _ in range(rows)]
            timing = clock.stop()
        finally:
            conn.close()
    return Result(
        ops_per_s=rows / timing["seconds"],
        p50_ms=percentile(latencies, 50) * 1e3,
        p99_ms=percentile(latencies, 99) * 1e3,
        unit="rows",
        details={
            "rows": rows,
            "rows_per_commit": 1,
            "commits_per_s": round(rows / timing["seconds"], 1),
            **timing,
            **cpu_per_op(timing, rows),
        },
    )


def durable_many_postgresql(settings: Settings, workdir: Path) -> Result:
    messages = 12_000 if settings.quick else 100_000
    with _database(workdir) as url:
        return trio.run(
            lambda: _core._durable(workdir, actors=64, senders=64, messages=messages, store=url)
        )


SCENARIOS = [
    Scenario(
        "bare-psycopg-commit-per-row",
        bare_psycopg_commit_per_row,
        quick_repeats=3,
        note="1 row/COMMIT (synchronous_commit=on): one round trip and WAL flush a row",
        summary=_baseline._summary,
    ),
    Scenario(
        "bare-psycopg-group-commit",
        bare_psycopg_group_commit,
        baseline="bare-psycopg-commit-per-row",
        quick_repeats=3,
        note="64 senders, one psycopg writer thread, one COMMIT per batch",
        summary=_baseline._group_summary,
    ),
    Scenario(
        "durable-64-senders-64-actors-postgresql",
        durable_many_postgresql,
        baseline="bare-psycopg-group-commit",
        quick_repeats=3,
        note="durable-64-senders-64-actors on the PostgreSQL store",
        summary=_core._durable_summary,
    ),
]
