"""The floor under the gateway's targets: the leanest durable send-and-ack server.

``bare-send-ack-*`` serve the gateway's ``send`` over trio-websocket and
SQLite with none of callboard's runtime, store or gateway logic in them, in
the shape the protocol asks of any server (docs/protocol.md: replies carry
the request's id and may come in any order, so a connection's requests are
read while earlier ones wait for the disk): per connection, one task reads
frames and one writes the replies. Each connection goes through the
gateway's own socket layer (`HeldWrites`: reads and writes straight on the
socket, the replies waiting for a connection in one write), so the gap
between the two ratios is callboard's runtime, store and request handling,
not the socket. What each keeps of the core contract:

- persist before acknowledge: every message is an INSERT into a table with
  the store's mailbox columns, and its ``ok`` (with its seq) leaves only
  after the COMMIT (WAL, ``synchronous=FULL``, ``auto_vacuum=INCREMENTAL``
  as the store's file, on the runtime's disk);
- group commit: one writer takes every row waiting, in one transaction
  (a new actor's row too); before a batch it lets the tasks ready to run
  queue theirs, two scheduler passes at most, as the store's writer does
  (which skips them after a wait for company that a send joined);
- handling: each acked message is handled at once (a sink, as the gateway
  scenarios' actors), and that handling, the actor's cursor and the
  mailbox row's DELETE, commits with the next batch, or after 1 ms alone
  (the runtime's ``commit_delay``).

What each leaves out is everything else a server needs: checking the frame
beyond its types, tokens, limits and backpressure, actors and their cells,
idempotency keys, subscriptions, errors, cancellation, and the store's
wider tables (an actor is three columns here; a batch that only stores
messages for an actor leaves its ``mailbox_head`` to its next handling,
since the highest seq stored says it too). Its COMMITs are all made on the
trio thread, where the store hands a COMMIT to its thread while other tasks
are ready to run (`CommitPlace`).

Each takes its ratio against the echo server driven the same way, so the
two ratios read side by side: what this leaves out and the gateway does is
the gap. Afterwards every send must have been acknowledged once, stored
and handled: each client's actor with its cursor at its last seq and no
message left in the mailbox.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, wrap_server_stream

from callboard.gateway._held_writes import HeldWrites

from . import Result, Scenario, Settings
from ._baseline import _LIFE, _MAILBOX_INSERT, _MAILBOX_SCHEMA
from ._gateway import _WINDOW, _requests, _round_trips

__all__ = ["SCENARIOS", "Floor", "Store", "connection_handler", "send_ack_scenarios", "serve_sends"]

_ACTORS_SCHEMA = """
CREATE TABLE actors (
    address TEXT PRIMARY KEY,
    cursor INTEGER NOT NULL DEFAULT 0,
    mailbox_head INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
"""
_NEW_ACTOR = "INSERT INTO actors (address) VALUES (?)"
_STEP = "UPDATE actors SET cursor = MAX(cursor, ?), mailbox_head = ? WHERE address = ?"
_DELETE = "DELETE FROM mailbox WHERE address = ? AND seq <= ?"
_COMPANY = 0.001  # how long handlings alone wait for a send to join them (commit_delay)

# The store's mailbox columns: address, seq, type, body, sender, key, at, life.
_Row = tuple[str, int, str, bytes, None, None, float, int]


def _open(path: Path) -> sqlite3.Connection:
    """The store's file settings (``callboard/store/_schema.py``) on a fresh file."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA auto_vacuum=INCREMENTAL")  # before the first table, so no VACUUM
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.executescript(_MAILBOX_SCHEMA + _ACTORS_SCHEMA)
    return conn


class _Writer:
    """One group-committing writer on the trio thread (see the module)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._rows: list[_Row] = []
        self._thens: list[Callable[[int], None]] = []
        self._new: list[tuple[str]] = []  # actors whose rows the next batch creates
        self._handled: dict[str, int] = {}  # address -> cursor, committed with the next batch
        self._heads: dict[str, int] = {}
        self._waiting = trio.lowlevel.ParkingLot()
        self.commits = 0
        self.acked = 0

    def enqueue(self, to: str, kind: str, body: bytes, then: Callable[[int], None]) -> None:
        """Store a message; ``then(seq)`` once it is durable."""
        seq = self._heads.get(to)
        if seq is None:
            self._new.append((to,))
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
            if self._rows and trio.lowlevel.current_statistics().tasks_runnable:
                # Let the readers just woken queue theirs: the store's writer does so
                # before a batch with a send in it, and skips it after a joined wait.
                await trio.lowlevel.cancel_shielded_checkpoint()
                await trio.lowlevel.cancel_shielded_checkpoint()
            self.commit()

    def commit(self) -> None:
        rows, self._rows = self._rows, []
        thens, self._thens = self._thens, []
        new, self._new = self._new, []
        handled, self._handled = self._handled, {}
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        if new:
            conn.executemany(_NEW_ACTOR, new)
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
            self.acked += 1
            then(row[1])

    def check(self, clients: int, per_client: int) -> None:
        """Every send acknowledged once, stored, handled and its handling committed:
        each client's actor (one each) at its last seq, no message left."""
        if self._handled:
            self.commit()
        conn = self._conn
        (left,) = conn.execute("SELECT COUNT(*) FROM mailbox").fetchone()
        actors, lowest, highest, behind = conn.execute(
            "SELECT COUNT(*), MIN(cursor), MAX(cursor), SUM(cursor != mailbox_head) FROM actors"
        ).fetchone()
        sends, stored = clients * per_client, sum(self._heads.values())
        found = (self.acked, stored, actors, lowest, highest, behind, left)
        if found != (sends, sends, clients, per_client, per_client, 0, 0):
            raise RuntimeError(
                f"{sends} sent by {clients} clients: {self.acked} acked, "
                f"{stored} stored, {actors} actors with cursors "
                f"{lowest}..{highest} ({behind} behind their heads), {left} left unhandled"
            )


# How a server stores one send: ``store(to, type, body, then)``, where ``then(seq)``
# is called once the message is durable.
Store = Callable[[str, str, Any, Callable[[int], None]], None]


async def serve_sends(ws: WebSocketConnection, writes: HeldWrites, store: Store) -> None:
    """One connection of the leanest server: a reader that parses each ``send``
    and hands it to ``store``, and a writer that sends the ``ok``s waiting in
    one socket write."""
    replies: list[str] = []
    ready = trio.lowlevel.ParkingLot()

    async def write() -> None:
        while True:
            while not replies:
                await ready.park()
            frames = replies[:]
            replies.clear()
            writes.hold()  # the replies waiting go out in one socket write, as the gateway's
            for frame in frames:
                await ws.send_message(frame)
            await writes.flush(_no_progress)

    def reply(rid: str) -> Callable[[int], None]:
        def durable(seq: int) -> None:
            frame = {"op": "ok", "id": rid, "seq": seq, "duplicate": False}
            replies.append(orjson.dumps(frame).decode())
            if ready:
                ready.unpark()

        return durable

    hello = orjson.loads(await ws.get_message())
    welcome = {"op": "welcome", "id": hello["id"], "protocol": 1}
    await ws.send_message(orjson.dumps(welcome).decode())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(write)
        while True:
            frame = orjson.loads(await ws.get_message())
            if frame.get("op") != "send":
                raise RuntimeError(f"not a send: {frame}")
            rid, to, kind = frame["id"], frame["to"], frame["type"]
            if not (isinstance(rid, str) and isinstance(to, str) and isinstance(kind, str)):
                raise RuntimeError(f"not a send: {frame}")
            store(to, kind, frame.get("body"), reply(rid))


def _no_progress() -> None:
    pass


def connection_handler(store: Store) -> Callable[[trio.SocketStream], Awaitable[None]]:
    """What `trio.serve_tcp` runs for each connection: `serve_sends` over `HeldWrites`."""

    async def connection(stream: trio.SocketStream) -> None:
        writes = HeldWrites(stream)
        try:
            async with trio.open_nursery() as nursery:
                request = await wrap_server_stream(nursery, writes)
                await serve_sends(await request.accept(), writes, store)
        except* ConnectionClosed:
            pass
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()

    return connection


async def _floor(workdir: Path, clients: int, per_client: int, window: int) -> Result:
    conn = _open(workdir / "floor.sqlite3")
    try:
        writer = _Writer(conn)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.run)
            handler = connection_handler(
                lambda to, kind, body, then: writer.enqueue(to, kind, orjson.dumps(body), then)
            )
            serve = partial(trio.serve_tcp, handler, 0, host="127.0.0.1")
            listeners = await nursery.start(serve)
            port = listeners[0].socket.getsockname()[1]
            commits = writer.commits
            result = await _round_trips(
                f"ws://127.0.0.1:{port}/v1", clients, per_client, window=window, protocol=True
            )
            commits = writer.commits - commits
            nursery.cancel_scope.cancel()
        writer.check(clients, per_client)
    finally:
        conn.close()
    sends = clients * per_client
    details = {**result.details, "commits": commits, "sends_per_commit": round(sends / commits, 2)}
    return Result(result.ops_per_s, result.p50_ms, result.p99_ms, result.unit, details)


# A server's run: ``floor(workdir, clients, sends per client, sends in flight per client)``.
Floor = Callable[[Path, int, int, int], Awaitable[Result]]


def _run(
    floor: Floor, clients: int, per_client: Callable[[Settings], int], window: int,
    settings: Settings, workdir: Path,
) -> Result:  # fmt: skip
    return trio.run(floor, workdir, clients, per_client(settings), window)


def send_ack_scenarios(prefix: str, floor: Floor, note: str) -> list[Scenario]:
    """``PREFIX-send-ack-1-client``, ``-32-clients`` and ``-32-clients-8-in-flight``:
    the gateway scenarios' three shapes for the server ``floor`` runs, each
    against the echo driven the same way."""
    shapes: list[tuple[str, int, Callable[[Settings], int], int, str]] = [
        ("1-client", 1, lambda s: _requests(s, 1), 1, ""),
        ("32-clients", 32, lambda s: _requests(s, 32) * 4, 1, ""),
        ("32-clients-8-in-flight", 32, lambda s: _requests(s, 32) * 8, _WINDOW, ", 8 in flight"),
    ]
    return [
        Scenario(
            f"{prefix}-send-ack-{shape}",
            partial(_run, floor, clients, per_client, window),
            baseline=f"ws-echo-{shape}",
            note=note + more,
        )
        for shape, clients, per_client, window, more in shapes
    ]


SCENARIOS = send_ack_scenarios(
    "bare",
    _floor,
    "the leanest durable send/ack server: the gateway's socket layer, no callboard logic",
)
