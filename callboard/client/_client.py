"""`connect` and `Client`: the gateway's ops as methods, over a connection that heals.

The client keeps one connection open in a background task. When it drops,
the task reconnects with capped, jittered backoff (`Backoff`) and the open
subscriptions resume from their last seq (see `_stream`). Requests wait for
a connection rather than fail while one is being re-opened; bound them with
``trio.fail_after`` as any other trio call.

A request whose connection drops before its reply is repeated on the next
connection only when repeating it cannot change the outcome: ``ping``,
``list``, ``inspect``, ``stop``, ``subscribe`` and ``output``. ``send`` and ``spawn``
raise `ConnectionLost` instead, because the first attempt may have been
applied; a ``send`` with a ``key`` is safe to repeat by hand (the repeat is
acknowledged with ``duplicate=True``).
"""

from __future__ import annotations

import builtins
import copy
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import trio

from .._retry import Backoff
from .._version import __version__
from ..errors import CallboardError
from ..mailbox import Ack, Address
from ..views import ActorInfo, ActorView, OutputPage
from ._connection import Connection, Lost, OnReply
from ._credentials import find_token
from ._errors import ConnectionFailed, ConnectionLost
from ._handshake import connection_errors, open_connection, unwrap_single
from ._operator import READS, OperatorOps
from ._stream import EventStream
from ._tasks import RemoteTasks
from ._wire import field, info_from_frame, view_from_frame

__all__ = ["DEFAULT_URL", "Client", "Spawned", "connect"]

log = logging.getLogger("callboard.client")

DEFAULT_URL = "ws://127.0.0.1:7341/v1"
_RETRIED = frozenset({"ping", "list", "inspect", "stop", "subscribe", "output", *READS})
# A connection that lived this long resets the backoff; one that keeps
# closing at once (a server accepting and dropping) backs off like a refusal.
_STABLE = 1.0

# How long to wait between reconnection attempts is a `Backoff` (the default
# one draws each wait from [d/2, d], d doubling from 0.05 s up to 5 s): the
# jitter keeps the clients of a restarted server from all returning in the
# same instant. Its ``give_up_after`` (seconds since the connection was lost)
# ends the attempts; None tries for as long as the client is open.


Spawned = Address
"""What `Client.spawn` returns: the same `Address` as `Runtime.spawn` (``existed``
says whether it was already there). The name is kept for code that imports it."""


class Client(OperatorOps):
    """A gateway connection that reconnects by itself. Make one with `connect`.

    Every method is a checkpoint, safe to call from many tasks at once, and
    raises the `CallboardError` the server's error code stands for.
    """

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        client_name: str,
        reconnect: Backoff | None,
        connect_timeout: float,
        keepalive: float | None,
        event_buffer: int,
    ) -> None:
        self.url = url
        self._token = token
        self._client_name = client_name
        self._reconnect = reconnect
        self._connect_timeout = connect_timeout
        self._keepalive = keepalive
        self._event_buffer = event_buffer
        self._conn: Connection | None = None
        self._changed = trio.Event()
        self._failure: CallboardError | None = None
        self._closing = trio.Event()
        self._done = trio.Event()
        self._tasks: RemoteTasks | None = None

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed

    @property
    def tasks(self) -> RemoteTasks:
        """The task operations (`callboard.views.TaskOperations`) on this server's
        tasks, as ``rt.tasks`` offers them on an embedded runtime (one, cached)."""
        if self._tasks is None:
            self._tasks = RemoteTasks(self)
        return self._tasks

    # -- the ops of docs/protocol.md ----------------------------------------------------

    async def send(self, to: str, type: str, body: Any = None, key: str | None = None) -> Ack:
        """Deliver a message; returns once it is durable. Not repeated on a lost connection."""
        fields: dict[str, Any] = {"to": to, "type": type, "body": body}
        if key is not None:
            fields["key"] = key
        reply = await self._request("send", fields)
        return Ack(field(reply, "seq", int), field(reply, "duplicate", bool))

    async def spawn(self, kind: str, spec: Any = None, name: str | None = None) -> Address:
        """Create an actor; returns its address, as `Runtime.spawn` does: its
        ``existed`` says it was already there with the same spec."""
        fields: dict[str, Any] = {"kind": kind, "spec": spec}
        if name is not None:
            fields["name"] = name
        reply = await self._request("spawn", fields)
        return Address(field(reply, "actor", str), existed=field(reply, "existed", bool))

    @asynccontextmanager
    async def subscribe(self, actor: str, after: int | None = None) -> AsyncIterator[EventStream]:
        """Events of ``actor`` (or a pattern ``KIND/*`` or ``*``, live only).

        With ``after``, first every stored event with a greater seq, then live
        ones; without, live events from now on. Returns once the server has
        accepted the subscription; resumes by itself after any loss.
        """
        stream = EventStream(self, actor, after, buffer=self._event_buffer)
        # As asked, even if the server will refuse it (``after`` with a pattern).
        fields = {"actor": actor} if after is None else {"actor": actor, "after": after}
        try:
            await self._request("subscribe", fields, on_reply=stream.subscribed)
            yield stream
        finally:
            stream.close()

    async def list(self, kind: str | None = None, status: str | None = None) -> list[ActorInfo]:
        """Every actor (of ``kind``, with ``status``) with its mailbox size and restarts.

        A long list comes in pages (the server's ``list_limit``); this asks
        for each in turn and returns them all.
        """
        fields: dict[str, Any] = {
            k: v for k, v in (("kind", kind), ("status", status)) if v is not None
        }
        actors: list[ActorInfo] = []
        while True:
            reply = await self._request("list", fields)
            actors.extend(info_from_frame(row) for row in field(reply, "actors", list))
            after = reply.get("next")
            if not isinstance(after, str):
                return actors
            fields["after"] = after

    async def inspect(self, address: str) -> ActorView:
        """The actor's last committed state and the bookkeeping around it."""
        reply = await self._request("inspect", {"actor": address})
        return view_from_frame(reply, address)

    async def stop(self, address: str) -> str:
        """Stop an actor; returns its final status once it has stopped."""
        reply = await self._request("stop", {"actor": address})
        status = reply.get("status")
        return status if isinstance(status, str) else "stopped"

    async def output(self, job: str, after: int = 0, limit: int | None = None) -> OutputPage:
        """The output of ``job`` (``job/ID``) from byte ``after``, at most ``limit``
        bytes (the server caps it); read again from ``.next`` for what follows."""
        fields: dict[str, Any] = {"job": job, "after": after}
        if limit is not None:
            fields["limit"] = limit
        reply = await self._request("output", fields)
        return OutputPage(
            field(reply, "text", str),
            field(reply, "next", int),
            field(reply, "running", bool),
            field(reply, "truncated", bool),
            bool(reply.get("capped", False)),
        )

    # -- live attach, as `Runtime.get_state` and the others (docs/protocol.md) ------------

    async def get_state(self, address: str) -> Any:
        """The actor's last committed state, as JSON."""
        return (await self._request("state", {"actor": address})).get("state")

    async def replace_state(self, address: str, state: Any) -> int:
        """Replace the actor's state (checked against its kind); returns the seq of
        its ``actor.state_replaced`` event."""
        reply = await self._request("set_state", {"actor": address, "state": state})
        seq: int = field(reply, "seq", int)
        return seq

    async def pause(self, address: str) -> str:
        """Hold the actor's mailbox, durably; returns ``"paused"``."""
        status: str = field(await self._request("pause", {"actor": address}), "status", str)
        return status

    async def resume(self, address: str) -> str:
        """Let a paused actor handle its mailbox again; returns ``"active"``."""
        status: str = field(await self._request("resume", {"actor": address}), "status", str)
        return status

    async def step(self, address: str) -> int | None:
        """Hand a paused actor one message; its seq once handled (None: none waits)."""
        reply = await self._request("step", {"actor": address})
        handled: int | None = field(reply, "handled", int, type(None))
        return handled

    async def nodes(self) -> builtins.list[dict[str, Any]]:
        """The nodes sharing the server's store: ``node``, ``heartbeat``, ``actors``."""
        reply = await self._request("nodes", {})
        nodes = reply.get("nodes")
        return list(nodes) if isinstance(nodes, list) else []

    async def ping(self) -> float:
        """One round trip to the server and its runtime; returns how long it took, in seconds."""
        start = trio.current_time()
        await self._request("ping", {})
        return trio.current_time() - start

    # -- requests over whichever connection is open ----------------------------------

    async def _request(
        self, op: str, fields: dict[str, Any], *, on_reply: OnReply | None = None
    ) -> dict[str, Any]:
        while True:
            conn = await self._wait_connection()
            try:
                return await conn.request(op, fields, on_reply)
            except Lost as lost:
                if not lost.sent or (op in _RETRIED and self._reconnect is not None):
                    continue
                raise ConnectionLost(
                    f"the connection to {self.url} was lost before the reply to {op!r}; "
                    "it may or may not have been applied"
                ) from None

    async def _resubscribe(self, stream: EventStream) -> None:
        await self._request("subscribe", stream.subscribe_fields(), on_reply=stream.subscribed)

    async def _wait_connection(self) -> Connection:
        while True:
            if self._failure is not None:
                # A fresh copy for each raise: one instance would pile up tracebacks.
                raise copy.copy(self._failure)
            if self._conn is not None and not self._conn.closed:
                return self._conn
            await self._changed.wait()

    def _set(self, conn: Connection | None) -> None:
        self._conn = conn
        self._changed.set()
        self._changed = trio.Event()

    def _fail(self, error: CallboardError) -> None:
        """From now on every request raises ``error``: the client will not reconnect."""
        if self._failure is None:
            self._failure = error
        self._set(None)

    def _close(self) -> None:
        """Fail what comes next, and close the connection with a close frame, not a cut."""
        conn = self._conn
        self._fail(ConnectionFailed(f"the client of {self.url} is closed", retryable=False))
        self._closing.set()
        if conn is not None:
            conn.close()

    # -- the connection keeper -----------------------------------------------------------

    async def _run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep one connection open; the first attempt's failure is the caller's to see."""
        try:
            await self._keep_connected(task_status)
        finally:
            self._done.set()

    async def _keep_connected(self, task_status: trio.TaskStatus[None]) -> None:
        started = False
        attempt = 0
        down_since: float | None = None
        while True:
            conn: Connection | None = None
            try:
                with connection_errors(self.url):
                    async with trio.open_nursery() as nursery:
                        conn = await open_connection(
                            nursery,
                            self.url,
                            token=self._token,
                            client_name=self._client_name,
                            connect_timeout=self._connect_timeout,
                        )
                        self._set(conn)
                        if not started:
                            started = True
                            task_status.started()
                        elif down_since is not None:
                            log.warning("reconnected to %s", self.url)
                        down_since, opened = None, trio.current_time()
                        reason = await conn.serve(self._keepalive)
                        if trio.current_time() - opened >= _STABLE:
                            attempt = 0
                        nursery.cancel_scope.cancel()
            except CallboardError as exc:
                if not started:
                    raise
                if not exc.retryable:
                    self._fail(exc)
                    return
                reason = str(exc)
            finally:
                if conn is not None:
                    conn.abandon()
                    self._set(None)
            if self._closing.is_set():
                return
            if self._reconnect is None:
                self._fail(ConnectionLost(f"lost the connection to {self.url}: {reason}"))
                return
            now = trio.current_time()
            if down_since is None:
                down_since = now
                log.warning("lost the connection to %s (%s); reconnecting", self.url, reason)
            give_up = self._reconnect.give_up_after
            if give_up is not None and now - down_since >= give_up:
                self._fail(
                    ConnectionFailed(
                        f"gave up reconnecting to {self.url} after {give_up:g} s: {reason}"
                    )
                )
                return
            with trio.move_on_after(self._reconnect.delay(attempt + 1)):
                await self._closing.wait()
            attempt += 1


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise ConnectionFailed(
            f"cannot connect to {url!r}: a gateway URL looks like ws://127.0.0.1:7341/v1",
            retryable=False,
        )


@asynccontextmanager
async def connect(
    url: str = DEFAULT_URL,
    token: str | None = None,
    *,
    token_file: str | os.PathLike[str] | None = None,
    client_name: str = f"callboard-client/{__version__}",
    reconnect: Backoff | None = Backoff(),
    connect_timeout: float = 10.0,
    keepalive: float | None = 20.0,
    event_buffer: int = 1024,
) -> AsyncIterator[Client]:
    """Connect to a callboard gateway, say ``hello``, and yield a `Client`.

    The first connection is made before this returns: if it fails, the
    error (`ConnectionFailed`, `Unauthorized`, `ProtocolError`) is raised
    here. Later losses are healed in the background as ``reconnect`` says;
    with ``reconnect=None`` the first loss fails every later request.

    Args:
        url: ``ws://HOST:PORT/v1``.
        token: sent as ``Authorization: Bearer``. Without it (or ``token_file``),
            `find_token` looks in ``$CALLBOARD_TOKEN``, ``$CALLBOARD_TOKEN_FILE``
            and, for a loopback URL, ``./callboard-data/token``.
        token_file: a file holding the token.
        client_name: what ``hello`` tells the server this client is.
        connect_timeout: seconds for TCP, the websocket handshake and ``welcome``.
        keepalive: seconds between pings that detect a dead server; None for none.
        event_buffer: events held per subscription for a slow reader before it
            stops taking them and later resumes from the server's store.
    """
    _check_url(url)
    client = Client(
        url,
        find_token(url, token, token_file=token_file),
        client_name=client_name,
        reconnect=reconnect,
        connect_timeout=connect_timeout,
        keepalive=keepalive,
        event_buffer=event_buffer,
    )
    with unwrap_single():
        async with trio.open_nursery() as nursery:
            await nursery.start(client._run)
            try:
                yield client
            finally:
                client._close()
                with trio.move_on_after(2.0, shield=True):
                    await client._done.wait()
                nursery.cancel_scope.cancel()
