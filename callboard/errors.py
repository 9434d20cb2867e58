"""Every error callboard raises on purpose.

The tree::

    CallboardError(Exception)
    ├── BadRequest(CallboardError, ValueError)      the caller sent something unusable
    │   ├── BadAddress                               not KIND/NAME
    │   ├── BadMessage                               a body that does not serialize
    │   ├── SpawnConflict                            same address, different spec
    │   └── SpecRefused                              a valid spec the operator's settings forbid
    ├── Forbidden(CallboardError, PermissionError)   the token does not reach that actor
    ├── UnknownActor(CallboardError, LookupError)    no actor at that address
    ├── UnknownKind(CallboardError, LookupError)     no kind of that name
    ├── ActorStopped                                 the actor is stopped or failed
    ├── ActorCrashed                                 a stepped message crashed its handler
    ├── Permanent                                    fails every time: the actor is not restarted
    │   ├── StateError                               a snapshot that does not structure
    │   └── ConfigurationError                       a setting or directory the actor cannot use
    ├── StoreUnavailable                             cannot persist now: nothing was accepted
    │   └── LeaseLost                                another node owns the actor now
    ├── UnknownOutcome                               an I/O error left the write undecided
    ├── DataDirectoryLocked                          another process owns the data directory
    ├── DataDirectoryIncompatible                    a schema version this callboard cannot open
    ├── RuntimeClosed                                the runtime is shutting down
    ├── Lagged                                       a subscriber fell behind its buffer
    ├── Pruned                                       retention removed the events asked for
    ├── ModelError                                   a model call failed (see ``retryable``)
    ├── ToolError                                    a tool refused or failed
    │   └── PathEscape                               a path outside the workspace
    └── Escalation                                   a supervisor gave up and escalated

Terminal and retryable are told apart by ``retryable``: ``StoreUnavailable``
and ``RuntimeClosed`` may succeed later; the rest will not without a change.
A crash by a `Permanent` error is not restarted: the supervisor fails the
actor at once with that error (a restart would only meet it again).
"""

from __future__ import annotations

import traceback as _traceback
from typing import Any

import attrs

__all__ = [
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
    "LeaseLost",
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
]


class CallboardError(Exception):
    """Base of every error callboard raises on purpose.

    ``code`` is the wire error code (docs/protocol.md) the gateway answers with.
    """

    code = "internal"
    retryable = False


class BadRequest(CallboardError, ValueError):
    """The caller sent something unusable; the message names it."""

    code = "bad_request"


class BadAddress(BadRequest):
    """An address that is not ``KIND/NAME``."""


class BadMessage(BadRequest):
    """A message body that cannot be stored."""


class SpawnConflict(BadRequest):
    """An actor exists at that address with a different spec."""


class SpecRefused(BadRequest):
    """A spec that is well formed but asks for more than the operator allows
    (a workspace outside the roots, a model URL not allowed); the message
    names the setting that decides it."""


class Forbidden(CallboardError, PermissionError):
    """The connection's token does not reach that actor, or not for that op."""

    code = "forbidden"


class UnknownActor(CallboardError, LookupError):
    """No actor at that address."""

    code = "unknown_actor"


class UnknownKind(CallboardError, LookupError):
    """No actor kind of that name is registered."""

    code = "unknown_kind"


class ActorStopped(CallboardError):
    """The actor is stopped or failed and takes no more messages."""

    code = "bad_request"


class ActorCrashed(CallboardError):
    """The one message a step handed a paused actor crashed its handler. Its
    supervision decides what follows; restarted, it stays paused, and the next
    step tries the message again (or dead-letters it once it used its attempts)."""

    code = "bad_request"


class Permanent(CallboardError):
    """An error that will come back however often the actor is restarted (a
    spec or a setting it cannot work with, a missing directory, a snapshot
    that does not structure). An actor that raises one (from ``on_start``, a
    handler or an activity) is not restarted with backoff: its supervisor
    records ``actor.failed`` with this error at once. Raise it, or a subclass,
    from your own kinds for the same treatment; the message should say what
    to change.
    """


class StateError(Permanent):
    """A stored snapshot does not structure into the actor's state type."""


class ConfigurationError(Permanent):
    """A setting or a directory the actor needs is unusable (a relative path
    where an absolute one is needed, a directory that does not exist); the
    message names the setting and what to change."""


class StoreUnavailable(CallboardError):
    """The store cannot persist right now; nothing of the request was accepted."""

    code = "unavailable"
    retryable = True


class LeaseLost(StoreUnavailable):
    """This node no longer owns the actor: another node took it after this one's
    lease lapsed. Nothing was written; the actor stops on this node."""


class UnknownOutcome(CallboardError):
    """An I/O error (a failed fsync) came after the write may have reached the disk:
    it may or may not have been accepted. Retry with the same idempotency key to
    learn which (a duplicate ack means it was); without a key, a retry may
    apply it twice."""

    code = "unknown_outcome"
    retryable = True


class DataDirectoryLocked(CallboardError):
    """Another live process owns the data directory."""


class DataDirectoryIncompatible(CallboardError):
    """The data directory has a schema version this callboard does not know
    (a newer callboard wrote it); nothing in it was changed."""


class RuntimeClosed(CallboardError):
    """The runtime is closing or closed."""

    code = "unavailable"
    retryable = True


class Lagged(CallboardError):
    """A subscriber fell behind; resume with ``after``."""

    def __init__(self, actor: str, after: int) -> None:
        super().__init__(
            f"the subscription to {actor!r} fell behind its buffer; "
            f"subscribe again with after={after} to get the rest"
        )
        self.actor = actor
        self.after = after

    def __reduce__(self) -> tuple[type[Lagged], tuple[str, int]]:
        return type(self), (self.actor, self.after)


class Pruned(CallboardError):
    """Retention removed events a subscription asked for: those of ``actor``
    before ``first``, the first seq still held. Subscribe with ``after=first - 1``
    for the events held; nothing is handed over with a gap.
    """

    code = "pruned"

    def __init__(self, actor: str, first: int, message: str | None = None) -> None:
        super().__init__(
            message
            or (
                f"the events of {actor!r} before seq {first} were pruned by retention; "
                f"subscribe with after={first - 1} for the events still held (more are "
                "kept with a larger RuntimeConfig.event_retention or event_max_age)"
            )
        )
        self.actor = actor
        self.first = first

    def __reduce__(self) -> tuple[type[Pruned], tuple[str, int, str]]:
        return type(self), (self.actor, self.first, str(self))


class ModelError(CallboardError):
    """A model call failed. ``retryable`` says whether trying again may help."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False):
        super().__init__(message)
        self.status = status
        self.retryable = retryable

    def __reduce__(self) -> tuple[Any, ...]:
        # The keywords go back in as state: Exception's own reduce knows only args.
        return type(self), (str(self),), {"status": self.status, "retryable": self.retryable}


class ToolError(CallboardError):
    """A tool refused its arguments or failed."""


class PathEscape(ToolError):
    """A path leads outside the workspace."""


class Escalation(CallboardError):
    """A supervisor exceeded its restart intensity and gave up.

    ``reason`` is the boxed crash that made it give up.
    """

    def __init__(self, message: str, reason: CrashReason | None = None) -> None:
        super().__init__(message)
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (str(self), self.reason)


@attrs.frozen
class CrashReason:
    """A crash boxed for storage: its type, message and traceback as text."""

    type: str
    message: str
    traceback: str = ""

    @classmethod
    def from_exception(cls, exc: BaseException) -> CrashReason:
        tb = "".join(_traceback.format_exception(type(exc), exc, exc.__traceback__))
        return cls(type=type(exc).__qualname__, message=str(exc), traceback=tb)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "message": self.message, "traceback": self.traceback}

    def summary(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type
