"""How an actor wants to be supervised: OTP's restart types, intensity and backoff."""

from __future__ import annotations

import math
import random
from typing import Any, Literal

import attrs

from .._retry import Backoff

__all__ = ["OnIntensity", "Restart", "Supervision"]

Restart = Literal["permanent", "transient", "temporary"]
OnIntensity = Literal["dead_letter", "stop", "escalate"]


def _positive(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value <= 0:
        raise ValueError(f"Supervision.{attribute.name} must be positive, got {value!r}")


def _finite_positive(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not 0 < value < math.inf:
        raise ValueError(
            f"Supervision.{attribute.name} must be a positive finite number, got {value!r}"
        )


def _fraction(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not 0 <= value <= 1:
        raise ValueError(f"Supervision.{attribute.name} must be in [0, 1], got {value!r}")


@attrs.frozen
class Supervision:
    """Restart policy of one actor kind.

    Attributes:
        restart: ``permanent`` and ``transient`` actors are restarted after a
            crash; a ``temporary`` one is marked failed instead. Whatever
            this says, a crash by a `callboard.Permanent` error (a
            `ConfigurationError`, a `StateError`: one that a restart would
            only meet again) is not restarted: the actor fails at once with
            that error, with no backoff and no dead letter.
        max_attempts: a message whose handler failed this many times (counted
            durably, so process deaths count too) goes to the dead letters.
            A process death counts an attempt for each message that may have
            been in the batch then running: those within ``batch_max``
            (`RuntimeConfig`) of the actor's cursor.
        intensity, period: more than ``intensity`` restarts within ``period``
            seconds means the failure is not transient; then ``on_intensity``
            decides: dead-letter the message being handled and go on, stop the
            actor as failed, or escalate to the parent supervisor.
        backoff_initial, backoff_max, backoff_jitter: restart delays follow
            the one `Backoff` rule: the ceiling doubles from ``backoff_initial``
            up to ``backoff_max``, and each delay is drawn from
            ``[(1 - backoff_jitter) * ceiling, ceiling]``.
    """

    restart: Restart = "permanent"
    max_attempts: int = attrs.field(default=3, validator=_positive)
    intensity: int = attrs.field(default=10, validator=_positive)
    period: float = attrs.field(default=60.0, validator=_positive)
    on_intensity: OnIntensity = "dead_letter"
    backoff_initial: float = attrs.field(default=0.05, validator=_finite_positive)
    backoff_max: float = attrs.field(default=5.0, validator=_finite_positive)
    backoff_jitter: float = attrs.field(default=0.2, validator=_fraction)

    @property
    def backoff_rule(self) -> Backoff:
        """``backoff_initial``, ``backoff_max`` and ``backoff_jitter`` as a `Backoff`."""
        return Backoff(self.backoff_initial, self.backoff_max, jitter=self.backoff_jitter)

    def backoff(self, restarts: int, rng: random.Random | None = None) -> float:
        """The delay before restart number ``restarts`` (1 for the first)."""
        return self.backoff_rule.delay(max(1, restarts), rng)
