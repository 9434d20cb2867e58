"""`EventReaders`: pages of one actor's stored events, read on worker threads.

A replay may cross gigabytes of events, and SQLite reads the rows' overflow
pages from disk while it steps, so these reads do not run on the trio
thread as the store's other (short, indexed) reads do: each page is one call
on a worker thread, with connections of its own (a connection is used by
one thread at a time; at most ``connections`` pages are read at once).

A page is bounded twice: at most ``limit`` events and at most ``max_bytes``
bytes of their data, except that it always holds the next event if there is
one, however big, or a replay could never pass it. The sizes are read
first (``length()`` of a BLOB comes from the row's header, not its pages),
so an event that does not fit is not loaded just to be left out. Both
statements share one read transaction, inside the one thread call: no read
transaction is held across an ``await``, so none holds back a checkpoint.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import trio

from ..errors import RuntimeClosed
from ._records import EventPage, EventRecord

__all__ = ["EventReaders", "read_event_page"]


def read_event_page(
    conn: sqlite3.Connection, address: str, after: int, *, limit: int, max_bytes: int
) -> EventPage:
    """The events of ``address`` after seq ``after``, bounded by ``limit`` and
    ``max_bytes`` (always at least the next one), in one read transaction."""
    conn.execute("BEGIN")
    try:
        # One more than the limit: whether the page ends the stored events.
        sizes = conn.execute(
            "SELECT seq, length(data) FROM events WHERE address = ? AND seq > ? "
            "ORDER BY seq LIMIT ?",
            (address, after, limit + 1),
        ).fetchall()
        count = total = 0
        for _, size in sizes[:limit]:
            if count and total + size > max_bytes:
                break
            count += 1
            total += size
        if count == 0:
            return EventPage((), more=False)
        rows = conn.execute(
            "SELECT address, seq, type, data, at FROM events "
            "WHERE address = ? AND seq > ? AND seq <= ? ORDER BY seq",
            (address, after, sizes[count - 1][0]),
        ).fetchall()
    finally:
        conn.execute("COMMIT")
    return EventPage(tuple(EventRecord(*row) for row in rows), more=len(sizes) > count)


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA query_only=ON")  # these connections only read
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
