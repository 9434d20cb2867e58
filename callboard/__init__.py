"""callboard: a durable actor runtime for AI-agent workloads, on trio.

Layout, bottom up: `errors`; `store` (SQLite, group commit); `mailbox`
(addresses, messages, acks, events); `actors` (the `Actor` base and its
`Context`); `supervisor` (one actor's life: restarts, dead letters,
passivation); `runtime` (`open_runtime`). Each public name is re-exported
here exactly once.
"""

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

__version__ = "0.1.0"

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
