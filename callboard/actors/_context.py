"""`Context`: what a handler or activity uses to act, recorded in the actor's next commit."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol

import attrs

from ..codec import dumps, loads
from ..errors import BadMessage
from ..mailbox import encode_body, parse_address
from ..store import Enqueue, NewEvent, NewTimer

__all__ = ["Context", "Effects"]


@attrs.define
class Effects:
    """What a step produced, waiting for the commit that makes it durable."""

    events: list[NewEvent] = attrs.Factory(list)
    sends: list[Enqueue] = attrs.Factory(list)
    timers: list[NewTimer] = attrs.Factory(list)
    cancel_timers: list[str] = attrs.Factory(list)
    appends: list[tuple[str, bytes]] = attrs.Factory(list)
    final_status: str | None = None

    def __bool__(self) -> bool:
        return bool(
            self.events or self.sends or self.timers or self.cancel_timers or self.appends
            or self.final_status
        )  # fmt: skip


class _Host(Protocol):
    """What the supervisor gives a context (implemented by the actor's cell)."""

    address: str
    effects: Effects

    def wall_time(self) -> float: ...
    def create_kind(self, kind: str) -> str | None: ...
    @property
    def settings(self) -> Mapping[str, Any]: ...
    def publish_ephemeral(self, type: str, data: Any) -> None: ...
    def start_activity(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str) -> None: ...
    async def checkpoint(self) -> None: ...
    async def read_log(self, log: str, start: int, limit: int) -> list[bytes]: ...
    async def log_length(self, log: str) -> int: ...


class Context:
    """The actor's handle on the runtime.

    Nothing done through a context is visible outside the actor until the
    commit that follows (the end of `handle`, or `checkpoint`): events,
    sends, timers and log appends are all part of that one atomic commit,
    and announced only after it is durable. Ephemeral events are the one
    exception: they are published at once and never stored.
    """

    def __init__(self, host: _Host) -> None:
        self._host = host

    @property
    def address(self) -> str:
        return self._host.address

    @property
    def settings(self) -> Mapping[str, Any]:
        """The runtime's settings (``data_dir`` and what the host passed to
        `open_runtime`), under this kind's own (`Actor.with_settings`)."""
        return self._host.settings

    def now(self) -> float:
        """Wall time (seconds since the epoch) as the runtime's clock reads it."""
        return self._host.wall_time()

    def emit(self, type: str, data: Any = None, *, ephemeral: bool = False) -> None:
        """Announce an event to subscribers; durable (with a seq) unless ``ephemeral``."""
        if ephemeral:
            self._host.publish_ephemeral(type, data)
            return
        body = encode_body(data, what=f"the data of event {type!r} from {self.address!r}")
        self._host.effects.events.append(NewEvent(type, body, self.now()))

    def send(
        self, to: str, type: str, body: Any = None, *, key: str | None = None,
        drop_if_stopped: bool = False,
    ) -> None:  # fmt: skip
        """Send a message as part of this actor's next commit.

        A recipient that takes no more messages (stopped, failed, settled)
        gets it set aside in the dead letters; with ``drop_if_stopped`` it is
        dropped instead, for notices that matter only while the recipient
        lives (a job's end to an owner that has ended).
        """
        kind, _ = parse_address(to)
        create = self._host.create_kind(kind)
        data = encode_body(body, what=f"the body of {type!r} to {to!r}")
        self._host.effects.sends.append(
            Enqueue(to, type, data, self.address, key, create, drop_if_stopped)
        )

    def schedule(
        self,
        when: float | timedelta | datetime,
        type: str,
        body: Any = None,
        *,
        key: str | None = None,
    ) -> None:
        """Send ``type`` to this actor at a time: a delay in seconds or a
        `timedelta`, or an aware `datetime`. Durable: it fires after a
        restart, at once if it fell due while no runtime ran. A ``key``
        replaces an earlier timer with the same key and allows `cancel_timer`.
        """
        if isinstance(when, datetime):
            if when.tzinfo is None:
                raise BadMessage(f"timer {type!r} needs an aware datetime (with a timezone)")
            due = when.timestamp()
        elif isinstance(when, timedelta):
            due = self.now() + when.total_seconds()
        else:
            due = self.now() + float(when)
        data = encode_body(body, what=f"the body of timer {type!r}")
        self._host.effects.timers.append(NewTimer(due, type, data, key))

    def cancel_timer(self, key: str) -> None:
        self._host.effects.cancel_timers.append(key)

    def append(self, log: str, item: Any) -> None:
        """Append ``item`` to this actor's log ``log``: long, append-only data
        (a conversation, output) kept out of the snapshot, so a commit's cost
        does not grow with the actor's age."""
        self._host.effects.appends.append((log, dumps(item)))

    async def read_log(self, log: str, start: int = 0, limit: int = 1000) -> list[Any]:
        """Committed items of ``log`` from index ``start``."""
        return [loads(b) for b in await self._host.read_log(log, start, limit)]

    async def log_length(self, log: str) -> int:
        """How many items ``log`` holds, committed."""
        return await self._host.log_length(log)

    def stop(self, status: str = "stopped") -> None:
        """End this actor after the next commit, with ``status`` (e.g. a task's terminal)."""
        self._host.effects.final_status = status

    def start_activity(
        self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str | None = None
    ) -> None:
        """Run ``fn(*args)`` in the actor's nursery, beside its mailbox.

        An exception from an activity crashes the actor (it is restarted from
        its last commit and `Actor.on_start` resumes the work).
        """
        self._host.start_activity(fn, *args, name=name or str(getattr(fn, "__name__", "activity")))

    async def checkpoint(self) -> None:
        """Commit the state and everything emitted, sent and scheduled so far.

        In a handler it commits without advancing the cursor (the message is
        delivered again after a crash); in an activity it records progress.
        Returns once the commit is durable; not cancellable once under way.
        """
        await self._host.checkpoint()
