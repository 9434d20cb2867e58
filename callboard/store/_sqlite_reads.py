"""The reads of `SqliteStore`: the SQL behind each of the `Store` protocol's reads.

They run on the store's reader connection on the trio thread (indexed reads
of a local file, each ended before it returns), except the replay's pages,
which go to worker threads (`EventReaders`). A base class of `SqliteStore`,
apart from the writer because no read takes part in a transaction;
`SqliteStore.__init__` sets the connection and the event readers declared here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from ..errors import Pruned, RuntimeClosed
from ._event_reads import EventReaders
from ._records import ActorRecord, DeadLetterRecord, EventPage, EventRecord, MailboxRecord

_ACTOR_COLUMNS = (
    "address, kind, spec, status, final, state, state_version, cursor, mailbox_head, "
    "event_head, restarts, busy, last_error, created_at, events_from, stopped_at, paused"
)


class SqliteReads:
    """The read methods of `SqliteStore` (see the module)."""

    _reader: sqlite3.Connection | None
    _event_reads: EventReaders

    # -- reads ---------------------------------------------------------------
    # Async by the `Store` protocol; on SQLite they are indexed reads of a
    # local file, fast enough to run on the trio thread without a hop (the
    # replay's pages, which can be large, go to a worker: `read_events`).

    def _read(self, sql: str, args: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        if self._reader is None:
            raise RuntimeClosed("the store is closed")
        # Every read goes through here, and ``fetchall`` steps the statement
        # to its end, which resets it and so ends its read transaction before
        # this returns. (A cursor left half read would pin the WAL: no
        # checkpoint could start the log over while it lives.)
        return self._reader.execute(sql, args).fetchall()

    async def actor(self, address: str) -> ActorRecord | None:
        rows = self._read(f"SELECT {_ACTOR_COLUMNS} FROM actors WHERE address = ?", (address,))
        return ActorRecord.from_row(rows[0]) if rows else None

    async def actors(
        self, kind: str | None = None, *, status: str | None = None, after: str | None = None,
        limit: int = 10_000,
    ) -> list[ActorRecord]:  # fmt: skip
        """At most ``limit`` actors in address order, past ``after`` (a page)."""
        where: list[str] = []
        args: list[object] = []
        for clause, value in (("kind = ?", kind), ("status = ?", status), ("address > ?", after)):
            if value is not None:
                where.append(clause)
                args.append(value)
        condition = f"WHERE {' AND '.join(where)} " if where else ""
        rows = self._read(
            f"SELECT {_ACTOR_COLUMNS} FROM actors {condition}ORDER BY address LIMIT ?",
            (*args, limit),
        )
        return [ActorRecord.from_row(r) for r in rows]

    async def pending(self, address: str, after: int, limit: int) -> list[MailboxRecord]:
        rows = self._read(
            "SELECT address, seq, type, body, sender, key, attempts, at, life FROM mailbox "
            "WHERE address = ? AND seq > ? ORDER BY seq LIMIT ?",
            (address, after, limit),
        )
        return [MailboxRecord(*r) for r in rows]

    async def events(self, address: str, after: int, limit: int) -> list[EventRecord]:
        """Events after seq ``after``; `Pruned` if retention removed some (never a gap)."""
        rows = self._read(
            "SELECT address, seq, type, data, at FROM events "
            "WHERE address = ? AND seq > ? ORDER BY seq LIMIT ?",
            (address, after, limit),
        )
        if not rows or rows[0][1] != after + 1:
            self._check_held(address, after)
        return [EventRecord(*r) for r in rows]

    async def read_events(
        self, address: str, after: int, *, limit: int, max_bytes: int
    ) -> EventPage:
        """The next page of ``address``'s events after seq ``after``: at most
        ``limit`` events and ``max_bytes`` bytes of their data, but always the
        next event if there is one. Read on a worker thread (`EventReaders`);
        a cancel point only before the read starts. Raises `Pruned` when
        retention removed the events asked for."""
        if self._reader is None:
            raise RuntimeClosed("the store is closed")
        page = await self._event_reads.read(address, after, limit=limit, max_bytes=max_bytes)
        if not page.events or page.events[0].seq != after + 1:
            self._check_held(address, after)
        return page

    async def check_held(self, address: str, after: int) -> None:
        """Raise `Pruned` if retention removed events of ``address`` after seq ``after``.
        (It removes them from the oldest up, moving ``events_from`` with them.)"""
        self._check_held(address, after)

    def _check_held(self, address: str, after: int) -> None:
        rows = self._read("SELECT events_from FROM actors WHERE address = ?", (address,))
        if rows and rows[0][0] > after + 1:
            raise Pruned(address, rows[0][0])

    async def addresses_with_work(self, now: float) -> list[str]:
        """Actors a killed process left with something to do, and no others."""
        rows = self._read(
            # A paused actor's mailbox waits for its resume: only its work does.
            "SELECT address FROM actors WHERE final = 0 "
            "AND (busy = 1 OR (cursor < mailbox_head AND paused = 0)) "
            "UNION SELECT DISTINCT address FROM timers WHERE due <= ?",
            (now,),
        )
        return sorted(r[0] for r in rows)

    async def status_counts(self) -> dict[str, int]:
        """How many actors have each stored status (``idle`` for the ones in memory too)."""
        return dict(self._read("SELECT status, COUNT(*) FROM actors GROUP BY status"))

    async def dead_letter_count(self) -> int:
        return int(self._read("SELECT COUNT(*) FROM dead_letters")[0][0])

    async def next_timer_due(self) -> float | None:
        rows = self._read("SELECT MIN(due) FROM timers")
        return rows[0][0] if rows else None

    async def dead_letters(self, address: str | None = None) -> list[DeadLetterRecord]:
        cols = "id, address, seq, type, body, sender, key, attempts, error, at"
        if address is None:
            rows = self._read(f"SELECT {cols} FROM dead_letters ORDER BY id")
        else:
            rows = self._read(
                f"SELECT {cols} FROM dead_letters WHERE address = ? ORDER BY id", (address,)
            )
        return [DeadLetterRecord(*r) for r in rows]

    async def read_log(
        self, address: str, log: str, start: int = 0, limit: int = 1000
    ) -> list[bytes]:
        rows = self._read(
            "SELECT data FROM logs WHERE address = ? AND log = ? AND idx >= ? ORDER BY idx LIMIT ?",
            (address, log, start, limit),
        )
        return [r[0] for r in rows]

    async def log_length(self, address: str, log: str) -> int:
        rows = self._read(
            "SELECT COALESCE(MAX(idx), -1) + 1 FROM logs WHERE address = ? AND log = ?",
            (address, log),
        )
        return int(rows[0][0])
