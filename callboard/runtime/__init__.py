"""The runtime: `open_runtime` and the embedding API."""

from ._hub import Hub as Hub
from ._hub import Subscription as Subscription
from ._runtime import BUILTIN_KINDS as BUILTIN_KINDS
from ._runtime import ActorInfo as ActorInfo
from ._runtime import ActorView as ActorView
from ._runtime import Runtime as Runtime
from ._runtime import RuntimeConfig as RuntimeConfig
from ._runtime import RuntimeStatistics as RuntimeStatistics
from ._runtime import open_runtime as open_runtime

__all__ = [
    "BUILTIN_KINDS",
    "ActorInfo",
    "ActorView",
    "Hub",
    "Runtime",
    "RuntimeConfig",
    "RuntimeStatistics",
    "Subscription",
    "open_runtime",
]
