"""The runtime: `open_runtime` and `Runtime`, the embedding API.

How a message goes from `Runtime.send` to the store, its cell, the commit
and out to subscribers is told, top to bottom, in `_runtime`'s docstring.
"""

from ._config import RuntimeConfig as RuntimeConfig
from ._gc import tune_gc as tune_gc
from ._hub import Hub as Hub
from ._hub import Subscription as Subscription
from ._open import open_runtime as open_runtime
from ._retention import Retention as Retention
from ._retention import RetentionStatistics as RetentionStatistics
from ._runtime import Runtime as Runtime
from ._runtime import RuntimeState as RuntimeState
from ._services import TIMER_RECHECK as TIMER_RECHECK
from ._statistics import RuntimeStatistics as RuntimeStatistics

__all__ = [
    "TIMER_RECHECK",
    "Hub",
    "Retention",
    "RetentionStatistics",
    "Runtime",
    "RuntimeConfig",
    "RuntimeState",
    "RuntimeStatistics",
    "Subscription",
    "open_runtime",
    "tune_gc",
]
