"""`Subscriptions`: one connection's event subscriptions, forwarded into its outbox.

Each subscription is a task that reads the runtime's hub and moves live
events into the connection's `Outbox` with ``put_nowait``, which never
waits. When the outbox (less its reserve) is full, or the hub's own buffer
overflowed, the subscription ends with ``lagged``, which names the last seq
delivered so that ``subscribe`` with that ``after`` gives exactly the rest.
``lagged`` goes in the reserve, which has room for one per subscription;
should even that overflow, the connection is dropped.

Stored events (a replay, ``after``) are already durable and read a page at
a time, so they need not lag: they go in with ``put``, which waits for
room, and the hub reads no page while the outbox is full (``pace``). The
client paces its replay; the connection holds at most its outbox (plus the
one frame that went over) and one page per replaying subscription.

A live-only subscription to one actor is registered as a resumption from
the actor's head, read with no checkpoint before the registration: its
``lagged.after`` is then always a seq, and nothing committed after ``head``
can slip between the two. Patterns are live only and cannot be resumed:
their ``head`` and ``lagged.after`` are null.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import attrs
import trio

from ..errors import Lagged, Pruned, UnknownActor
from ..runtime import Runtime, Subscription
from . import _frames as f
from ._config import GatewayConfig
from ._outbox import Outbox

__all__ = ["Counters", "Subscriptions"]

log = logging.getLogger("callboard.gateway")


@attrs.define
class Counters:
    """Running totals shared by a gateway's connections (read by `statistics`)."""

    requests: int = 0
    sends_accepted: int = 0
    lagged: int = 0
    dropped: int = 0


@attrs.define
class _Sub:
    actor: str
    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    done: trio.Event = attrs.Factory(trio.Event)
    open: bool = True


class Subscriptions:
    """The open subscriptions of one connection, by the ``sub`` id given to the client."""

    def __init__(
        self,
        runtime: Runtime,
        config: GatewayConfig,
        outbox: Outbox,
        counters: Counters,
        encoder: f.EventEncoder,
        *,
        drop: Callable[[str], Awaitable[None]],
        remote: str,
    ) -> None:
        self._rt = runtime
        self._cfg = config
        self._outbox = outbox
        self._counters = counters
        self._encoder = encoder
        self._drop = drop
        self._remote = remote
        self._subs: dict[str, _Sub] = {}
        self._next = 0

    def __len__(self) -> int:
        return len(self._subs)

    async def subscribe(self, nursery: trio.Nursery, request: f.Subscribe) -> str | None:
        """Start forwarding; None once its ``ok`` is queued, else the error frame."""
        if len(self._subs) >= self._cfg.max_subscriptions:
            message = (
                f"this connection has {len(self._subs)} subscriptions, the most allowed; "
                "unsubscribe from one first"
            )
            return f.encode_error(request.id, "rate_limited", message)
        if not f.is_pattern(request.actor):
            kind = request.actor.split("/", 1)[0]
            self._rt.check_kind(kind)
            if not self._rt.kinds[kind].virtual and not await self._rt.has_actor(request.actor):
                raise UnknownActor(f"there is no actor at {request.actor!r}; spawn it first")
        try:
            await nursery.start(self._forward, request)
        except Pruned as exc:  # docs/protocol.md: ``first`` is the first seq still held
            pruned = {"code": exc.code, "message": str(exc), "actor": exc.actor, "first": exc.first}
            return f.encode({"op": "error", "id": request.id, **pruned})
        return None  # the forwarder queued the ok, so that it precedes every event

    async def unsubscribe(self, sub_id: str) -> None:
        """End ``sub_id`` and wait until it has left the hub. Idempotent.

        No event of it is queued from the moment this is called.
        """
        sub = self._end(sub_id)
        if sub is not None:
            await sub.done.wait()
        else:
            await trio.lowlevel.checkpoint()

    def close(self) -> None:
        """End every subscription now (the connection is closing)."""
        for sub_id in list(self._subs):
            self._end(sub_id)

    def _end(self, sub_id: str) -> _Sub | None:
        sub = self._subs.pop(sub_id, None)
        if sub is not None:
            sub.open = False
            sub.scope.cancel()
        return sub

    async def _forward(self, request: f.Subscribe, task_status: trio.TaskStatus[None]) -> None:
        self._next += 1
        sub_id = f"k{self._next}"
        pattern = f.is_pattern(request.actor)
        head = None if pattern else await self._rt.head(request.actor)
        after = request.after if request.after is not None else head
        handle = _Sub(request.actor)
        try:
            with handle.scope:
                # A live-only one goes to the runtime as such (it starts at the
                # same head, read again with no checkpoint between: the store's
                # one-row reads do not yield): it has no stored events to read,
                # so it does not wait for an empty page.
                async with self._rt.subscribe(
                    request.actor, request.after, on_lag="raise",
                    buffer=self._cfg.subscriber_buffer, pace=self._outbox.wait_room,
                ) as sub:  # fmt: skip
                    self._subs[sub_id] = handle
                    await self._outbox.put(f.encode_ok(request.id, sub=sub_id, head=head))
                    task_status.started()
                    await self._pump(sub_id, handle, sub, after)
        finally:
            handle.open = False
            if self._subs.get(sub_id) is handle:
                del self._subs[sub_id]
            handle.done.set()

    async def _pump(self, sub_id: str, handle: _Sub, sub: Subscription, last: int | None) -> None:
        """Move events into the outbox until the subscription ends or lags."""
        pattern = f.is_pattern(handle.actor)
        try:
            async for event in sub:
                if not handle.open:
                    return
                frame = self._encoder.frame(sub_id, event, shared=not sub.replayed)
                if sub.replayed:
                    await self._outbox.put(frame)
                    if self._outbox.closing:
                        return  # nobody will read the rest
                elif not self._outbox.put_nowait(frame):
                    break
                if event.seq is not None and not pattern:
                    last = event.seq
            else:
                return  # the hub closed the subscription (the runtime is closing)
        except (Lagged, Pruned):
            pass  # a replay that retention overtook: resubscribing answers pruned
        if handle.open:
            await self._lagged(sub_id, handle, None if pattern else last)

    async def _lagged(self, sub_id: str, handle: _Sub, after: int | None) -> None:
        handle.open = False
        self._subs.pop(sub_id, None)
        self._counters.lagged += 1
        log.info(
            "subscription %s of %s to %s fell behind; told to resume after %s",
            sub_id, self._remote, handle.actor, after, extra={"actor": handle.actor},
        )  # fmt: skip
        if not self._outbox.put_control_nowait(f.encode_lagged(sub_id, handle.actor, after)):
            await self._drop("its send queue is full, even the reserve for control frames")
