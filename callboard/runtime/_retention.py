"""The retention service: what a long-running runtime stops keeping, and when.

Every ``retention_interval`` seconds the runtime runs a pass (`Retention.serve`):
a series of store ops, each deleting at most ``retention_batch`` rows, queued
to the writer like any other write (see ``callboard.store._retention`` for
what goes, in which order, and how ``events_from`` keeps a subscriber from a
silent gap). The ages are measured with `SteadyWallClock`, so a jump of the
wall clock alone removes nothing early.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import NoReturn

import attrs
import trio

from ..errors import StoreUnavailable, UnknownOutcome
from ..store import RetentionPolicy, RetentionStep, Store

__all__ = ["Retention", "RetentionStatistics", "SteadyWallClock"]

log = logging.getLogger("callboard.runtime")


class SteadyWallClock:
    """The wall clock, never further ahead of its reading at start than trio's clock ran.

    Stored times are stamped with the wall clock, but an age that decides a
    deletion is measured by whichever of it and trio's clock ran less: a jump
    forward of the wall clock alone (NTP, a suspended machine, a test's
    clock) must not forget an idempotency key or prune an event early.
    (Trio's clock stands still while the machine is suspended: things then
    stay longer than their period, never shorter.)
    """

    def __init__(self, wall: Callable[[], float]) -> None:
        self._wall = wall
        self._wall_at_start = wall()
        self._trio_at_start = trio.current_time()

    def __call__(self) -> float:
        ran = trio.current_time() - self._trio_at_start
        return min(self._wall(), self._wall_at_start + ran)

    def never_behind(self) -> float:
        """The other bound: the wall clock, or where trio's clock has brought its
        reading at start if the wall clock is behind that. Stamping with this
        and aging with ``self()`` lets nothing go before trio's clock ran its
        period, whichever way the wall clock jumped (see `Runtime._key_clock`)."""
        ran = trio.current_time() - self._trio_at_start
        return max(self._wall(), self._wall_at_start + ran)


@attrs.frozen
class RetentionStatistics:
    """What retention removed: in one pass (`Retention.run_pass`), or since the
    runtime opened (`Retention.statistics`).

    Attributes:
        passes: passes finished.
        events: events pruned (beyond the count or the age kept, and of removed actors).
        actors: stopped or failed actors removed, with everything they held.
        rows: logs, mailbox rows, keys and timers of those actors.
        dead_letters: dead letters expired.
        pages: free database pages given back to the file system.
    """

    passes: int = 0
    events: int = 0
    actors: int = 0
    rows: int = 0
    dead_letters: int = 0
    pages: int = 0

    def add(self, step: RetentionStep | RetentionStatistics) -> RetentionStatistics:
        return RetentionStatistics(
            self.passes + (step.passes if isinstance(step, RetentionStatistics) else 0),
            self.events + step.events,
            self.actors + step.actors,
            self.rows + step.rows,
            self.dead_letters + step.dead_letters,
            self.pages + step.pages,
        )


class Retention:
    """Runs retention passes on one store: now (`run_pass`) or as a service (`serve`).

    A period or count of None keeps that kind of data for good. Passes never
    overlap: one asked for while another runs waits for it, then runs.
    """

    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], float],
        keep_events: int | None,
        event_max_age: float | None,
        stopped_retention: float | None,
        dead_letter_retention: float | None,
        batch: int,
        interval: float,
    ) -> None:
        self._store = store
        self._clock = clock
        self._keep_events = keep_events
        self._event_max_age = event_max_age
        self._stopped_retention = stopped_retention
        self._dead_letter_retention = dead_letter_retention
        self._batch = batch
        self._interval = interval
        self._lock = trio.Lock()
        self._totals = RetentionStatistics()

    def policy(self, now: float) -> RetentionPolicy:
        """What a pass that starts at ``now`` removes."""

        def before(period: float | None) -> float | None:
            return None if period is None else now - period

        return RetentionPolicy(
            keep_events=self._keep_events,
            events_before=before(self._event_max_age),
            stopped_before=before(self._stopped_retention),
            dead_letters_before=before(self._dead_letter_retention),
            batch=self._batch,
        )

    def statistics(self) -> RetentionStatistics:
        return self._totals

    async def run_pass(self) -> RetentionStatistics:
        """Run one whole pass now; returns what it removed, durable on return.

        Each of its ops is durable once done: cancelled, the pass stops
        after the op under way, and the next pass goes on from there.
        """
        async with self._lock:
            policy = self.policy(self._clock())
            done = RetentionStatistics(passes=1)
            step = RetentionStep()
            while not step.done:
                step = await self._store.retain(policy, step)
                done = done.add(step)
                self._totals = self._totals.add(step)
            self._totals = attrs.evolve(self._totals, passes=self._totals.passes + 1)
        if done.events or done.actors or done.dead_letters or done.pages:
            log.info(
                "retention removed %d events, %d stopped actors (and %d rows they held) and "
                "%d dead letters, and gave %d free pages back to the file system",
                done.events, done.actors, done.rows, done.dead_letters, done.pages,
            )  # fmt: skip
        return done

    async def serve(self) -> NoReturn:
        """A pass every ``interval`` seconds, until cancelled."""
        while True:
            await trio.sleep(self._interval)
            try:
                await self.run_pass()
            except (StoreUnavailable, UnknownOutcome) as exc:
                # What the pass did stays done; the next one goes on from there.
                log.warning(
                    "a retention pass stopped: %s; the next one starts in %g s", exc, self._interval
                )
