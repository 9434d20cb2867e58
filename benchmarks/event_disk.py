"""``python -m benchmarks.event_disk [--events N] [--size BYTES] [--actors K]``: bytes on disk.

Stores the same events three ways and prints the database's size once its
WAL is checkpointed away:

- ``v2 layout``: the ``events`` table of schema version 2 (WITHOUT ROWID),
  written with SQLite directly, 256 rows a transaction;
- ``v3 layout``: the table and index of this version's schema, the same way;
- ``v3 store``: the real store (``open_sqlite_store``), the events committed
  by actor steps of 256 events, then after a retention pass that keeps the
  newest ``--keep`` events per actor (and gives the pages back).
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import tempfile
import time
from pathlib import Path

import trio

from callboard.store import Commit, NewEvent, RetentionPolicy, RetentionStep, open_sqlite_store
from callboard.store._schema import SCHEMA

V2_EVENTS = """
CREATE TABLE events (
    address TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    data BLOB NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (address, seq)
) WITHOUT ROWID
"""

BATCH = 256


def v3_events() -> str:
    """The statements of this version's schema that make ``events`` and its index."""
    statements = [
        s for s in SCHEMA.split(";") if re.search(r"\bON events\b|TABLE IF NOT EXISTS events\b", s)
    ]
    return ";".join(statements)


def rows(events: int, size: int, actors: int) -> list[tuple[str, int, str, bytes, float]]:
    data = b'{"text": "' + b"x" * max(size - 12, 0) + b'"}'
    return [
        (f"session/s{i % actors:04d}", i // actors + 1, "turn.message", data, 1.8e9 + i)
        for i in range(events)
    ]


def size_on_disk(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def raw(directory: Path, ddl: str, data: list[tuple[str, int, str, bytes, float]]) -> int:
    path = directory / "raw.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.executescript(ddl)
    for start in range(0, len(data), BATCH):
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)", data[start : start + BATCH])
        conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return size_on_disk(path)


async def store(
    directory: Path, data: list[tuple[str, int, str, bytes, float]], keep: int
) -> tuple[int, int, float]:
    path = directory / "callboard.sqlite3"
    async with open_sqlite_store(directory) as s:
        for address in sorted({row[0] for row in data}):
            await s.spawn(address, "session", b"{}")
        by_actor: dict[str, list[NewEvent]] = {}
        for address, _, type_, body, at in data:
            by_actor.setdefault(address, []).append(NewEvent(type_, body, at))
        for address, events in by_actor.items():
            for start in range(0, len(events), BATCH):
                await s.commit(Commit(address, events=tuple(events[start : start + BATCH])))
        checkpoint(path)
        before = size_on_disk(path)
        started = time.perf_counter()
        step, ops = RetentionStep(), 0
        policy = RetentionPolicy(keep_events=keep)
        while not step.done:
            step = await s.retain(policy, RetentionStep(step.phase, step.after))
            ops += 1
        seconds = time.perf_counter() - started
        checkpoint(path)
        after = size_on_disk(path)
    print(f"  retention pass: {ops} ops in {seconds:.2f} s ({seconds / ops * 1000:.1f} ms an op)")
    return before, after, seconds


def checkpoint(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.event_disk", description=__doc__)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=1024, help="bytes of each event's data")
    parser.add_argument("--actors", type=int, default=4)
    parser.add_argument(
        "--keep", type=int, default=10_000, help="events the retention pass keeps per actor"
    )
    args = parser.parse_args()
    data = rows(args.events, args.size, args.actors)
    raw_mb = args.events * len(data[0][3]) / 1e6
    size = len(data[0][3])
    print(f"{args.events:,} events of {size:,} bytes ({raw_mb:.1f} MB), {args.actors} actors")
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        for name, ddl in (("v2 layout", V2_EVENTS), ("v3 layout", v3_events())):
            directory = Path(tmp) / name.replace(" ", "-")
            directory.mkdir()
            size = raw(directory, ddl, data)
            print(f"{name:10} {size / 1e6:9.1f} MB on disk ({size / 1e6 / raw_mb:.2f}x the data)")
        before, after, _ = trio.run(store, Path(tmp) / "store", data, args.keep)
        print(f"v3 store   {before / 1e6:9.1f} MB on disk ({before / 1e6 / raw_mb:.2f}x the data)")
        print(f"  after keeping {args.keep:,} per actor: {after / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
