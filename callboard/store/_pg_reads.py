"""The reads of `PostgresStore`: the SQL behind each of the `Store` protocol's reads.

The same reads as ``_sqlite_reads``, in PostgreSQL's dialect. Each runs on a
worker thread, on a connection of a small pool of its own (a connection
serves one thread at a time), in autocommit: every statement takes a fresh
snapshot, so a read sees every write whose COMMIT returned before it began,
and holds no transaction across an ``await``.

A read never runs while a batch of writes is on the writer's thread: they
take turns on one lane (the writer's `trio.CapacityLimiter`). So a read
sees the store as of a moment between batches, and the task that read
resumes before the next batch can be acknowledged, as with SQLite's reads
on the trio thread. The runtime relies on that: `Runtime.wait_handled`
reads an actor's cursor and then waits for it to move, and a commit
acknowledged in between would be missed. Pages of events, which may be
big, take turns among themselves instead (nobody waits on their outcome
that way: a replay reads until it meets the live events).

A page of events (`read_events`) is bounded in events and bytes by the
statement itself, with window functions over the index's order: the first
event always, then each while the page stays within both bounds; the first
event left out comes back without its data, which tells there are more.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import psycopg
import trio

from ..errors import Pruned, RuntimeClosed, StoreUnavailable
from ._pg_lease import OWNER_JOIN
from ._records import ActorRecord, DeadLetterRecord, EventPage, EventRecord, MailboxRecord

# With its owner: the node holding its lease, if that lease is live.
_ACTOR_COLUMNS = (
    ", ".join(
        f"actors.{column}"
        for column in (
            "address, kind, spec, status, final, state, state_version, cursor, mailbox_head, "
            "event_head, restarts, busy, last_error, created_at, events_from, stopped_at, paused"
        ).split(", ")
    )
    + ", n.node"
)
_ACTORS = f"SELECT {_ACTOR_COLUMNS} FROM actors {OWNER_JOIN}"

# ``taken`` is true for the rows the page holds; one row past ``limit`` is
# read (and left out) to tell whether more were stored.
_EVENT_PAGE = (
    "SELECT address, seq, type, CASE WHEN taken THEN data END, at FROM ("
    "SELECT address, seq, type, data, at, "
    "row_number() OVER w = 1 OR (row_number() OVER w <= %(limit)s "
    "AND sum(octet_length(data)) OVER w <= %(max_bytes)s) AS taken "
    "FROM events WHERE address = %(address)s AND seq > %(after)s "
    "WINDOW w AS (ORDER BY seq) ORDER BY seq LIMIT %(limit)s + 1) page ORDER BY seq"
)

_READ_THREADS = 4


class ReaderPool:
    """Up to ``size`` autocommit connections, each lent to one worker thread at a time."""

    def __init__(
        self,
        connect: Callable[[], psycopg.Connection[Any]],
        scrub: Callable[[str], str],
        lane: trio.CapacityLimiter,
        size: int = _READ_THREADS,
    ) -> None:
        self._connect = connect
        self._scrub = scrub
        self._lane = lane
        self._idle: list[psycopg.Connection[Any]] = []
        self._threads = trio.CapacityLimiter(size)
        self._closed = False

    async def rows(self, sql: str, args: Sequence[object] | dict[str, object] = ()) -> list[Any]:
        """A short read, between two batches of the writer (see the module)."""
        if self._closed:
            raise RuntimeClosed("the store is closed")
        return await trio.to_thread.run_sync(self._rows, sql, args, limiter=self._lane)

    async def page(self, sql: str, args: dict[str, object]) -> list[Any]:
        """A page of events: beside the writer, at most ``size`` at once."""
        if self._closed:
            raise RuntimeClosed("the store is closed")
        return await trio.to_thread.run_sync(self._rows, sql, args, limiter=self._threads)

    def _rows(self, sql: str, args: Sequence[object] | dict[str, object]) -> list[Any]:
        # list.pop and list.append are atomic: the idle list needs no lock.
        try:
            conn = self._idle.pop()
        except IndexError:
            conn = self._connect()
        else:
            if conn.broken or conn.closed:
                conn = self._connect()
        try:
            try:
                return conn.execute(sql, args).fetchall()
            except psycopg.OperationalError:
                if not conn.broken:
                    raise
            # An idle connection the server ended (a restart, an administrator):
            # a read changes nothing, so it is read again on a new one, once.
            conn.close()
            conn = self._connect()
            return conn.execute(sql, args).fetchall()
        except psycopg.Error as exc:
            conn.close()  # whatever state it is in, a new one replaces it
            raise StoreUnavailable(
                f"the PostgreSQL store could not read ({self._scrub(str(exc).strip())})"
            ) from None
        finally:
            if self._closed or conn.closed:
                conn.close()
            else:
                self._idle.append(conn)

    def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()


class PgReads:
    """The read methods of `PostgresStore` (see the module)."""

    _reads: ReaderPool

    async def actor(self, address: str) -> ActorRecord | None:
        rows = await self._reads.rows(f"{_ACTORS} WHERE actors.address = %s", (address,))
        return ActorRecord.from_row(rows[0]) if rows else None

    async def actors(
        self, kind: str | None = None, *, status: str | None = None, after: str | None = None,
        limit: int = 10_000,
    ) -> list[ActorRecord]:  # fmt: skip
        """At most ``limit`` actors in address order, past ``after`` (a page)."""
        where: list[str] = []
        args: list[object] = []
        filters = (
            ("actors.kind = %s", kind),
            ("actors.status = %s", status),
            ("actors.address > %s", after),
        )
        for clause, value in filters:
            if value is not None:
                where.append(clause)
                args.append(value)
        condition = f"WHERE {' AND '.join(where)} " if where else ""
        rows = await self._reads.rows(
            f"{_ACTORS} {condition}ORDER BY actors.address LIMIT %s",
            (*args, limit),
        )
        return [ActorRecord.from_row(r) for r in rows]

    async def pending(self, address: str, after: int, limit: int) -> list[MailboxRecord]:
        rows = await self._reads.rows(
            "SELECT address, seq, type, body, sender, key, attempts, at, life FROM mailbox "
            "WHERE address = %s AND seq > %s ORDER BY seq LIMIT %s",
            (address, after, limit),
        )
        return [MailboxRecord(*r) for r in rows]

    async def events(self, address: str, after: int, limit: int) -> list[EventRecord]:
        """Events after seq ``after``; `Pruned` if retention removed some (never a gap)."""
        rows = await self._reads.rows(
            "SELECT address, seq, type, data, at FROM events "
            "WHERE address = %s AND seq > %s ORDER BY seq LIMIT %s",
            (address, after, limit),
        )
        if not rows or rows[0][1] != after + 1:
            await self.check_held(address, after)
        return [EventRecord(*r) for r in rows]

    async def read_events(
        self, address: str, after: int, *, limit: int, max_bytes: int
    ) -> EventPage:
        """The next page of ``address``'s events after seq ``after``: at most
        ``limit`` events and ``max_bytes`` bytes of their data, but always the
        next event if there is one. `Pruned` if retention removed them."""
        rows = await self._reads.page(
            _EVENT_PAGE,
            {"address": address, "after": after, "limit": limit, "max_bytes": max_bytes},
        )
        events: list[EventRecord] = []
        more = False
        for row in rows:
            if row[3] is None:
                more = True
                break
            events.append(EventRecord(*row))
        if not events or events[0].seq != after + 1:
            await self.check_held(address, after)
        return EventPage(tuple(events), more=more)

    async def check_held(self, address: str, after: int) -> None:
        """Raise `Pruned` if retention removed events of ``address`` after seq ``after``."""
        rows = await self._reads.rows(
            "SELECT events_from FROM actors WHERE address = %s", (address,)
        )
        if rows and rows[0][0] > after + 1:
            raise Pruned(address, rows[0][0])

    async def addresses_with_work(self, now: float) -> list[str]:
        """Actors a killed process left with something to do, and no others."""
        rows = await self._reads.rows(
            # A paused actor's mailbox waits for its resume: only its work does.
            "SELECT address FROM actors WHERE final = 0 "
            "AND (busy = 1 OR (cursor < mailbox_head AND paused = 0)) "
            "UNION SELECT DISTINCT address FROM timers WHERE due <= %s",
            (now,),
        )
        return sorted(r[0] for r in rows)

    async def status_counts(self) -> dict[str, int]:
        rows = await self._reads.rows("SELECT status, COUNT(*) FROM actors GROUP BY status")
        return {status: int(count) for status, count in rows}

    async def dead_letter_count(self) -> int:
        return int((await self._reads.rows("SELECT COUNT(*) FROM dead_letters"))[0][0])

    async def next_timer_due(self) -> float | None:
        rows = await self._reads.rows("SELECT MIN(due) FROM timers")
        return rows[0][0] if rows else None

    async def dead_letters(self, address: str | None = None) -> list[DeadLetterRecord]:
        cols = "id, address, seq, type, body, sender, key, attempts, error, at"
        if address is None:
            rows = await self._reads.rows(f"SELECT {cols} FROM dead_letters ORDER BY id")
        else:
            rows = await self._reads.rows(
                f"SELECT {cols} FROM dead_letters WHERE address = %s ORDER BY id", (address,)
            )
        return [DeadLetterRecord(*r) for r in rows]

    async def read_log(
        self, address: str, log: str, start: int = 0, limit: int = 1000
    ) -> list[bytes]:
        rows = await self._reads.rows(
            "SELECT data FROM logs WHERE address = %s AND log = %s AND idx >= %s "
            "ORDER BY idx LIMIT %s",
            (address, log, start, limit),
        )
        return [r[0] for r in rows]

    async def log_length(self, address: str, log: str) -> int:
        rows = await self._reads.rows(
            "SELECT COALESCE(MAX(idx), -1) + 1 FROM logs WHERE address = %s AND log = %s",
            (address, log),
        )
        return int(rows[0][0])
