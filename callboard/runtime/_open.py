"""`open_runtime`: the store, recovery, the background services, and closing.

A runtime lives inside one ``async with``: two nurseries, one for the
actors (cancelled first, when the block exits) and one for the services
(timers, key pruning, retention, passivation), which outlive the actors so
that nothing an actor awaits disappears under it.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from ..actors import Actor
from ..store import open_store
from . import _services as services
from ._config import RuntimeConfig
from ._directory import RuntimeState
from ._runtime import Runtime

__all__ = ["open_runtime"]

log = logging.getLogger("callboard.runtime")


@asynccontextmanager
async def open_runtime(
    data: str | Path,
    *,
    kinds: Sequence[type[Actor]] = (),
    config: RuntimeConfig | None = None,
    clock: Callable[[], float] = time.time,
    settings: Mapping[str, Any] | None = None,
    store: str | None = None,
    node: str | None = None,
) -> AsyncIterator[Runtime]:
    """Open the data directory, recover what a previous process left, run until exit.

    Only one runtime may own ``data`` at a time (`DataDirectoryLocked`); a
    relative ``data`` is taken against the working directory at open.
    On exit every actor is cancelled where it stands; nothing durable depends
    on that: the next runtime on ``data`` resumes from the last commits.
    ``clock`` is the wall clock for timers (tests pass one driven by trio's).
    Only the classes in ``kinds`` are registered: the agent's kinds come from
    `callboard.agent.builtin_kinds`. ``settings`` reach every actor as
    ``ctx.settings``, beside ``data_dir`` and under its kind's own.

    ``store``: a ``postgresql://user@host:port/db`` URL to keep everything in
    that database instead of SQLite in ``data`` (which still holds the node's
    lock and token); several runtimes (nodes) may share one database, each
    actor active on one of them at a time (``RuntimeConfig.lease_ttl``).
    ``node`` names this node there (by default its host and data directory).
    """
    config = config or RuntimeConfig()
    # A relative ``data`` means the directory the app is in now: made absolute
    # once, so that nothing derived from it (the jobs directory, the token)
    # depends on where the working directory is when it is used.
    data = os.path.abspath(data)  # noqa: ASYNC240 (no I/O: the cwd, once)
    async with open_store(
        data, clock=clock, queue_size=config.write_queue, url=store, node=node,
        lease_ttl=config.lease_ttl, lease_poll=config.lease_poll,
        commit_delay=config.commit_delay,
    ) as backend:  # fmt: skip
        rt = Runtime(backend, kinds, config=config, clock=clock, settings=settings)
        cells = rt._cells
        backend.on_recovered = cells.store_recovered
        # Several nodes on one store: work found for an actor, events another
        # node committed, actors whose lease this node lost.
        backend.on_wake = cells.wake
        backend.on_events = cells.committed_elsewhere
        backend.on_lost = cells.lease_lost
        # An idempotency key is stamped by the wall clock, or where trio's clock
        # has brought the wall clock of the opening if the wall clock is behind
        # it; the pruner measures its age by the other bound, whichever ran
        # less, so no key is forgotten before trio's clock has run its window:
        # neither after a jump forward of the wall clock, nor after one back
        # and its correction (see SteadyWallClock).
        backend.key_clock = rt._steady.never_behind
        async with trio.open_nursery() as background:
            # Before any cell: it outlives them all (their in-flight commits
            # are the writer's to finish, not the lane's).
            await background.start(cells.lane.run, name="lane")
            try:
                async with trio.open_nursery() as actors:
                    cells.nursery = actors
                    cells.state = RuntimeState.OPEN
                    recovered = await services.recover(cells)
                    if recovered:
                        log.info("recovered %d actors with unfinished work", recovered)
                    background.start_soon(services.run_timers, cells, name="timers")
                    background.start_soon(
                        services.prune_keys, cells, config, rt._steady, name="key pruning"
                    )
                    background.start_soon(rt.retention.serve, name="retention")
                    background.start_soon(
                        services.sweep_idle,
                        cells,
                        config.passivate_after,
                        config.rest_after,
                        name="passivation",
                    )
                    try:
                        yield rt
                    finally:
                        rt.closing.set()
                        cells.close()
                        actors.cancel_scope.cancel()
            finally:
                cells.state = RuntimeState.CLOSED
                background.cancel_scope.cancel()
