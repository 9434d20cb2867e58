"""callboard: a durable actor runtime for AI-agent workloads, on trio.

The layers, bottom up. A module imports only its own layer and the ones
below it (tests/test_layers.py walks every import to hold this):

- ``errors``: the exception tree, each error with its wire code.
- ``_version``: the package's version.
- ``_retry``: `Backoff` and `RestartWindow`, sans-IO.
- ``codec``: the cattrs converter over orjson; JSON held to what it says.
- ``_local``: loopback addresses and the data directory's token file.
- ``mailbox``: addresses, messages, acks, events, dead letters, limits.
- ``views``: what callers are told (`ActorInfo`, `ActorView`), shared with the client.
- ``store``: the async `Store` protocol and the SQLite store (group commit).
- ``actors``: the `Actor` base, its `Context` and `Supervision`.
- ``supervisor``: one actor's life (`ActorCell`), and `supervise` for trio tasks.
- ``runtime``: `open_runtime`, the `Runtime` facade, its cells' directory, the hub.
- ``llm``: the streaming chat client.
- ``tools``: the shell, file tools, workspaces, sandbox, executors.
- ``jobs``: the ``job`` kind: a detached process, watched.
- ``agent``: sessions, tasks, turns; `builtin_kinds` offers them to the runtime.
- ``gateway``: the websocket server, its tokens and grants.
- ``client``: the websocket client (imports no runtime, store, tools or agent).
- ``cli``: the ``callboard`` command, its REPL and ``serve``.

Each public name is re-exported here exactly once.
"""

from ._version import __version__ as __version__
from .actors import Actor as Actor
from .actors import Context as Context
from .actors import Supervision as Supervision
from .agent import Cancelled as Cancelled
from .agent import DeadlineExceeded as DeadlineExceeded
from .agent import Failed as Failed
from .agent import RunSpec as RunSpec
from .agent import Settled as Settled
from .agent import Succeeded as Succeeded
from .agent import TaskRecord as TaskRecord
from .agent import Tasks as Tasks
from .agent import WaitTimedOut as WaitTimedOut
from .errors import ActorStopped as ActorStopped
from .errors import BadAddress as BadAddress
from .errors import BadMessage as BadMessage
from .errors import BadRequest as BadRequest
from .errors import CallboardError as CallboardError
from .errors import CrashReason as CrashReason
from .errors import DataDirectoryIncompatible as DataDirectoryIncompatible
from .errors import DataDirectoryLocked as DataDirectoryLocked
from .errors import Escalation as Escalation
from .errors import Forbidden as Forbidden
from .errors import Lagged as Lagged
from .errors import Pruned as Pruned
from .errors import RuntimeClosed as RuntimeClosed
from .errors import SpawnConflict as SpawnConflict
from .errors import SpecRefused as SpecRefused
from .errors import StateError as StateError
from .errors import StoreUnavailable as StoreUnavailable
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
from .supervisor import ChildSpec as ChildSpec
from .supervisor import supervise as supervise
from .views import ActorInfo as ActorInfo
from .views import ActorView as ActorView

__all__ = [
    "Ack",
    "Actor",
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
    "TaskRecord",
    "Tasks",
    "UnknownActor",
    "UnknownKind",
    "UnknownOutcome",
    "WaitTimedOut",
    "open_runtime",
    "supervise",
]
