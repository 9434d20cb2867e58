"""`EventReaders`: pages of one actor's stored events, read on worker threads.

A replay may cross gigabytes of events, and SQLite reads the rows' overflow
pages from disk while it steps, so these reads do not run on the trio
thread as the store's other (short, indexed) reads do: each page is one call
on a worker thread, with connections of its own (a connection is used by
one thread at a time; at most ``connections`` pages are read at once).

A page is bounded twice: at most ``limit`` events and at most ``max_bytes``
bytes of their data, except that it always holds the next event if there is
one, however big, or a replay could never pass it. One statement reads the
page (one read transaction, ended within the one thread call: none is held
across an ``await``, so none holds back a checkpoint). Each row's data is
taken only if the page still has room for it (`_Budget`, a SQL function
that sees ``length(data)`` first), so the first event that does not fit
comes back without its data and is not copied into Python, only noted:
there are more. SQLite still reads that row, as it reads every row of a
WITHOUT ROWID table it steps over, whole.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import trio

from ..errors import RuntimeClosed
from ._records import EventPage, EventRecord

__all__ = ["EventReaders", "read_event_page"]


class _Budget:
    """Which rows of a page get their data: the first always, then each that
    keeps the page within ``limit`` events and ``max_bytes`` bytes. Once a
    row is refused every later one is too, so the page is gap-free."""

    def __init__(self, limit: int, max_bytes: int) -> None:
        self._rows_left = limit
        self._bytes_left = max_bytes
        self._first = True
        self._full = False

    def take(self, size: int) -> bool:
        if self._full or self._rows_left == 0 or (size > self._bytes_left and not self._first):
            self._full = True
            return False
        self._first = False
        self._rows_left -= 1
        self._bytes_left -= size
        return True


def read_event_page(
    conn: sqlite3.Connection, address: str, after: int, *, limit: int, max_bytes: int
) -> EventPage:
    """The events of ``address`` after seq ``after``, bounded by ``limit`` and
    ``max_bytes`` (always at least the next one), with one statement."""
    budget = _Budget(limit, max_bytes)
    # Not deterministic: it answers by what it was asked before.
    conn.create_function("page_takes", 1, budget.take)
    rows = conn.execute(
        # data is NOT NULL, so NULL marks the first row left out. One row
        # past the limit tells whether more were stored.
        "SELECT address, seq, type, CASE WHEN page_takes(length(data)) THEN data END, at "
        "FROM events WHERE address = ? AND seq > ? ORDER BY seq LIMIT ?",
        (address, after, limit + 1),
    )
    events: list[EventRecord] = []
    for row in rows:
        if row[3] is None:
            rows.close()
            return EventPage(tuple(events), more=True)
        events.append(EventRecord(*row))
    return EventPage(tuple(events), more=False)


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA query_only=ON")  # these connections only read
    # 8 MiB of pages (SQLite's default is 2): a seek compares whole cells, so
    # the big events near the top of the b-tree are read again by every page;
    # cached, they cost a copy instead of a pread per 4 KB (a replay of 1 MB
    # events to 4 subscribers went from 3.7 s to 2.1 s).
    conn.execute("PRAGMA cache_size=-8192")
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


class EventReaders:
    """Up to ``connections`` read-only connections to the database at ``path``,
    each lent to one worker thread at a time. Opened as needed, on the thread."""

    def __init__(self, path: Path, *, connections: int) -> None:
        self._path = path
        self._idle: list[sqlite3.Connection] = []
        self._threads = trio.CapacityLimiter(connections)
        self._closed = False

    async def read(self, address: str, after: int, *, limit: int, max_bytes: int) -> EventPage:
        """One page (`read_event_page`) on a worker thread.

        A cancel point before the read starts; once started it runs to its
        end (it changes nothing, so there is nothing to undo), and the
        caller sees the cancellation at its next checkpoint.
        """
        if self._closed:
            raise RuntimeClosed("the store is closed")
        return await trio.to_thread.run_sync(
            self._read, address, after, limit, max_bytes, limiter=self._threads
        )

    def _read(self, address: str, after: int, limit: int, max_bytes: int) -> EventPage:
        # list.pop and list.append are atomic: the idle list needs no lock.
        try:
            conn = self._idle.pop()
        except IndexError:
            conn = _connect(self._path)
        try:
            return read_event_page(conn, address, after, limit=limit, max_bytes=max_bytes)
        finally:
            if self._closed:
                conn.close()
            else:
                self._idle.append(conn)

    def close(self) -> None:
        """Close the idle connections; one still reading closes when it is done."""
        self._closed = True
        while self._idle:
            self._idle.pop().close()
