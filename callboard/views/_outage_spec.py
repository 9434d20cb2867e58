"""The spec fields of a turn parked through a model outage, and their checks.

A session's and a task's spec may say how long a turn waits for a model
server that is down before it fails: ``outage_retry_limit`` (how many times
the parked turn asks again) and ``outage_retry_for`` (seconds from the first
failure). None leaves it to the host's settings of the same names (``callboard
serve --outage-retry-limit / --outage-retry-for``), then to the defaults in
``callboard.agent``; 0 turns the waiting off, so an outage fails the turn as
soon as the model client's own retries are spent.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["check_retry_limit", "check_retry_seconds"]

# TypeError, as the other spec validators raise: cattrs words a ValueError as
# "invalid value" and drops its message, but keeps a TypeError's.


def check_retry_limit(instance: Any, attribute: Any, value: object) -> None:
    """An attrs validator: ``outage_retry_limit`` is None or a whole number >= 0."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(
            f"'{attribute.name}' must be a whole number of retries >= 0 (0: do not wait "
            f"for a model that is down), got {value!r}"
        )


def check_retry_seconds(instance: Any, attribute: Any, value: object) -> None:
    """An attrs validator: ``outage_retry_for`` is None or finite seconds >= 0."""
    if value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise TypeError(
            f"'{attribute.name}' must be a number of seconds >= 0 (0: do not wait for a "
            f"model that is down), got {value!r}"
        )
