"""Several nodes on one PostgreSQL database: the lease, the fence, and the wake-ups.

The part of `PostgresStore` that knows other nodes exist (the statements
are in ``_pg_lease``):

- **The lease.** A heartbeat renews this node's lease every third of
  ``lease_ttl``, on a connection of its own. A watchdog stops every actor of
  the node (``on_lost``) once ``lease_ttl`` has passed since the last renewal
  was sent, without waiting for the database: by then another node may have
  taken them. A renewal that finds the lease lapsed starts a new life of the
  node, so that everything the old one owned is free to be taken.
- **Ownership.** `claim` takes an actor for this node and keeps the epoch
  it got; the writes of an owner are fenced by it (``_pg_fenced``).
- **Wake-ups.** A batch that stores a message notifies the actor's owner
  (``callboard_mail``), one that stores events notifies every node
  (``callboard_events``), as NOTIFY does it: at COMMIT. A listener thread
  hears them (``on_wake``, ``on_events``); a poll every ``lease_poll``
  seconds finds what a lost notification did not say (a listener
  reconnecting hears nothing meanwhile), and the actors whose owner died.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg
import trio

from ..errors import StoreUnavailable
from . import _pg_lease as lease
from ._op_queue import OpQueue
from ._pg_connect import SecretUrl, connect, scrub
from ._pg_fenced import EVENTS, MAIL
from ._pg_reads import ReaderPool
from ._records import NodeRecord
from ._sqlite_ops import WriterState

__all__ = ["PgCluster", "default_node"]

log = logging.getLogger("callboard.store")

_LISTEN_WAIT = 0.5  # seconds the listener waits before it looks whether to stop


def _now() -> float:
    """The lease's own clock: real seconds, whatever trio's clock does (a test
    may jump trio's by hours; the database's lease does not move with it)."""
    return time.monotonic()


def default_node(directory: Path) -> str:
    """A name stable across restarts and unique per host and data directory
    (two nodes on one host need two data directories: each is locked)."""
    digest = hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:8]
    return f"{socket.gethostname()}-{digest}"


class PgCluster(OpQueue):
    """Leases, fences and wake-ups of `PostgresStore` (see the module)."""

    node: str
    _url: SecretUrl
    _where: str
    _state: WriterState
    _reads: ReaderPool
    _lease_ttl: float
    _lease_poll: float
    on_wake: Callable[[str], None] | None
    on_events: Callable[[str | None], None] | None
    on_lost: Callable[[Sequence[str]], None] | None

    def _init_cluster(self) -> None:
        self._lease_life = secrets.randbits(62)
        self._epochs: dict[str, int] = {}
        # Actors this store owned and lost (a fence, a lapsed lease): a write for
        # one is refused until a claim takes it again (``_pg_fenced``).
        self._dropped: set[str] = set()
        self._claiming: dict[str, trio.Event] = {}
        self._notes: set[tuple[str, str]] = set()
        # The fences a batch read before its ops ran (``_pg_writer``): address ->
        # (life, epoch) of this node's ownership row, locked FOR SHARE.
        self._fences: dict[str, tuple[int, int]] = {}
        self._renewed_until = 0.0
        self._renewed = trio.Event()
        self._poll_now = trio.Event()
        self._control: psycopg.Connection[Any] | None = None
        self._control_lane = trio.CapacityLimiter(1)
        self._listener_lane = trio.CapacityLimiter(1)
        self._stop_listening = threading.Event()
        self._listening: psycopg.Connection[Any] | None = None  # the listener's connection
        self._lease_errors = 0
        self._unowned: set[str] = set()
        self._displaced = False  # another process took this node's name

    # -- ownership, for the runtime ------------------------------------------

    def owns(self, address: str) -> bool:
        """Whether this node holds ``address`` (a `claim` took it, and no
        fence or lost lease has taken it away since)."""
        return address in self._epochs

    async def claim(self, address: str) -> bool:
        """Take ``address`` unless a live node owns it; True if this node owns it now."""
        if address in self._epochs:
            await trio.lowlevel.checkpoint()
            return True
        running = self._claiming.get(address)
        if running is not None:
            await running.wait()
            return address in self._epochs
        done = self._claiming[address] = trio.Event()
        try:
            life, node = self._lease_life, self.node
            if _now() >= self._renewed_until:
                return False  # not while this node's own lease may have lapsed
            epoch = await self._submit(
                lambda conn, now: lease.claim(conn.conn, address, node, life)
            )
            if epoch is None or life != self._lease_life:
                return False
            self._epochs[address] = max(self._epochs.get(address, 0), epoch)
            self._dropped.discard(address)
            return True
        finally:
            del self._claiming[address]
            done.set()

    async def nodes(self) -> list[NodeRecord]:
        rows = await self._reads.rows(lease._NODES)
        return [NodeRecord(node, beat, live, actors) for node, beat, live, actors in rows]

    # -- the lease: heartbeat, watchdog, poll, listener -------------------------

    def _register(self) -> None:
        """On a worker thread, at opening: start this life's lease."""
        conn = self._control_connection()
        if lease.register(conn, self.node, self._lease_life, self._lease_ttl):
            log.warning(
                "node %r was still live under an earlier life (a restart after a crash, "
                "or another process with this name: two must not share one): that life "
                "is fenced from now on", self.node,
            )  # fmt: skip
        self._forget_gone(conn)

    def _forget_gone(self, conn: psycopg.Connection[Any]) -> None:
        """Tidy the list of nodes: those killed for good long ago go from it."""
        try:
            lease.forget_gone(conn, self._lease_ttl)
        except psycopg.Error as exc:
            # Only tidying: the next heartbeat tries again (and reconnects if need be).
            log.debug("could not forget the nodes gone long ago: %s",
                      scrub(str(exc), self._url.secret))  # fmt: skip

    def _rejoin(self) -> bool:
        try:
            conn = self._control_connection()
            return lease.rejoin(conn, self.node, self._lease_life, self._lease_ttl)
        except psycopg.Error as exc:
            raise self._control_failed(
                f"node {self.node!r} cannot start a new lease", exc
            ) from None

    def _control_failed(self, what: str, exc: psycopg.Error) -> StoreUnavailable:
        """The lease's connection failed: it goes (the next call connects again),
        and the error says ``what`` could not be done, the password scrubbed."""
        if self._control is not None:
            self._control.close()
        reason = scrub(str(exc).strip() or type(exc).__name__, self._url.secret)
        return StoreUnavailable(f"{what}: {reason}")

    def _control_connection(self) -> psycopg.Connection[Any]:
        conn = self._control
        if conn is None or conn.closed or conn.broken:
            if conn is not None:
                conn.close()
            conn = self._control = connect(self._url.secret, autocommit=False)
        return conn

    def _renew(self) -> bool:
        try:
            conn = self._control_connection()
            live = lease.renew(conn, self.node, self._lease_life, self._lease_ttl)
        except psycopg.Error as exc:
            raise self._control_failed(
                f"cannot renew the lease of node {self.node!r}", exc
            ) from None
        if live:
            self._forget_gone(conn)
        return live

    def _leave(self) -> None:
        """On a worker thread, at a clean close: give everything up at once."""
        try:
            lease.leave(self._control_connection(), self.node, self._lease_life)
        except (psycopg.Error, StoreUnavailable):
            pass  # the lease then lapses by itself within lease_ttl
        finally:
            if self._control is not None:
                self._control.close()
                self._control = None

    def _drop_all(self, why: str) -> None:
        """Stop believing this node owns anything, and stop its actors."""
        lost = list(self._epochs)
        self._dropped.update(lost)
        self._epochs.clear()
        if lost:
            log.error("node %r %s: its %d actors stop here", self.node, why, len(lost))
            if self.on_lost is not None:
                self.on_lost(lost)

    async def _run_lease(self, task_status: trio.TaskStatus[None]) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._heartbeat, name="lease heartbeat")
            nursery.start_soon(self._watchdog, name="lease watchdog")
            nursery.start_soon(self._poll, name="ownership poll")
            nursery.start_soon(self._listen, name="notification listener")
            task_status.started()

    async def _heartbeat(self) -> None:
        period = self._lease_ttl / 3
        while True:
            sent = _now()
            try:
                live = await trio.to_thread.run_sync(self._renew, limiter=self._control_lane)
            except StoreUnavailable as exc:
                self._lease_errors += 1
                if self._lease_errors == 1:
                    log.warning("%s; retrying", exc)
                await trio.sleep(min(period, 0.5))
                continue
            if self._lease_errors:
                log.warning("node %r renewed its lease again", self.node)
                self._lease_errors = 0
            if not live:
                self._drop_all("found its lease lapsed (it was paused or cut off)")
                self._lease_life = secrets.randbits(62)
                try:
                    joined = await trio.to_thread.run_sync(self._rejoin, limiter=self._control_lane)
                except StoreUnavailable:
                    await trio.sleep(min(period, 0.5))
                    continue
                if not joined:
                    if not self._displaced:
                        self._displaced = True
                        log.error(
                            "node %r is taken by another live process under the same name: "
                            "this one runs no actors while that one lives", self.node,
                        )  # fmt: skip
                    await trio.sleep(period)
                    continue
                self._displaced = False
            self._renewed_until = sent + self._lease_ttl
            self._renewed.set()
            self._renewed = trio.Event()
            if not live:
                self._poll_now.set()
            await trio.sleep(period)

    async def _watchdog(self) -> None:
        while True:
            remaining = self._renewed_until - _now()
            if remaining > 0:
                await trio.sleep(remaining)  # then looks again: renewed meanwhile?
                continue
            self._drop_all(f"could not renew its lease for {self._lease_ttl:g}s")
            await self._renewed.wait()

    async def _poll(self) -> None:
        while True:
            with trio.move_on_after(self._lease_poll):
                await self._poll_now.wait()
            self._poll_now = trio.Event()
            if _now() >= self._renewed_until:
                continue
            try:
                rows = await self._reads.rows(
                    lease._TO_WAKE, {"node": self.node, "life": self._lease_life, "limit": 1000}
                )
            except StoreUnavailable:
                continue
            # One never owned is left to the node its first message went to
            # for one poll (it claims it at once); only then does this one try.
            unowned, self._unowned = self._unowned, {a for a, never in rows if never}
            if self.on_wake is not None:
                for address, never in rows:
                    if not never or address in unowned:
                        self.on_wake(address)
            if self.on_events is not None:
                self.on_events(None)

    async def _listen(self) -> None:
        token = trio.lowlevel.current_trio_token()
        try:
            await trio.to_thread.run_sync(self._listen_thread, token, limiter=self._listener_lane)
        finally:
            self._stop_listening.set()

    def _listen_thread(self, token: trio.lowlevel.TrioToken) -> None:
        conn: psycopg.Connection[Any] | None = None
        while not self._stop_listening.is_set():
            try:
                if conn is None or conn.closed or conn.broken:
                    conn = self._listening = connect(self._url.secret, autocommit=True)
                    conn.execute(f"LISTEN {MAIL}")
                    conn.execute(f"LISTEN {EVENTS}")
                    # Whatever was sent while it did not listen is lost: look now.
                    trio.from_thread.run_sync(self._poll_now.set, trio_token=token)
                for note in conn.notifies(timeout=_LISTEN_WAIT):
                    # A node hears its own notifications too (every one, on a single
                    # node): dropped here, they cost no hand-off to trio.
                    if note.payload.partition("\n")[0] != self.node:
                        trio.from_thread.run_sync(
                            self._heard, note.channel, note.payload, trio_token=token
                        )
                    if self._stop_listening.is_set():
                        break
            except trio.RunFinishedError:
                break
            except (psycopg.Error, StoreUnavailable):
                if conn is not None:
                    conn.close()
                conn = None
                self._stop_listening.wait(_LISTEN_WAIT)
        if conn is not None:
            conn.close()

    def _heard(self, channel: str, payload: str) -> None:
        node, _, address = payload.partition("\n")
        if node == self.node or not address:
            return  # its own: it knew at the commit
        if channel == MAIL:
            # Only its owner is woken: one without a live owner is taken by
            # the node its message went to, or by the poll.
            if self.on_wake is not None and self.owns(address):
                self.on_wake(address)
        elif channel == EVENTS and self.on_events is not None:
            self.on_events(address)

    def _stop_lease(self) -> None:
        self._stop_listening.set()
        # The listener waits in the socket for a notification: shutting the
        # socket down wakes it now, not at the end of its wait (half a second
        # at every close). The connection is the listener's alone, and it goes.
        listening = self._listening
        if listening is not None and not listening.closed:
            with contextlib.suppress(OSError, psycopg.Error):
                with socket.socket(fileno=os.dup(listening.fileno())) as sock:
                    sock.shutdown(socket.SHUT_RDWR)
