"""A turn parked through a model outage, and retried by a durable timer.

The model client retries a failed call itself (``callboard.llm``), and the
turn asks once more when a stream broke (``_turn``): seconds of waiting in
all. A model server that is down for longer (a restart, a network cut, an
overloaded provider answering 5xx or 429 for minutes) would then fail the
turn, or the whole task, for good. Instead, a failure that may pass (the
``ModelError`` is ``retryable``: a connection refused, a timeout, 429, 5xx)
*parks* the turn:

- ``park`` records a `ModelOutage` on the turn's journal (when the outage
  began, how many asks failed, the last error, when the next ask is due),
  emits ``turn.waiting_for_model`` saying so, and schedules a durable timer
  (``ctx.schedule``) for the next ask, all in one commit. The runner then
  ends: a parked turn holds no task and no connection, and an idle actor
  may be passivated while it waits.
- The timer's message (`OUTAGE_RETRY`) marks the turn due again
  (`take_retry`) and the actor wakes its runner, which asks the model where
  the turn stood. The timer is part of the commit, so it fires after a
  restart too, at once if it fell due while no runtime ran; the turn is
  asked once, and its prompt is in the conversation once.
- The parked turn is still the running turn: ``cancel`` ends it (and a
  task's settles), ``stop`` stops it, a prompt that arrives is queued
  behind it (or steered into it, taken at its next ask). `forget` drops the
  timer of a turn ended meanwhile. A session's ``on_restart: interrupt``
  leaves a parked turn parked: nothing of it was cut off, and activation by
  its own timer after passivation is no restart. An `OUTAGE_RETRY` sent by
  a client, naming the turn, asks at once.
- Delays follow the one `Backoff` rule, capped. The waiting ends, failing
  the turn as before with a sentence that says how long and how many times
  it tried, after ``outage_retry_limit`` retries or ``outage_retry_for``
  seconds from the first failure, whichever comes first; either set to 0
  turns parking off. A failure that cannot pass (401, out of quota, a bad
  request, a context overflow, no model configured) fails at once.

The settings, each in the spec of a session or task, else the host's
(`builtin_kinds`' settings, ``callboard serve --outage-retry-limit /
--outage-retry-for``): ``outage_retry_limit`` (default none) and
``outage_retry_for`` (default `DEFAULT_RETRY_FOR`, when no limit is set).
Host settings only: ``outage_backoff_initial`` and ``outage_backoff_max``
(seconds, `DEFAULT_BACKOFF`), and ``model_call_attempts``, the model
client's own attempts at one call (5).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs

from .._retry import Backoff
from ..actors import Context
from ..errors import ConfigurationError, ModelError
from ..mailbox import Message
from ._journal import ModelOutage, TurnJournal

__all__ = [
    "DEFAULT_BACKOFF",
    "DEFAULT_RETRY_FOR",
    "OUTAGE_RETRY",
    "OutagePolicy",
    "check_settings",
    "client_attempts",
    "forget",
    "outage_policy",
    "park",
    "take_retry",
    "waiting",
]

OUTAGE_RETRY = "outage.retry"
"""The type of the timer message that asks a parked turn's model again."""

_TIMER_KEY = "outage.retry"  # one retry timer per actor: the running turn's

DEFAULT_RETRY_FOR = 1800.0
"""Seconds a turn waits for a model server that is down, when nothing says otherwise."""

DEFAULT_BACKOFF = Backoff(5.0, 300.0, jitter=0.5)
"""From about 5 s between asks, doubling, to at most 5 minutes."""

_CLIENT_ATTEMPTS = 5  # the model client's own default (ChatClient.max_attempts)


@attrs.frozen
class OutagePolicy:
    """How long a parked turn waits: ``limit`` retries, ``retry_for`` seconds from
    the first failure (None: no bound of that sort), delays by ``backoff``."""

    limit: int | None
    retry_for: float | None
    backoff: Backoff

    @property
    def off(self) -> bool:
        """Whether an outage fails the turn at once, as a refusal would."""
        return self.limit == 0 or self.retry_for == 0

    def exhausted(self, failures: int, waited: float) -> bool:
        """Whether ``failures`` failed asks over ``waited`` seconds are the end of it."""
        over_limit = self.limit is not None and failures > self.limit
        return over_limit or (self.retry_for is not None and waited >= self.retry_for)


def outage_policy(spec: Any, settings: Mapping[str, Any]) -> OutagePolicy:
    """The policy of an actor with ``spec`` (a session's or a task's) on a host with
    ``settings``: the spec's fields, else the host's, else the defaults.

    Raises:
        ConfigurationError: a host setting is not what it must be (naming it).
    """
    limit = spec.outage_retry_limit
    if limit is None:
        limit = _count(settings, "outage_retry_limit", low=0)
    retry_for = spec.outage_retry_for
    if retry_for is None:
        retry_for = _seconds(settings, "outage_retry_for")
    if retry_for is None and limit is None:
        retry_for = DEFAULT_RETRY_FOR
    initial = _seconds(settings, "outage_backoff_initial")
    cap = _seconds(settings, "outage_backoff_max")
    backoff = Backoff(
        DEFAULT_BACKOFF.initial if initial is None else initial,
        DEFAULT_BACKOFF.max if cap is None else cap,
        jitter=DEFAULT_BACKOFF.jitter,
    )
    return OutagePolicy(limit, None if retry_for is None else float(retry_for), backoff)


def client_attempts(settings: Mapping[str, Any]) -> int:
    """The model client's attempts at one call (its own retries), setting
    ``model_call_attempts``.

    Raises:
        ConfigurationError: the setting is not a whole number >= 1.
    """
    attempts = _count(settings, "model_call_attempts", low=1)
    return _CLIENT_ATTEMPTS if attempts is None else attempts


def check_settings(settings: Mapping[str, Any]) -> None:
    """Refuse, at start-up, host settings that would fail every turn later.

    Raises:
        ConfigurationError: naming the setting and what it must be.
    """
    client_attempts(settings)
    _count(settings, "outage_retry_limit", low=0)
    for name in ("outage_retry_for", "outage_backoff_initial", "outage_backoff_max"):
        _seconds(settings, name)


def waiting(turn: TurnJournal) -> bool:
    """Whether ``turn`` is parked until its retry timer fires."""
    return turn.outage is not None and turn.outage.waiting


def park(ctx: Context, turn: TurnJournal, failure: ModelError, policy: OutagePolicy) -> None:
    """Park ``turn`` after ``failure`` for the actor's next commit: record the
    outage, announce ``turn.waiting_for_model`` and schedule the retry.

    Raises:
        ModelError: the turn is not to wait: ``failure`` itself when it cannot
            pass or parking is off, or one saying how long and how many times
            the turn tried once the policy's bound is reached.
    """
    if not failure.retryable or policy.off:
        raise failure
    now = ctx.now()
    outage = turn.outage
    since = now if outage is None else outage.since
    failures = 1 if outage is None else outage.failures + 1
    if policy.exhausted(failures, now - since):
        raise ModelError(
            _gave_up(failures, now - since, policy, failure),
            status=failure.status,
            retryable=True,  # the model may be back later: asking again then may help
        )
    delay = policy.backoff.delay(failures)
    if policy.retry_for is not None:
        # The last ask comes when the time is up, not a whole backoff after it.
        delay = max(0.0, min(delay, since + policy.retry_for - now))
    turn.outage = ModelOutage(since, failures, now + delay, str(failure), failure.status)
    ctx.schedule(delay, OUTAGE_RETRY, {"turn_id": turn.turn_id}, key=_TIMER_KEY)
    ctx.emit(
        "turn.waiting_for_model",
        {
            "turn_id": turn.turn_id,
            "prompt_id": turn.prompt_id,
            "attempt": failures,
            "retry_at": round(now + delay, 3),
            "retry_in": round(delay, 3),
            "since": round(since, 3),
            "error": str(failure),
            "status": failure.status,
        },
    )


def take_retry(turn: TurnJournal | None, message: Message) -> bool:
    """The retry timer fired: mark ``turn`` due again; True when it did (the
    caller wakes its runner).

    A timer for a turn that is not parked any more (it was cancelled, or a
    restart asked it already) changes nothing and says nothing: it is the
    actor's own message, and no one waits for an answer to it.
    """
    body = message.body
    if turn is None or turn.outage is None or not turn.outage.waiting:
        return False
    if not isinstance(body, dict) or body.get("turn_id") != turn.turn_id:
        return False
    turn.outage.waiting = False
    return True


def forget(ctx: Context, turn: TurnJournal) -> None:
    """``turn`` ends while it may be parked: drop its retry timer in the next commit."""
    if turn.outage is not None:
        ctx.cancel_timer(_TIMER_KEY)


def _gave_up(failures: int, waited: float, policy: OutagePolicy, failure: ModelError) -> str:
    bounds = []
    if policy.limit is not None:
        bounds.append(f"outage_retry_limit {policy.limit}")
    if policy.retry_for is not None:
        bounds.append(f"outage_retry_for {policy.retry_for:g} s")
    tries = f"{failures} time{'s' if failures != 1 else ''}"
    return (
        f"the model could not be reached: the turn asked it {tries} over "
        f"{_duration(waited)} and waited no longer ({', '.join(bounds)}; raise "
        f"{'it' if len(bounds) == 1 else 'them'} to wait longer). The last error: {failure}"
    )


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    return f"{minutes // 60} h {minutes % 60} min"


def _count(settings: Mapping[str, Any], name: str, *, low: int) -> int | None:
    value = settings.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigurationError(
            f"the setting {name!r} must be a whole number >= {low}, got {value!r}"
        )
    return value


def _seconds(settings: Mapping[str, Any], name: str) -> float | None:
    value = settings.get(name)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ConfigurationError(
            f"the setting {name!r} must be a number of seconds >= 0, got {value!r}"
        )
    return float(value)
