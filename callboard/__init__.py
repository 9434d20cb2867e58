"""callboard: a durable actor runtime for AI-agent workloads, on trio.

Layers, bottom up; a module imports only from its own layer and the ones
below it (tests/test_layers.py walks every import to hold this):

- ``errors``: every error callboard raises on purpose, and `CrashReason`.
- ``_version``: the package's version, importable from any layer.
- ``_retry``: when to try again and when to stop: `Backoff`, `RestartWindow`.
- ``codec``: the one on-disk and wire format, a cattrs converter over orjson.
- ``_local``: this machine: which hosts are it, and the operator's token file.
- ``mailbox``: addresses, messages, acks, events and dead letters, and their limits.
- ``views``: what a caller shares with the server: `ActorView`, `RunSpec`, the task operations.
- ``store``: persistence: the async `Store` protocol, the SQLite and PostgreSQL stores.
- ``actors``: the `Actor` base, its `Context`, and how it wants to be supervised.
- ``supervisor``: one actor's life (restarts, dead letters, passivation), and `supervise`.
- ``runtime``: `open_runtime`, the `Runtime` facade, the directory of its cells, the hub.
- ``llm``: model calls, streamed, for the agent layer: OpenAI-compatible or Anthropic.
- ``tools``: the agent's tools (files, shell, jobs' executors), confined, and approvals.
- ``jobs``: the ``job`` kind: background processes that outlive a timeout and the runtime.
- ``agent``: turns, the ``session`` and ``task`` kinds, `builtin_kinds`, and `Tasks`.
- ``gateway``: the websocket gateway (docs/protocol.md) in front of a runtime.
- ``client``: a Python client for the gateway, returning the embedding API's types.
- ``console``: the operator's web page and the loopback server of its files.
- ``cli``: the ``callboard`` command.

Each public name is re-exported here exactly once, and imported only when
it is first used (PEP 562), as is each layer: ``import callboard.client``
loads the client's layers and not the runtime, the store or the agent.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__ as __version__

# Which layer each public name comes from; the TYPE_CHECKING imports below
# say the same for type checkers (a test holds the two together).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "actors": ("Actor", "Context", "Supervision"),
    "agent": ("Tasks",),
    "errors": (
        "ActorCrashed",
        "ActorStopped",
        "BadAddress",
        "BadMessage",
        "BadRequest",
        "CallboardError",
        "ConfigurationError",
        "CrashReason",
        "DataDirectoryIncompatible",
        "DataDirectoryLocked",
        "Escalation",
        "Forbidden",
        "Lagged",
        "ModelError",
        "PathEscape",
        "Permanent",
        "Pruned",
        "RuntimeClosed",
        "SpawnConflict",
        "SpecRefused",
        "StateError",
        "StoreUnavailable",
        "ToolError",
        "UnknownActor",
        "UnknownKind",
        "UnknownOutcome",
    ),
    "mailbox": ("Ack", "Address", "DeadLetter", "Event", "Message"),
    "runtime": (
        "Runtime",
        "RuntimeConfig",
        "RuntimeStatistics",
        "Subscription",
        "open_runtime",
        "tune_gc",
    ),
    "supervisor": ("ChildSpec", "supervise"),
    "views": (
        "ActorInfo",
        "ActorView",
        "Cancelled",
        "DeadlineExceeded",
        "Failed",
        "MessageOutcome",
        "PendingApproval",
        "OutputPage",
        "RunSpec",
        "Settled",
        "Succeeded",
        "TaskOperations",
        "TaskRecord",
        "WaitTimedOut",
    ),
}
_LAYER_OF = {name: layer for layer, names in _EXPORTS.items() for name in names}
_LAYERS = frozenset(
    {
        "errors",
        "_retry",
        "codec",
        "_local",
        "mailbox",
        "views",
        "store",
        "actors",
        "supervisor",
        "runtime",
        "llm",
        "tools",
        "jobs",
        "agent",
        "gateway",
        "client",
        "console",
        "cli",
    }
)

if TYPE_CHECKING:
    from .actors import Actor as Actor
    from .actors import Context as Context
    from .actors import Supervision as Supervision
    from .agent import Tasks as Tasks
    from .errors import ActorCrashed as ActorCrashed
    from .errors import ActorStopped as ActorStopped
    from .errors import BadAddress as BadAddress
    from .errors import BadMessage as BadMessage
    from .errors import BadRequest as BadRequest
    from .errors import CallboardError as CallboardError
    from .errors import ConfigurationError as ConfigurationError
    from .errors import CrashReason as CrashReason
    from .errors import DataDirectoryIncompatible as DataDirectoryIncompatible
    from .errors import DataDirectoryLocked as DataDirectoryLocked
    from .errors import Escalation as Escalation
    from .errors import Forbidden as Forbidden
    from .errors import Lagged as Lagged
    from .errors import ModelError as ModelError
    from .errors import PathEscape as PathEscape
    from .errors import Permanent as Permanent
    from .errors import Pruned as Pruned
    from .errors import RuntimeClosed as RuntimeClosed
    from .errors import SpawnConflict as SpawnConflict
    from .errors import SpecRefused as SpecRefused
    from .errors import StateError as StateError
    from .errors import StoreUnavailable as StoreUnavailable
    from .errors import ToolError as ToolError
    from .errors import UnknownActor as UnknownActor
    from .errors import UnknownKind as UnknownKind
    from .errors import UnknownOutcome as UnknownOutcome
    from .mailbox import Ack as Ack
    from .mailbox import Address as Address
    from .mailbox import DeadLetter as DeadLetter
    from .mailbox import Event as Event
    from .mailbox import Message as Message
    from .runtime import Runtime as Runtime
    from .runtime import RuntimeConfig as RuntimeConfig
    from .runtime import RuntimeStatistics as RuntimeStatistics
    from .runtime import Subscription as Subscription
    from .runtime import open_runtime as open_runtime
    from .runtime import tune_gc as tune_gc
    from .supervisor import ChildSpec as ChildSpec
    from .supervisor import supervise as supervise
    from .views import ActorInfo as ActorInfo
    from .views import ActorView as ActorView
    from .views import Cancelled as Cancelled
    from .views import DeadlineExceeded as DeadlineExceeded
    from .views import Failed as Failed
    from .views import MessageOutcome as MessageOutcome
    from .views import OutputPage as OutputPage
    from .views import PendingApproval as PendingApproval
    from .views import RunSpec as RunSpec
    from .views import Settled as Settled
    from .views import Succeeded as Succeeded
    from .views import TaskOperations as TaskOperations
    from .views import TaskRecord as TaskRecord
    from .views import WaitTimedOut as WaitTimedOut

__all__ = [
    "Ack",
    "Actor",
    "ActorCrashed",
    "ActorInfo",
    "ActorStopped",
    "ActorView",
    "Address",
    "BadAddress",
    "BadMessage",
    "BadRequest",
    "CallboardError",
    "Cancelled",
    "ChildSpec",
    "ConfigurationError",
    "Context",
    "CrashReason",
    "DataDirectoryIncompatible",
    "DataDirectoryLocked",
    "DeadLetter",
    "DeadlineExceeded",
    "Escalation",
    "Event",
    "Failed",
    "Forbidden",
    "Lagged",
    "Message",
    "MessageOutcome",
    "ModelError",
    "OutputPage",
    "PathEscape",
    "PendingApproval",
    "Permanent",
    "Pruned",
    "RunSpec",
    "Runtime",
    "RuntimeClosed",
    "RuntimeConfig",
    "RuntimeStatistics",
    "Settled",
    "SpawnConflict",
    "SpecRefused",
    "StateError",
    "StoreUnavailable",
    "Subscription",
    "Succeeded",
    "Supervision",
    "TaskOperations",
    "TaskRecord",
    "Tasks",
    "ToolError",
    "UnknownActor",
    "UnknownKind",
    "UnknownOutcome",
    "WaitTimedOut",
    "open_runtime",
    "supervise",
    "tune_gc",
]


def __getattr__(name: str) -> Any:
    """A public name, or a layer, imported on first use (then cached here)."""
    layer = _LAYER_OF.get(name)
    if layer is not None:
        value = getattr(importlib.import_module(f".{layer}", __name__), name)
        globals()[name] = value
        return value
    if name in _LAYERS:
        # Importing a submodule also sets it here as an attribute.
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *_LAYERS})
