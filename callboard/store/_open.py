"""`open_store`: the store a runtime asks for, by where it is.

SQLite in the data directory unless a PostgreSQL URL is given. Only this
module knows both backends; the layers above type against `Store`. The
PostgreSQL store's module, and its driver, are imported only when a URL
asks for it, so the embedded default needs no driver installed.
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from ..errors import StoreUnavailable
from ._company import COMMIT_DELAY
from ._protocol import Store
from ._sqlite import open_sqlite_store

__all__ = ["open_store"]

_SCHEMES = ("postgresql://", "postgres://")


def open_store(
    directory: str | os.PathLike[str],
    *,
    clock: Callable[[], float] = time.time,
    queue_size: int = 16384,
    url: str | None = None,
    node: str | None = None,
    lease_ttl: float = 10.0,
    lease_poll: float = 1.0,
    commit_delay: float = COMMIT_DELAY,
) -> AbstractAsyncContextManager[Store]:
    """The runtime's store: SQLite in ``directory``, or with a ``url`` of the form
    ``postgresql://user@host:port/db``, PostgreSQL there (``directory`` still
    holds the node's lock and token). ``node`` names this node in the database,
    whose lease lasts ``lease_ttl`` seconds and which looks for work every
    ``lease_poll`` seconds (see `RuntimeConfig`); SQLite, one node, needs none.
    Before a group commit of actor steps only, the writer waits up to
    ``commit_delay`` seconds for another write to share it
    (`RuntimeConfig.commit_delay`)."""
    if url is None:
        return open_sqlite_store(
            directory, clock=clock, queue_size=queue_size, commit_delay=commit_delay
        )
    if not url.startswith(_SCHEMES):
        scheme = url.split("://", 1)[0] if "://" in url else "a path"
        raise StoreUnavailable(
            f"the store must be a postgresql:// URL (or none, for SQLite in the data "
            f"directory), not {scheme!r}"
        )
    if importlib.util.find_spec("psycopg") is None:  # pragma: no cover (dev installs it)
        raise StoreUnavailable(
            "the PostgreSQL store needs its driver, psycopg: pip install 'callboard[postgres]'"
        )
    from ._postgres import open_postgres_store

    return open_postgres_store(
        url, directory, node=node, clock=clock, queue_size=queue_size, lease_ttl=lease_ttl,
        lease_poll=lease_poll, commit_delay=commit_delay,
    )  # fmt: skip
