"""How long to wait before trying again, and when to stop: `Backoff` and `RestartWindow`.

Both are plain values with no I/O: they read no clock and sleep on nothing.
The callers (an actor's supervision, `callboard.supervise`, the gateway
client's reconnection, the model client's retries) pass the attempt number
or the time and do the waiting themselves, so there is one backoff rule and
one restart window in the code base, each tested on its own.

The one backoff rule: before retry number ``attempt`` (1 for the first),
the ceiling is ``d = min(max, initial * multiplier**(attempt - 1))`` and the
delay is drawn uniformly from ``[(1 - jitter) * d, d]``. So the delay never
exceeds the cap, ``jitter=0`` waits exactly ``d``, and ``jitter=1`` is "full
jitter" in ``[0, d]``. The spread keeps many clients or actors that failed
together from all coming back in the same instant.
"""

from __future__ import annotations

import math
import random
from collections import deque
from typing import Any

import attrs

__all__ = ["Backoff", "RestartWindow"]


def _finite_at_least(low: float) -> Any:
    def check(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        name = f"{type(instance).__name__}.{attribute.name}"
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"{name} must be a number, got {value!r}")
        if not math.isfinite(value) or value < low:
            raise ValueError(f"{name} must be a finite number >= {low:g}, got {value!r}")

    return check


def _fraction(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    name = f"{type(instance).__name__}.{attribute.name}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if not 0 <= value <= 1:
        raise ValueError(f"{name} must be a fraction in [0, 1], got {value!r}")


def _optional_seconds(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        _finite_at_least(0)(instance, attribute, value)


def _pick(
    name: str, value: float | None, old_name: str, old: float | None, default: float
) -> float:
    if value is not None and old is not None:
        raise TypeError(f"Backoff got both {name}= and {old_name}= (the older name of {name})")
    if value is not None:
        return value
    return old if old is not None else default


@attrs.frozen(init=False)
class Backoff:
    """Capped exponential backoff with jitter (the rule is in the module docstring).

    Attributes:
        initial: the ceiling before the first retry, in seconds.
        max: the cap of every delay, in seconds.
        multiplier: how much the ceiling grows from one retry to the next (>= 1).
        jitter: the fraction of the ceiling the delay may fall short of it by.
        give_up_after: for the caller: seconds after the first failure after
            which it stops retrying (None: never). `delay` does not read it.

    ``first``, ``cap`` and ``factor`` are accepted as the older names of
    ``initial``, ``max`` and ``multiplier``.
    """

    initial: float = attrs.field(validator=_finite_at_least(0))
    max: float = attrs.field(validator=_finite_at_least(0))
    multiplier: float = attrs.field(validator=_finite_at_least(1))
    jitter: float = attrs.field(validator=_fraction)
    give_up_after: float | None = attrs.field(validator=_optional_seconds)

    def __init__(
        self,
        initial: float | None = None,
        max: float | None = None,
        multiplier: float | None = None,
        *,
        jitter: float = 0.5,
        give_up_after: float | None = None,
        first: float | None = None,
        cap: float | None = None,
        factor: float | None = None,
    ) -> None:
        self.__attrs_init__(
            initial=_pick("initial", initial, "first", first, 0.05),
            max=_pick("max", max, "cap", cap, 5.0),
            multiplier=_pick("multiplier", multiplier, "factor", factor, 2.0),
            jitter=jitter,
            give_up_after=give_up_after,
        )

    def ceiling(self, attempt: int) -> float:
        """The longest delay before retry number ``attempt`` (1 for the first)."""
        if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
            raise ValueError(f"Backoff attempt must be an int >= 1, got {attempt!r}")
        if self.initial == 0:
            return 0.0
        try:
            grown = self.initial * float(self.multiplier) ** (attempt - 1)
        except OverflowError:
            grown = math.inf
        return float(min(self.max, grown))

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """The delay before retry number ``attempt`` (1 for the first).

        ``rng`` makes the jitter reproducible; without it the module's shared
        generator draws it.
        """
        ceiling = self.ceiling(attempt)
        if not self.jitter:
            return ceiling
        draw = (rng or random).random()
        # ceiling - ceiling*jitter*(1-draw) stays within [0, ceiling] in floats too.
        return ceiling - ceiling * self.jitter * (1.0 - draw)


def _restarts(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"RestartWindow.{attribute.name} must be an int >= 0, got {value!r}")


def _period(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"RestartWindow.{attribute.name} must be a number, got {value!r}")
    if not value > 0:  # also refuses NaN; infinity is "never forget a restart"
        raise ValueError(f"RestartWindow.{attribute.name} must be a number > 0, got {value!r}")


@attrs.define
class RestartWindow:
    """OTP's restart intensity: more than ``intensity`` restarts within ``period`` seconds.

    The caller passes the time (any monotonic clock, in seconds). A restart
    at ``now`` counts while it is no older than ``period``: the window is
    ``[now - period, now]``.
    """

    intensity: int = attrs.field(validator=_restarts)
    period: float = attrs.field(validator=_period)
    _times: deque[float] = attrs.field(factory=deque, init=False, repr=False, eq=False)

    def record(self, now: float) -> bool:
        """Count a restart at ``now``; True when that makes more than ``intensity``."""
        if self._times and now < self._times[-1]:
            raise ValueError(f"RestartWindow times must not go back: {now!r} < {self._times[-1]!r}")
        self._times.append(now)
        return self.count(now) > self.intensity

    def count(self, now: float) -> int:
        """The restarts within ``period`` seconds before ``now`` (older ones are forgotten)."""
        while self._times and self._times[0] < now - self.period:
            self._times.popleft()
        return len(self._times)

    def reset(self) -> None:
        """Forget every restart: the next one starts a fresh window."""
        self._times.clear()
