"""`RuntimeConfig`: the limits, timings and retention of a runtime, each checked on its way in.

Every field is documented here and in the README's Limits table; a value
that makes no sense is refused with a `ValueError` naming the field.
"""

from __future__ import annotations

from typing import Any

import attrs

from ..store import COMMIT_DELAY, MAX_COMMIT_DELAY

__all__ = ["RuntimeConfig"]


def _positive_count(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"RuntimeConfig.{attribute.name} must be an integer >= 1, got {value!r}")


def _positive_seconds(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"RuntimeConfig.{attribute.name} must be seconds > 0, got {value!r}")


def _count_or_none(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(
            f"RuntimeConfig.{attribute.name} must be an integer >= 1, or None to keep every "
            f"one, got {value!r}"
        )


def _seconds_or_none(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int | float) or not value > 0
    ):
        raise ValueError(
            f"RuntimeConfig.{attribute.name} must be seconds > 0, or None to keep for good, "
            f"got {value!r}"
        )


def _delay_seconds(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= MAX_COMMIT_DELAY
    ):
        raise ValueError(
            f"RuntimeConfig.{attribute.name} must be seconds from 0 to {MAX_COMMIT_DELAY:g} "
            f"(0: never wait), got {value!r}"
        )


_DAY = 24 * 3600.0


@attrs.frozen
class RuntimeConfig:
    """Limits and timings of a runtime; every one is documented in the README.

    Attributes:
        passivate_after: seconds an actor with nothing to do stays in memory.
        rest_after: seconds an actor with nothing to do keeps its task; then it
            rests, in memory with its state but with no task (about half of
            an idle actor's memory), until a message wakes it. Its next
            message costs a task start; nothing is read from the store.
        passivating_at_once: actors that passivate at the same time; when more
            are idle they wait their turn (their final commits would otherwise
            all be in memory together, and the heap keeps that peak).
        inbox_limit: messages of one actor held in memory; the rest wait on disk.
        batch_max: messages one actor may handle before one commit.
        subscriber_buffer: live events buffered per subscription before it lags.
        replay_page: stored events a subscription reads from the store at once
            when it replays (``after``) or catches up after a lag.
        replay_page_bytes: bytes of event data in one such page; a page holds
            at least one event, however big. A replaying subscription holds
            at most one page in memory.
        key_window: seconds an idempotency key is remembered.
        write_queue: writes waiting for the writer before senders wait too.
        commit_delay: seconds the store's writer waits, before a group commit
            of actor steps only, for another write to share its fsync (0: it
            never waits). One client sending one message at a time then
            costs one fsync a message, not two; after waits that nothing
            joined it waits less and less often (see ``callboard.store``).
        event_retention: the newest events kept per actor (None: all). Older
            ones are pruned, and a subscription asking for them is answered
            `Pruned`, naming the first seq still held. 10,000 bounds an actor's
            events to about 14 MB even at 1 KB each, yet keeps days of a busy
            session for a client to replay; nothing an actor needs to resume
            lives in events (a session's conversation is in its logs).
        event_max_age: seconds an event is kept (None: no age limit, the
            default). A pass then reads every actor's oldest event, so keep it
            off unless the count alone bounds too little.
        stopped_retention: seconds a stopped or failed actor is kept after it
            went final, with its events, logs, keys and timers (None: for
            good). Then its address is free again: a virtual kind's next
            message makes a new actor there, from seq 1.
        dead_letter_retention: seconds a dead letter is kept unless re-queued
            (None: for good).
        retention_interval: seconds between retention passes.
        retention_batch: rows one retention write deletes at most; a pass is
            many such writes, each a few milliseconds of the writer's time.
        lease_ttl: seconds a node's lease on its actors lasts past its last
            heartbeat (several nodes on one PostgreSQL store; the heartbeat
            renews it every third of this). A node that could not renew it for
            this long stops its actors, and other nodes may take them.
        lease_poll: seconds between a node's looks for actors with work and
            no live owner (taken over after a node died) and for what a lost
            notification did not say; less than ``lease_ttl``.
    """

    passivate_after: float = attrs.field(default=30.0, validator=_positive_seconds)
    rest_after: float = attrs.field(default=5.0, validator=_positive_seconds)
    passivating_at_once: int = attrs.field(default=256, validator=_positive_count)
    inbox_limit: int = attrs.field(default=1000, validator=_positive_count)
    batch_max: int = attrs.field(default=256, validator=_positive_count)
    subscriber_buffer: int = attrs.field(default=1024, validator=_positive_count)
    replay_page: int = attrs.field(default=512, validator=_positive_count)
    replay_page_bytes: int = attrs.field(default=1024 * 1024, validator=_positive_count)
    key_window: float = attrs.field(default=7 * _DAY, validator=_positive_seconds)
    write_queue: int = attrs.field(default=16384, validator=_positive_count)
    commit_delay: float = attrs.field(default=COMMIT_DELAY, validator=_delay_seconds)
    event_retention: int | None = attrs.field(default=10_000, validator=_count_or_none)
    event_max_age: float | None = attrs.field(default=None, validator=_seconds_or_none)
    stopped_retention: float | None = attrs.field(default=30 * _DAY, validator=_seconds_or_none)
    dead_letter_retention: float | None = attrs.field(default=30 * _DAY, validator=_seconds_or_none)
    retention_interval: float = attrs.field(default=60.0, validator=_positive_seconds)
    retention_batch: int = attrs.field(default=2000, validator=_positive_count)
    lease_ttl: float = attrs.field(default=10.0, validator=_positive_seconds)
    lease_poll: float = attrs.field(default=1.0, validator=_positive_seconds)

    @lease_poll.validator
    def _poll_within_ttl(self, attribute: attrs.Attribute[Any], value: float) -> None:
        if value >= self.lease_ttl:
            raise ValueError(
                f"RuntimeConfig.lease_poll must be less than lease_ttl ({self.lease_ttl!r}), "
                f"got {value!r}"
            )
