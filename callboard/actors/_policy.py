"""How an actor wants to be supervised: OTP's restart types, intensity and backoff."""

from __future__ import annotations

import random
from typing import Any, Literal

import attrs

__all__ = ["OnIntensity", "Restart", "Supervision"]

Restart = Literal["permanent", "transient", "temporary"]
OnIntensity = Literal["dead_letter", "stop", "escalate"]


def _positive(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value <= 0:
        raise ValueError(f"Supervision.{attribute.name} must be positive, got {value!r}")


@attrs.frozen
class Supervision:
    """Restart policy of one actor kind.

    Attributes:
        restart: ``permanent`` and ``transient`` actors are restarted after a
            crash; a ``temporary`` one is marked failed instead.
        max_attempts: a message whose handler failed this many times (counted
            durably, so process deaths count too) goes to the dead letters.
        intensity, period: more than ``intensity`` restarts within ``period``
            seconds means the failure is not transient; then ``on_intensity``
            decides: dead-letter the message being handled and go on, stop the
            actor as failed, or escalate to the parent supervisor.
        backoff_initial, backoff_max, backoff_jitter: restart delays grow
            exponentially from ``backoff_initial``, capped at ``backoff_max``,
            each spread by up to ``backoff_jitter`` (a fraction) either way.
    """

    restart: Restart = "permanent"
    max_attempts: int = attrs.field(default=3, validator=_positive)
    intensity: int = attrs.field(default=10, validator=_positive)
    period: float = attrs.field(default=60.0, validator=_positive)
    on_intensity: OnIntensity = "dead_letter"
    backoff_initial: float = attrs.field(default=0.05, validator=_positive)
    backoff_max: float = attrs.field(default=5.0, validator=_positive)
    backoff_jitter: float = 0.2

    def backoff(self, restarts: int, rng: random.Random | None = None) -> float:
        """The delay before restart number ``restarts`` (1 for the first)."""
        base = min(self.backoff_max, self.backoff_initial * 2 ** max(0, restarts - 1))
        spread = (rng or random).uniform(-self.backoff_jitter, self.backoff_jitter)
        return float(max(0.0, min(self.backoff_max, base * (1 + spread))))
