"""What the store's writer keeps across operations and batches: `WriterState`.

The SQLite statements of each operation are in ``_ops_mailbox`` (messages,
actors, timers, dead letters, keys) and ``_ops_commit`` (an actor's step);
each takes an open connection inside a transaction and does one logical
operation, and the writer batches many of them into one COMMIT (one
fsync). Nothing here awaits: the writer runs these on the trio thread, or
in a worker thread on its slow path (see ``SqliteStore._write``). The store's
``WriterState`` carries the actors' counters across operations and batches,
and the rows and actor columns each batch defers to its end (written by
``flush``).
"""

from __future__ import annotations

import sqlite3
from typing import Any

# What ``flush`` writes for an actor with deferred steps (see ``WriterState``).
_STEP_UPDATE = (
    "UPDATE actors SET state = COALESCE(?, state), state_version = COALESCE(?, state_version), "
    "cursor = MAX(cursor, ?), busy = COALESCE(?, busy), mailbox_head = ?, event_head = ? "
    "WHERE address = ?"
)


class WriterState:
    """What the writer keeps across the operations of a batch, and across batches.

    One per store, used only by its writer (the only connection that writes
    the database), one batch at a time:

    - ``heads``: address -> ``(mailbox_head, event_head)`` of actors that are
      not final, as the open transaction sees them. It spares each operation
      an ``UPDATE ... RETURNING`` on ``actors``. (Tuples of ints: the garbage
      collector stops tracking them, so a full cache adds no gc objects.)
    - ``dirty``: the addresses in ``heads`` whose counters the ``actors``
      table does not hold yet; ``flush`` writes them once per actor per
      batch, before COMMIT. Every dirty address is in ``heads``, so an
      address missing from ``heads`` has its true counters in the table.
    - ``steps``: address -> ``[state, state_version, cursor, busy]`` that
      the batch's ordinary commits (see ``commit``) set and the table does
      not hold yet, merged in the batch's order (``None``: unchanged; the
      cursor a MAX, 0 for unchanged). ``flush`` writes them with the
      counters, one UPDATE per actor per batch. Every address in ``steps``
      is in ``heads``. No writer statement reads these columns; an
      operation that writes other columns of such an actor writes its
      steps first (``flush_actor``), so the table sees the batch's order.
    - The ``mailbox`` INSERTs, ``events`` INSERTs and ``mailbox`` DELETEs of
      the batch, deferred to one ``executemany`` each in ``flush``.

    ``forget`` after every ROLLBACK and on any failure: the table is then the
    truth again. ``trim`` between batches keeps ``heads`` bounded.
    """

    __slots__ = (
        "deleted_to",
        "deletes",
        "dirty",
        "event_rows",
        "heads",
        "inserted_from",
        "key_stamp",
        "life",
        "mailbox_rows",
        "max_heads",
        "steps",
    )

    def __init__(self, max_heads: int = 10_000, *, life: int = 0) -> None:
        self.max_heads = max_heads
        self.life = life  # stamped on every mailbox row stored (see `Store.life`)
        self.heads: dict[str, tuple[int, int]] = {}
        self.dirty: set[str] = set()
        self.steps: dict[str, list[Any]] = {}
        self.mailbox_rows: list[tuple[object, ...]] = []
        self.event_rows: list[tuple[object, ...]] = []
        self.deletes: list[tuple[str, int]] = []
        # Per address: the lowest seq of a deferred mailbox INSERT, and the
        # highest cursor of a deferred mailbox DELETE (see ``mailbox_read``).
        self.inserted_from: dict[str, int] = {}
        self.deleted_to: dict[str, int] = {}
        # What the batch stamps the idempotency keys it records with (see
        # ``SqliteStore.key_clock``); set by the writer before each batch.
        self.key_stamp = 0.0

    def forget(self) -> None:
        """Drop everything: after a ROLLBACK the table holds the truth."""
        self.heads.clear()
        self.dirty.clear()
        self._clear_deferred()

    def trim(self) -> None:
        """Between batches (nothing deferred): keep ``heads`` bounded."""
        if self.dirty or self.steps or self.mailbox_rows or self.event_rows or self.deletes:
            # A batch left something unwritten: never trust the cache then.
            self.forget()
        elif len(self.heads) > self.max_heads:
            self.heads.clear()

    def _clear_deferred(self) -> None:
        self.steps.clear()
        self.mailbox_rows.clear()
        self.event_rows.clear()
        self.deletes.clear()
        self.inserted_from.clear()
        self.deleted_to.clear()

    def flush(self, conn: sqlite3.Connection) -> None:
        """Write what the batch deferred; before COMMIT, or before a read that needs it."""
        heads = self.heads
        steps = self.steps
        if steps:
            conn.executemany(_STEP_UPDATE, [(*step, *heads[a], a) for a, step in steps.items()])
            if self.dirty:
                self.dirty.difference_update(steps)
            steps.clear()
        if self.dirty:
            conn.executemany(
                "UPDATE actors SET mailbox_head = ?, event_head = ? WHERE address = ?",
                [(*heads[address], address) for address in self.dirty],
            )
            self.dirty.clear()
        # INSERTs before DELETEs: a DELETE never covers a row stored later in
        # the batch (``commit`` checks it), so this order is the batch's order.
        if self.mailbox_rows:
            conn.executemany(
                "INSERT INTO mailbox (address, seq, type, body, sender, key, at, life) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                self.mailbox_rows,
            )
        if self.event_rows:
            conn.executemany(
                "INSERT INTO events (address, seq, type, data, at) VALUES (?, ?, ?, ?, ?)",
                self.event_rows,
            )
        if self.deletes:
            conn.executemany("DELETE FROM mailbox WHERE address = ? AND seq <= ?", self.deletes)
        self._clear_deferred()

    def mailbox_read(self, conn: sqlite3.Connection, address: str, first: int, last: int) -> None:
        """Called before a statement reads or updates ``address``'s mailbox rows
        ``first..last``: flushes if a deferred INSERT or DELETE touches them.

        Deferring the mailbox and events writes to the end of the batch is
        safe only because no operation of a batch reads a row another
        operation of the same batch wrote. For the hot paths that holds by
        construction: an actor reads, marks and dead-letters only messages it
        was handed, and it is handed a message only after the batch that stored
        it committed (and it deletes only up to a cursor it handled). Nothing
        in the writer reads ``events``, nor the ``actors`` columns that
        ``steps`` defers. The rare reads that could still see a
        deferred row (a dead letter or a mark for a message stored or deleted
        earlier in the same batch) flush first instead of relying on that.
        """
        start = self.inserted_from.get(address)
        if (start is not None and start <= last) or self.deleted_to.get(address, 0) >= first:
            self.flush(conn)

    def flush_actor(self, conn: sqlite3.Connection, address: str) -> None:
        """Write ``address``'s deferred steps and counters now, before a statement
        that writes its other columns (so the later commit's values win)."""
        step = self.steps.pop(address)
        conn.execute(_STEP_UPDATE, (*step, *self.heads[address], address))
        self.dirty.discard(address)

    def counters(self, conn: sqlite3.Connection, address: str) -> tuple[int, int] | None:
        """The live counters of an actor that takes messages; None if it is missing or final."""
        entry = self.heads.get(address)
        if entry is None:
            row = conn.execute(
                "SELECT mailbox_head, event_head FROM actors WHERE address = ? AND final = 0",
                (address,),
            ).fetchone()
            if row is None:
                return None
            entry = self.heads[address] = (row[0], row[1])
        return entry
