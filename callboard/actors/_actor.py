"""The `Actor` base class: what a user writes to define a kind of actor."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self

from ._policy import Supervision

if TYPE_CHECKING:
    from ..mailbox import Message
    from ..views import PendingApproval
    from ._context import Context

__all__ = ["Actor", "Logs"]


class Logs(Protocol):
    """One actor's committed logs, read (what `Actor.summarize` is handed)."""

    async def read_log(self, log: str, start: int = 0, limit: int = 1000) -> list[Any]: ...

    async def log_length(self, log: str) -> int: ...


class Actor:
    """One kind of actor. Subclass it, set ``kind``, and write `handle`.

    An instance lives while its actor is active: created from the last
    committed snapshot, dropped when passivated or stopped. Its durable
    state is ``self.state`` (an instance of ``state_type``); everything else
    on the instance is lost at passivation and after a crash.

    ``handle(ctx, message)`` should be short: change ``self.state``, emit,
    send, schedule. When it returns, the runtime commits the new snapshot
    and the mailbox cursor in one atomic step. A handler that raises is a
    crash: the actor is restarted from its last commit and the message is
    delivered again.

    **Long work** (a model turn, watching a process) runs as an *activity*:
    ``ctx.start_activity(fn, *args)`` starts ``fn`` in the actor's own
    nursery, and ``handle`` returns at once. The actor keeps handling its
    mailbox while activities run, so control messages (``cancel``, ``pause``,
    approvals, new prompts) reach it mid-work: a handler can cancel a
    running activity through a `trio.CancelScope` it kept on ``self``. An
    activity records progress by changing ``self.state`` and then calling
    ``await ctx.checkpoint()``. Activities end with the actor; on the next
    activation ``on_start`` looks at the restored state and resumes
    whatever was unfinished, and ``is_busy`` tells whole-process recovery
    which actors have such work.

    Class attributes:
        kind: the ``KIND`` part of addresses.
        state_type: an attrs class (or ``dict``) with defaults for every field.
        spec_type: the typed config given at spawn (an attrs class), or None.
        virtual: activated by its first message, no spawn needed.
        state_version: bump on incompatible changes and handle them in `migrate`.
        supervision: restart policy, see `Supervision`.
        kind_settings: settings this kind brings (see `with_settings`); its
            actors see them in ``ctx.settings``, over the runtime's.
    """

    kind: ClassVar[str]
    state_type: ClassVar[type[Any]] = dict
    spec_type: ClassVar[type[Any] | None] = None
    virtual: ClassVar[bool] = False
    state_version: ClassVar[int] = 1
    supervision: ClassVar[Supervision] = Supervision()
    kind_settings: ClassVar[Mapping[str, Any]] = MappingProxyType({})

    def __init__(self, address: str, spec: Any, state: Any) -> None:
        self.address = address
        self.spec = spec
        self.state = state

    @classmethod
    def with_settings(cls, settings: Mapping[str, Any]) -> type[Self]:
        """This kind, bound to ``settings``: a subclass of the same name whose
        actors see them in ``ctx.settings`` (over the runtime's ``settings``).

        How a layer above the runtime hands its kinds their configuration
        (`callboard.agent.builtin_kinds`) without the runtime knowing it.
        """
        bound = MappingProxyType({**cls.kind_settings, **settings})
        namespace = {"kind_settings": bound, "__module__": cls.__module__,
                     "__qualname__": cls.__qualname__, "__doc__": cls.__doc__}  # fmt: skip
        return type(cls.__name__, (cls,), namespace)

    @classmethod
    def caller(cls, runtime: Any) -> Any:
        """The caller's side of this kind, an API over ``runtime``, or None.

        How ``rt.tasks`` finds `callboard.Tasks`: the kind registered as
        ``task`` offers it, so the runtime never imports the agent layer.
        """
        return None

    @classmethod
    def initial_state(cls, spec: Any) -> Any:
        """The state of a new actor; by default ``state_type()``."""
        return cls.state_type()

    @classmethod
    def check_spec(cls, spec: Any, settings: Mapping[str, Any]) -> None:
        """Refuse, at spawn, a valid ``spec`` that the host's ``settings`` do not allow.

        Raise `callboard.SpecRefused` naming the setting that decides it (a
        workspace outside the roots, a model URL not allowed). By default
        every spec that structures is allowed.
        """

    @classmethod
    def migrate(cls, data: dict[str, Any], version: int) -> dict[str, Any]:
        """Turn a snapshot written at ``version`` into one for ``state_version``.

        New fields need no migration (they take their defaults); renames and
        reshapes do. Called only when the versions differ.
        """
        return data

    @classmethod
    async def summarize(cls, state: Any, logs: Logs) -> dict[str, Any] | None:
        """What ``inspect`` adds about an actor of this kind (a session's
        conversation), from its committed ``state`` (as JSON) and ``logs``;
        None, the default, adds nothing. It only reads."""
        return None

    def is_busy(self) -> bool:
        """True while the state records unfinished work (a running turn or job).

        Recorded with every commit; after the whole process died, busy actors
        are activated so that `on_start` can resume their work.
        """
        return False

    def pending_approvals(self) -> list[PendingApproval]:
        """The tool calls the restored state holds waiting for a person's answer.

        How `Runtime.approvals` lists them across kinds without knowing any:
        it restores each actor that has not ended from its last commit and
        asks. A call waiting for an answer is unfinished work, so only actors
        whose last commit was `is_busy` are asked. None by default; the
        agent's kinds list their running turn's.
        """
        return []

    def waits_for_person(self) -> bool:
        """True while the live actor's work waits for a person (``list``: ``waiting``):
        by default, while a call waits for approval; a kind may add its own reasons."""
        return bool(self.pending_approvals())

    async def on_start(self, ctx: Context) -> None:
        """Called on every activation, after the state is restored, before any message."""

    async def handle(self, ctx: Context, message: Message) -> None:
        raise NotImplementedError(f"{type(self).__qualname__} must define handle()")

    async def on_stop(self, ctx: Context) -> None:
        """Called when the actor is stopped on request, before its final commit."""
