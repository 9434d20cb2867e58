"""The floor under the gateway's targets: the leanest durable send-and-ack server.

``bare-send-ack-*`` serve the gateway's ``send`` over trio-websocket
with nothing of callboard in them, in the shape the protocol asks of any
server (docs/protocol.md: replies carry the request's id and may come in any
order, so a connection's requests are read while earlier ones wait for the
disk): per connection, one task reads frames and one writes the replies.
What each keeps of the core contract:

- persist before acknowledge: every message is an INSERT into a table with
  the store's mailbox columns, and its ``ok`` (with its seq) leaves only
  after the COMMIT (WAL, ``synchronous=FULL``, on the runtime's disk);
- group commit: one writer takes every row waiting, in one transaction;
- handling: each acked message is handled at once (a sink, as the gateway
  scenarios' actors), and that handling, the actor's cursor and the
  mailbox row's DELETE, commits with the next batch, or after 1 ms alone
  (the runtime's ``commit_delay``).

What each leaves out is everything else a server needs: checking the frame
beyond its types, tokens, limits and backpressure, actors and their cells,
idempotency keys, subscriptions, errors, cancellation. It writes each reply
with its own ``send_message``, as trio-websocket's API does, where the
gateway writes the replies waiting for a connection in one socket write.
Its COMMITs are made on the trio thread, as the store makes them when no
other task is ready to run (``CommitPlace``): with the clients in another
process, a worker thread's hop cost more than it saved in every shape
measured here.

Each takes its ratio against the echo server driven the same way, so the
ratio is the most a gateway in Python on trio-websocket and SQLite can reach
against that echo on this machine; the gateway's own ratio is read beside
it. Afterwards every message must have been stored, acknowledged and
handled once: the mailbox empty and each actor's cursor at its last seq.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import trio
from trio_websocket import ConnectionClosed, WebSocketRequest, serve_websocket

from . import Result, Scenario, Settings
from ._baseline import _LIFE, _MAILBOX_INSERT, _MAILBOX_SCHEMA, _open
from ._gateway import _WINDOW, _requests, _round_trips

__all__ = ["SCENARIOS"]

_ACTORS_SCHEMA = """
CREATE TABLE actors (
    address TEXT PRIMARY KEY,
    cursor INTEGER NOT NULL DEFAULT 0,
    mailbox_head INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
"""
_STEP = "UPDATE actors SET cursor = MAX(cursor, ?), mailbox_head = ? WHERE address = ?"
_DELETE = "DELETE FROM mailbox WHERE address = ? AND seq <= ?"
_COMPANY = 0.001  # what a batch of handlings only waits for a send (the runtime's commit_delay)


# The store's mailbox columns: address, seq, type, body, sender, key, at, life.
_Row = tuple[str, int, str, bytes, None, None, float, int]


class _Writer:
    """One group-committing writer on the trio thread (see the module)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._rows: list[_Row] = []
        self._thens: list[Callable[[int], None]] = []
        self._handled: dict[str, int] = {}  # address -> cursor, committed with the next batch
        self._heads: dict[str, int] = {}
        self._waiting = trio.lowlevel.ParkingLot()
        self.commits = 0

    def enqueue(self, to: str, kind: str, body: bytes, then: Callable[[int], None]) -> None:
        """Store a message; ``then(seq)`` once it is durable."""
        seq = self._heads.get(to)
        if seq is None:
            self._conn.execute("INSERT OR IGNORE INTO actors (address) VALUES (?)", (to,))
            seq = 0
        self._heads[to] = seq = seq + 1
        self._rows.append((to, seq, kind, body, None, None, time.time(), _LIFE))
        self._thens.append(then)
        if self._waiting:
            self._waiting.unpark()

    async def run(self) -> None:
        while True:
            while not self._rows and not self._handled:
                await self._waiting.park()
            if not self._rows:
                with trio.move_on_after(_COMPANY):
                    while not self._rows:
                        await self._waiting.park()
            elif trio.lowlevel.current_statistics().tasks_runnable:
                # As the store's writer: let the readers just woken queue theirs.
                await trio.lowlevel.cancel_shielded_checkpoint()
                await trio.lowlevel.cancel_shielded_checkpoint()
            self.commit()

    def commit(self) -> None:
        rows, self._rows = self._rows, []
        thens, self._thens = self._thens, []
        handled, self._handled = self._handled, {}
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        if rows:
            conn.executemany(_MAILBOX_INSERT, rows)
        if handled:
            heads = self._heads
            conn.executemany(_STEP, [(cursor, heads[a], a) for a, cursor in handled.items()])
            conn.executemany(_DELETE, list(handled.items()))
        conn.execute("COMMIT")
        self.commits += 1
        for then, row in zip(thens, rows, strict=True):
            orjson.loads(row[3])  # the handler's copy of the body
            self._handled[row[0]] = row[1]
            then(row[1])

    def check(self, sends: int) -> None:
        """Every message stored, handled and its handling committed, once."""
        if self._handled:
            self.commit()
        conn = self._conn
        (left,) = conn.execute("SELECT COUNT(*) FROM mailbox").fetchone()
        (cursors,) = conn.execute("SELECT SUM(cursor) FROM actors").fetchone()
        if left or cursors != sends:
            raise RuntimeError(f"{sends} sent: {left} left unhandled, cursors sum to {cursors}")


def _serve(writer: _Writer) -> Callable[[WebSocketRequest], object]:
    async def handler(request: WebSocketRequest) -> None:
        ws = await request.accept()
        replies: list[str] = []
        ready = trio.lowlevel.ParkingLot()

        async def write() -> None:
            while True:
                while not replies:
                    await ready.park()
                frames = replies[:]
                replies.clear()
                for frame in frames:
                    await ws.send_message(frame)

        def reply(rid: str) -> Callable[[int], None]:
            def durable(seq: int) -> None:
                frame = {"op": "ok", "id": rid, "seq": seq, "duplicate": False}
                replies.append(orjson.dumps(frame).decode())
                if ready:
                    ready.unpark()

            return durable

        try:
            hello = orjson.loads(await ws.get_message())
            welcome = {"op": "welcome", "id": hello["id"], "protocol": 1}
            await ws.send_message(orjson.dumps(welcome).decode())
            async with trio.open_nursery() as nursery:
                nursery.start_soon(write)
                while True:
                    frame = orjson.loads(await ws.get_message())
                    rid, to, kind = frame["id"], frame["to"], frame["type"]
                    if frame["op"] != "send" or not all(
                        isinstance(x, str) for x in (rid, to, kind)
                    ):
                        raise RuntimeError(f"not a send: {frame}")
                    writer.enqueue(to, kind, orjson.dumps(frame.get("body")), reply(rid))
        except* ConnectionClosed:
            pass

    return handler


async def _floor(workdir: Path, clients: int, per_client: int, window: int) -> Result:
    conn = _open(workdir, _MAILBOX_SCHEMA + _ACTORS_SCHEMA)
    try:
        writer = _Writer(conn)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.run)
            server = await nursery.start(serve_websocket, _serve(writer), "127.0.0.1", 0, None)
            commits = writer.commits
            result = await _round_trips(
                f"ws://127.0.0.1:{server.port}/v1", clients, per_client, window=window,
                protocol=True,
            )  # fmt: skip
            commits = writer.commits - commits
            nursery.cancel_scope.cancel()
        sends = clients * per_client
        writer.check(sends)
    finally:
        conn.close()
    details = {**result.details, "commits": commits, "sends_per_commit": round(sends / commits, 2)}
    return Result(result.ops_per_s, result.p50_ms, result.p99_ms, result.unit, details)


def floor_1(settings: Settings, workdir: Path) -> Result:
    return trio.run(_floor, workdir, 1, _requests(settings, 1), 1)


def floor_32(settings: Settings, workdir: Path) -> Result:
    return trio.run(_floor, workdir, 32, _requests(settings, 32) * 4, 1)


def floor_32_pipelined(settings: Settings, workdir: Path) -> Result:
    return trio.run(_floor, workdir, 32, _requests(settings, 32) * 8, _WINDOW)


_NOTE = "the leanest durable send/ack server on trio-websocket, no callboard"

SCENARIOS = [
    Scenario("bare-send-ack-1-client", floor_1, baseline="ws-echo-1-client", note=_NOTE),
    Scenario("bare-send-ack-32-clients", floor_32, baseline="ws-echo-32-clients", note=_NOTE),
    Scenario(
        "bare-send-ack-32-clients-8-in-flight",
        floor_32_pipelined,
        baseline="ws-echo-32-clients-8-in-flight",
        note=_NOTE + ", 8 in flight",
    ),
]
