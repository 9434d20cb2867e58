"""The runtime's background services: timers, passivation, key pruning, recovery.

Each runs in the runtime's service nursery for as long as it is open, and
each loop waits with a timeout or on an event that closing sets.
"""

from __future__ import annotations

import logging

import trio

from ..store import StoredAck
from ._config import RuntimeConfig
from ._directory import Directory
from ._retention import SteadyWallClock

__all__ = ["TIMER_RECHECK", "prune_keys", "recover", "run_timers", "sweep_idle"]

log = logging.getLogger("callboard.runtime")

TIMER_RECHECK = 1.0
"""Seconds the timer service waits at most before it reads the wall clock again.

Timers are due by the wall clock, but the service waits on trio's clock,
which does not jump: after the wall clock jumps forward (NTP, a suspended
machine, a test's clock), a timer fires within about this long of the wall
clock passing its due time, not after the whole wait it computed before."""


async def run_timers(cells: Directory) -> None:
    """Turn due timers into messages, and wake their actors."""
    store = cells.store
    while True:
        cells.timers_wakeup = trio.Event()
        due = await store.next_timer_due()
        if due is None:
            await cells.timers_wakeup.wait()
            continue
        delay = due - cells.wall_time()
        if delay > 0:
            # Never fires early: a timer is due when the wall clock says
            # so, however it jumped meanwhile (see TIMER_RECHECK).
            # At least a millisecond: with the wall clock standing still (a
            # test's, or one held back) a timer due a hair ahead would
            # otherwise spin this loop without ever letting go of the CPU.
            with trio.move_on_after(min(max(delay, 0.001), TIMER_RECHECK)):
                await cells.timers_wakeup.wait()
            continue
        for ack in await store.fire_timers():
            if isinstance(ack, StoredAck) and not ack.duplicate:
                cells.poke(ack.address)


async def sweep_idle(cells: Directory, period: float, rest_after: float) -> None:
    """Passivate actors idle for ``period``, and let those idle for
    ``rest_after`` rest (no task) first: memory follows the working set, not
    the number of actors ever touched."""
    while True:
        await trio.sleep(max(min(period, rest_after) / 4, 0.001))
        now = trio.current_time()
        for cell in list(cells.cells.values()):
            if cell.idle_since is None:
                continue
            idle = now - cell.idle_since
            if idle >= period:
                cell.request_passivation()
            elif idle >= rest_after:
                cell.request_rest()


async def prune_keys(cells: Directory, config: RuntimeConfig, steady: SteadyWallClock) -> None:
    """Forget idempotency keys older than ``key_window``.

    By the steady clock: a jump forward of the wall clock alone would forget
    keys still in their window, and a send retried just after would be
    delivered twice (see `SteadyWallClock`)."""
    while True:
        await trio.sleep(max(60.0, config.key_window / 10))
        await cells.store.prune_keys(config.key_window, now=steady())


async def recover(cells: Directory) -> int:
    """Activate every actor a previous process left with work; how many.

    On a store shared by several nodes, only those this node could take (no
    live node owns them), all claimed before this returns."""
    store = cells.store
    count = 0
    unowned: list[str] = []
    for address in await store.addresses_with_work(cells.wall_time()):
        kind = address.split("/", 1)[0]
        if cells.kind_named(kind) is None:
            log.warning(
                "not recovering %s: no kind %r is registered", address, kind,
                extra={"actor": address},
            )  # fmt: skip
            continue
        if address in cells.cells:
            continue
        if store.owns(address):
            cells.activate(address)
            count += 1
        else:
            unowned.append(address)
    if unowned:
        taken: list[str] = []

        async def claim(address: str) -> None:
            if await store.claim(address):
                taken.append(address)

        async with trio.open_nursery() as nursery:
            for address in unowned:
                nursery.start_soon(claim, address)
        for address in sorted(taken):
            if address not in cells.cells and cells.open:
                cells.activate(address)
                count += 1
    return count
