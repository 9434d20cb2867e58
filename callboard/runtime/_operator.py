"""What an operator asks of the runtime: the approvals waiting, deleting an
ended actor, and waiting for a message to be handled (and how it came out).

Functions over the runtime's `Directory`, as `_views` reads are; the
`Runtime` facade offers each as a method. Everything here reads the store
(what was committed, so what was announced), never an actor's memory.
"""

from __future__ import annotations

import builtins
import logging

from ..actors import Actor
from ..codec import loads
from ..errors import ActorStopped, BadRequest, CallboardError, RuntimeClosed, UnknownActor
from ..store import ActorRecord
from ..supervisor import restore
from ..views import MessageOutcome, PendingApproval
from . import _views
from ._directory import Directory

__all__ = ["approvals", "delete", "wait_handled", "wait_outcome"]

log = logging.getLogger("callboard.runtime")

_PAGE = 1000  # actors read at once while looking for approvals
_EVENT_PAGE = 512  # events read at once while looking for a rejection
_DELETE_BATCH = 2000  # rows one delete op removes at most (the writer is shared)

REJECTED = "message.rejected"
"""The event a kind emits for a message it cannot apply (``data.seq`` names it)."""


def _asks(cls: type[Actor] | None) -> bool:
    """Whether actors of ``cls`` can hold approvals (the kind writes the hook)."""
    return cls is not None and cls.pending_approvals is not Actor.pending_approvals


async def approvals(cells: Directory, address: str | None) -> builtins.list[PendingApproval]:
    """The tool calls waiting for a person's answer, of ``address`` or of every
    actor that has not ended, in address order and the order they were asked."""
    if address is not None:
        cls = cells.kind_of(address)
        record = await cells.store.actor(address)
        if record is None:
            raise UnknownActor(f"there is no actor at {address!r}")
        return _pending(cls, record) if _asks(cls) else []
    found: list[PendingApproval] = []
    for kind, cls in sorted(cells.kinds.items()):
        if not _asks(cls):
            continue
        after: str | None = None
        while True:
            records = await cells.store.actors(kind, after=after, limit=_PAGE)
            for record in records:
                try:
                    found.extend(_pending(cls, record))
                except CallboardError as exc:
                    # One snapshot that no longer restores must not hide the others.
                    log.warning("approvals: skipped %s: %s", record.address, exc)
            if len(records) < _PAGE:
                break
            after = records[-1].address
    return found


def _pending(cls: type[Actor], record: ActorRecord) -> builtins.list[PendingApproval]:
    # Waiting for an answer is unfinished work, so only a busy actor is restored.
    if record.final or not record.busy or record.state is None:
        return []
    return restore(cls, record.address, record).pending_approvals()


async def delete(cells: Directory, address: str) -> None:
    """Remove the ended actor at ``address`` with its events, logs, keys and
    timers (its dead letters stay, as retention leaves them); its name is free
    again. Raises `BadRequest` naming its status if it has not ended."""
    cells.kind_of(address)
    while True:
        cells.check_open()
        deletion = await cells.store.delete(address, batch=_DELETE_BATCH)
        if deletion.status is None:
            raise UnknownActor(f"there is no actor at {address!r}")
        if not deletion.final:
            # As `inspect` shows it: "active" while in memory here, not the stored "idle".
            status = _views.shown_status(cells, address, deletion.status, False)
            raise BadRequest(
                f"{address!r} is {status}: only an actor that has ended (stopped, "
                "failed, or a task's or job's terminal) can be deleted; stop it first"
            )
        if deletion.done:
            return


async def wait_handled(cells: Directory, address: str, seq: int) -> None:
    """Wait until ``address`` has committed the handling of message ``seq``;
    `ActorStopped` if it ended first, `RuntimeClosed` if the runtime did."""
    while True:
        # Waiting before the read: a commit while a store's read yields (a
        # networked one's does) must still wake it. An actor that ends wakes it too.
        done = cells.await_cursor(address, seq) if cells.open else None
        try:
            record = await cells.store.actor(address)
            if record is not None and record.cursor >= seq:
                return
            if record is not None and record.final:
                raise ActorStopped(
                    f"{address} ended ({record.status}) before it handled message {seq}"
                )
            cells.check_open()
            assert done is not None
            await done.wait()
            if not cells.open:
                raise RuntimeClosed(f"the runtime closed before {address} handled message {seq}")
        finally:
            if done is not None:
                cells.stop_waiting(address, done)


async def wait_outcome(cells: Directory, address: str, seq: int, after: int) -> MessageOutcome:
    """Wait until ``address`` has handled message ``seq`` (or ended first) and say
    how it came out; ``after`` is the actor's event head before the send, where
    a rejection may start. Cancel to stop waiting: nothing is changed."""
    try:
        await wait_handled(cells, address, seq)
    except ActorStopped as ended:
        return MessageOutcome("not_handled", str(ended))
    for letter in await cells.store.dead_letters(address):
        if letter.seq == seq:
            error = loads(letter.error)
            said = error.get("message") if isinstance(error, dict) else None
            return MessageOutcome(
                "dead_lettered",
                f"message {seq} to {address} went to the dead letters (id {letter.id}) after "
                f"{letter.attempts} attempts: {said or error}",
            )
    reason = await _rejection(cells, address, seq, after)
    return MessageOutcome("handled") if reason is None else MessageOutcome("rejected", reason)


async def _rejection(cells: Directory, address: str, seq: int, after: int) -> str | None:
    """The reason of the ``message.rejected`` event for ``seq`` after event ``after``."""
    record = await cells.store.actor(address)
    head = record.event_head if record is not None else after
    while after < head:
        page = await cells.store.events(address, after, _EVENT_PAGE)
        if not page:
            return None
        for event in page:
            if event.type == REJECTED:
                data = loads(event.data)
                if isinstance(data, dict) and data.get("seq") == seq:
                    reason = data.get("reason")
                    return str(reason) if reason is not None else "rejected"
        after = page[-1].seq
    return None
