"""``tail``: an actor's events, rendered for people (or raw, ``--json``), until it ends.

The command line and the REPL share it. Without ``--json`` the events go
through the renderer ``task run`` uses (`_render.Printer`): a turn's text as
it streams, one line per tool call, a mark where a turn resumed after a
restart, and the one-line form for every other event. The tail ends (exit
0) when the actor does: with ``actor.stopped`` or ``actor.failed``, or at
once for an actor that had ended before (after replaying what ``--after``
asked for). A pattern (``KIND/*``, ``*``) never ends by itself.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Protocol

from ..client import Client
from ..errors import UnknownActor
from ..mailbox import Event
from ..views import ActorView
from ._render import ENDINGS, LIVE_STATUSES, LineWriter, Printer, event_json, format_event

__all__ = ["Lines", "tail"]


class Lines(Protocol):
    """Where a verb writes (`_verbs.Output`): whole lines, or raw text if ``raw`` is set."""

    @property
    def json(self) -> bool: ...

    @property
    def raw(self) -> Callable[[str], None] | None: ...

    def write(self, line: str) -> None: ...

    def emit(self, human: str, data: Any) -> None: ...


async def tail(
    client: Client,
    address: str,
    after: int | None,
    out: Lines,
    *,
    subscribed: Callable[[], None] | None = None,
) -> None:
    """Show ``address``'s events until it ends (see the module docstring)."""
    pattern = address == "*" or address.endswith("/*")
    lines = LineWriter(out.write) if out.raw is None else None
    write = out.raw if out.raw is not None else lines
    assert write is not None
    printer = Printer(write, everything=True, with_actor=pattern)

    def show(event: Event) -> None:
        if out.json:
            out.emit(format_event(event, with_actor=pattern), event_json(event))
        else:
            printer.show(event)

    view = None if pattern else await _view(client, address)
    ended = view is not None and view.status not in LIVE_STATUSES
    # Live only (no --after) still subscribes from the last stored event, so
    # that a healed connection replays what it missed (the actor's end).
    start = view.head if after is None and view is not None and not ended else after
    try:
        async with client.subscribe(address, after=start) as events:
            if subscribed is not None:
                subscribed()
            if view is not None and ended and (after is None or after >= view.head):
                _note(f"{address} has ended; nothing more will come")
                return
            last = view.head if view is not None and ended else None
            async for event in events:
                show(event)
                if pattern:
                    continue
                if event.type in ENDINGS or (
                    last is not None and event.seq is not None and event.seq >= last
                ):
                    return
    finally:
        printer.close()
        if lines is not None:
            lines.flush()


async def _view(client: Client, address: str) -> ActorView | None:
    """The actor as last committed; None for one not there yet (a virtual kind's)."""
    try:
        return await client.inspect(address)
    except UnknownActor:
        return None


def _note(message: str) -> None:
    print(f"callboard: {message}", file=sys.stderr, flush=True)
