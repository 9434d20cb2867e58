"""Leases on PostgreSQL: each node's heartbeat, who owns each actor, and the fence.

The statements behind several nodes on one database, each a function of a
psycopg connection (sync: they run on worker threads). Every time in them is
the database's (``clock_timestamp()``), never a node's wall clock.

- A node's **lease** is its row in ``callboard_nodes``: its name, the
  ``life`` of this opening of its store (a random number: a node restarted
  under the same name is another life), and ``expires``, which the node's
  heartbeat pushes ``lease_ttl`` past the database's clock (`renew`).
  The lease lives on the node's row, not on each actor's: one renewal keeps
  every actor of the node, whatever their number.
- An actor's **owner** is its row in ``callboard_ownership``: node, life and
  ``epoch``. `claim` takes it (a compare-and-set that bumps the epoch) when
  its owner's lease has expired, when its owner is an earlier life, or when
  it has none; never from a live owner.
- The **fence** (`FENCES`) is read in the transaction of each write of the
  owner, before its batch's ops run: its ownership row ``FOR SHARE``, whose
  life and epoch must be the ones the write was made with. A claim's UPDATE
  of that row waits for the write's transaction to end, and the read waits
  for a claim in flight, so either the write commits before the actor
  changes hands or it finds the new epoch and writes nothing.
"""

from __future__ import annotations

from typing import Any

import psycopg

__all__ = [
    "claim",
    "forget_gone",
    "leave",
    "list_nodes",
    "register",
    "rejoin",
    "renew",
]

_EXPIRES = "clock_timestamp() + make_interval(secs => %(ttl)s)"

_REGISTER = (
    "INSERT INTO callboard_nodes (node, life, started_at, heartbeat, expires) "
    f"VALUES (%(node)s, %(life)s, clock_timestamp(), clock_timestamp(), {_EXPIRES}) "
    "ON CONFLICT (node) DO UPDATE SET life = EXCLUDED.life, started_at = EXCLUDED.started_at, "
    "heartbeat = EXCLUDED.heartbeat, expires = EXCLUDED.expires "
    # What it replaced: a life still live means two processes share the name.
    "RETURNING (SELECT n.expires > clock_timestamp() AND n.life <> %(life)s "
    "FROM callboard_nodes n WHERE n.node = %(node)s)"
)

# After a lapse: a new life, unless another life of the name is live (a second
# process started under this name since; it is not displaced in turn).
_REJOIN = (
    "INSERT INTO callboard_nodes (node, life, started_at, heartbeat, expires) "
    f"VALUES (%(node)s, %(life)s, clock_timestamp(), clock_timestamp(), {_EXPIRES}) "
    "ON CONFLICT (node) DO UPDATE SET life = EXCLUDED.life, started_at = EXCLUDED.started_at, "
    "heartbeat = EXCLUDED.heartbeat, expires = EXCLUDED.expires "
    "WHERE callboard_nodes.expires <= clock_timestamp() RETURNING 1"
)

# Renewed only while still live: a lease that lapsed (a paused node, a long
# partition) may have lost actors meanwhile, so it is not quietly extended.
_RENEW = (
    f"UPDATE callboard_nodes SET heartbeat = clock_timestamp(), expires = {_EXPIRES} "
    "WHERE node = %(node)s AND life = %(life)s AND expires > clock_timestamp() RETURNING 1"
)

GONE_AFTER_TTLS = 10
"""A node whose lease expired this many of the renewing node's ``lease_ttl``
ago is forgotten: ``nodes`` stops listing it. It had lost every actor long
before; if it comes back it starts a new life like any node whose lease
lapsed (its renewal finds no row of its life)."""

_FORGET_GONE = (
    "DELETE FROM callboard_nodes WHERE expires < clock_timestamp() - "
    f"make_interval(secs => %(ttl)s * {GONE_AFTER_TTLS})"
)

_LIVE_OWNER = (
    "SELECT 1 FROM callboard_nodes n WHERE n.node = o.node AND n.life = o.life "
    "AND n.expires > clock_timestamp()"
)

_CLAIM = (
    "INSERT INTO callboard_ownership AS o (address, node, life, epoch, taken_at) "
    "SELECT %(address)s, %(node)s, %(life)s, 1, clock_timestamp() WHERE EXISTS ("
    "SELECT 1 FROM callboard_nodes WHERE node = %(node)s AND life = %(life)s "
    "AND expires > clock_timestamp()) "
    "ON CONFLICT (address) DO UPDATE SET node = EXCLUDED.node, life = EXCLUDED.life, "
    "epoch = o.epoch + 1, taken_at = EXCLUDED.taken_at "
    # Even an actor this life owns already gets a new epoch: a write queued
    # by a cell it stopped must not pass the fence of the cell that follows.
    f"WHERE (o.node = EXCLUDED.node AND o.life = EXCLUDED.life) OR NOT EXISTS ({_LIVE_OWNER}) "
    "RETURNING epoch"
)

FENCES = (
    "SELECT address, life, epoch FROM callboard_ownership "
    "WHERE address = ANY(%s) AND node = %s ORDER BY address FOR SHARE"
)
"""The fences of a batch's writes, in one statement: ``(address, life, epoch)``."""

# Actors with work (a message not handled, or a turn or a job running) whose
# owner is not live, or is this life (a notification may have been lost).
_TO_WAKE = (
    "SELECT a.address, o.address IS NULL FROM actors a "
    "LEFT JOIN callboard_ownership o ON o.address = a.address "
    "WHERE a.final = 0 AND (a.busy = 1 OR a.cursor < a.mailbox_head) AND ("
    "o.address IS NULL OR (o.node = %(node)s AND o.life = %(life)s) "
    f"OR NOT EXISTS ({_LIVE_OWNER})) ORDER BY a.address LIMIT %(limit)s"
)

_NODES = (
    "SELECT n.node, to_char(n.heartbeat AT TIME ZONE 'UTC', "
    '\'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"\'), n.expires > clock_timestamp(), '
    # An ended actor keeps its ownership row until its node leaves, but is
    # nobody's (as list and inspect say): only live ones are counted.
    "(SELECT COUNT(*) FROM callboard_ownership o JOIN actors a ON a.address = o.address "
    "WHERE o.node = n.node AND o.life = n.life AND a.final = 0) "
    "FROM callboard_nodes n ORDER BY n.node"
)

OWNER_JOIN = (
    "LEFT JOIN callboard_ownership o ON o.address = actors.address "
    "LEFT JOIN callboard_nodes n ON n.node = o.node AND n.life = o.life "
    "AND n.expires > clock_timestamp()"
)
"""What the reads of actors join to name an actor's owner: ``n.node``, None
unless a live node owns it."""


def register(conn: psycopg.Connection[Any], node: str, life: int, ttl: float) -> bool:
    """Start ``life`` of ``node``, its lease ``ttl`` seconds long; True if that
    replaced another live life of the same name (which is fenced from now on)."""
    with conn.transaction():
        row = conn.execute(_REGISTER, {"node": node, "life": life, "ttl": ttl}).fetchone()
    return bool(row and row[0])


def rejoin(conn: psycopg.Connection[Any], node: str, life: int, ttl: float) -> bool:
    """Start ``life`` of ``node`` after its lease lapsed; False (nothing changed)
    while another life of that name is live."""
    with conn.transaction():
        row = conn.execute(_REJOIN, {"node": node, "life": life, "ttl": ttl}).fetchone()
    return row is not None


def renew(conn: psycopg.Connection[Any], node: str, life: int, ttl: float) -> bool:
    """Push the lease ``ttl`` seconds on; False if it had lapsed (or the name
    was taken by another life), and is not renewed."""
    with conn.transaction():
        row = conn.execute(_RENEW, {"node": node, "life": life, "ttl": ttl}).fetchone()
    return row is not None


def forget_gone(conn: psycopg.Connection[Any], ttl: float) -> int:
    """Delete the rows of nodes whose lease expired `GONE_AFTER_TTLS` times
    ``ttl`` ago (a node killed for good); how many."""
    with conn.transaction():
        return conn.execute(_FORGET_GONE, {"ttl": ttl}).rowcount


def leave(conn: psycopg.Connection[Any], node: str, life: int) -> None:
    """A clean close: give up every actor and the lease, so that other nodes
    (or this one, started again) take them at once rather than after the TTL."""
    with conn.transaction():
        conn.execute("DELETE FROM callboard_ownership WHERE node = %s AND life = %s", (node, life))
        conn.execute("DELETE FROM callboard_nodes WHERE node = %s AND life = %s", (node, life))


def claim(conn: psycopg.Connection[Any], address: str, node: str, life: int) -> int | None:
    """Take ``address`` for ``life`` of ``node``, in the caller's transaction;
    its new epoch, or None when a live node owns it (or this lease lapsed)."""
    row = conn.execute(_CLAIM, {"address": address, "node": node, "life": life}).fetchone()
    return None if row is None else int(row[0])


def list_nodes(conn: psycopg.Connection[Any]) -> list[tuple[str, str, bool, int]]:
    """Every node's name, last heartbeat (ISO 8601, UTC), liveness and actors owned."""
    return [(r[0], r[1], bool(r[2]), int(r[3])) for r in conn.execute(_NODES).fetchall()]
