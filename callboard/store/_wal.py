"""Keeping the write-ahead log under a bound, whoever reads the database.

SQLite checkpoints the WAL by itself after a commit that leaves it past 1000
pages (PASSIVE: it copies back what it can and never waits). But it can copy
back only the frames no reader still needs, and it starts the file over only
once every frame is copied and no reader is left in it. So one read
transaction held open (another process, a backup, a cursor left half read)
makes every later commit append to the file, and without a limit the file
keeps its largest size after the reader has gone: 4 MB grew to 4,966 MB in
a minute under load, and stayed there.

Two things bound it, both at `WAL_SIZE_LIMIT`:

- ``journal_size_limit``: when SQLite starts the log over it truncates the
  file back to the limit (on the first commits after the reader has gone).
- `WalCheckpointer`: after a batch, when the file has reached the limit, the
  writer runs ``wal_checkpoint(TRUNCATE)`` in a worker thread, after the
  batch was acknowledged. With the writer's ``busy_timeout`` of 0 a reader
  that still holds the log makes it return at once (about 50 µs); the
  writer tries again `WAL_CHECKPOINT_RETRY` batches later, and once the
  reader has gone the file goes back to zero bytes. It does not rely on
  SQLite's own checkpoints starting the log over: readers that overlap,
  each short, can keep them from ever doing so.

A WAL under the limit (the usual case: the automatic checkpoints keep it
near 4 MB plus a batch) costs one ``stat`` every `WAL_STAT_EVERY` batches
and nothing else: a ``stat`` after each batch was 1.5% of the CPU with one
gateway client, and a few batches more before the limit is seen matter
nothing beside a limit 16 times the usual size. The
limit is far above that on purpose: cutting a file that huge batches
merely fill would make every next commit grow it again, and an fsync that
also changes a file's size costs more.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

import attrs

__all__ = [
    "WAL_CHECKPOINT_RETRY",
    "WAL_SIZE_LIMIT",
    "WAL_STAT_EVERY",
    "WalCheckpointer",
    "limit_wal",
]

log = logging.getLogger("callboard.store")

WAL_SIZE_LIMIT = 64 * 1024 * 1024
"""Bytes of WAL file at which the writer checkpoints and truncates it, and that
SQLite truncates it back to when it starts the log over."""

WAL_CHECKPOINT_RETRY = 16
"""Batches the writer lets pass before it tries again a checkpoint that a
reader blocked: a retry is cheap, but a reader may hold on for minutes."""


WAL_STAT_EVERY = 8
"""The writer looks at the WAL's size once every this many batches."""


def limit_wal(conn: sqlite3.Connection) -> None:
    conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")


@attrs.define
class WalCheckpointer:
    """When the writer should checkpoint the WAL at ``path``, and the checkpoint.

    `due` runs on the trio thread after each batch; `checkpoint` in a worker
    thread, on the writer's connection, between batches (the writer waits
    for it, so nothing else uses the connection meanwhile).
    """

    path: Path
    _wait: int = 0  # batches to let pass before the next look at the size

    def due(self) -> bool:
        if self._wait:
            self._wait -= 1
            return False
        self._wait = WAL_STAT_EVERY - 1
        try:
            return os.stat(self.path).st_size >= WAL_SIZE_LIMIT
        except FileNotFoundError:
            return False

    def checkpoint(self, conn: sqlite3.Connection) -> None:
        try:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error as exc:
            # The log is intact and the next commits still land in it: a
            # checkpoint that failed costs disk space, not data, and is retried.
            log.warning("checkpointing %s failed (%s); retrying later", self.path, exc)
            busy = 1
        if busy:
            self._wait = WAL_CHECKPOINT_RETRY
