"""Tiny actor kinds for the client, CLI and REPL tests.

Loaded in-process by the tests and by ``callboard serve --kind
tests.client_kinds:Counter`` in a subprocess (cwd is the repository root).
"""

from __future__ import annotations

from typing import Any

import attrs

from callboard import Actor, Context, Message


@attrs.define
class CounterState:
    total: int = 0


class Counter(Actor):
    """A virtual counter: ``add`` (body ``{"n": N}``, default 1) emits ``counted``
    with the new total; ``burst`` (body ``{"n": N}``) emits N ``tick`` events in
    one commit, more than a small subscriber buffer holds."""

    kind = "counter"
    virtual = True
    state_type = CounterState

    async def handle(self, ctx: Context, message: Message) -> None:
        body: dict[str, Any] = message.body if isinstance(message.body, dict) else {}
        if message.type == "add":
            self.state.total += int(body.get("n", 1))
            ctx.emit("counted", {"total": self.state.total})
        elif message.type == "burst":
            for i in range(int(body["n"])):
                ctx.emit("tick", {"i": i})


class Box(Actor):
    """A spawned (not virtual) actor whose spec is a free JSON object; ``put``
    (body ``{"item": X}``) appends to its state and emits ``put``."""

    kind = "box"

    async def handle(self, ctx: Context, message: Message) -> None:
        items = self.state.setdefault("items", [])
        items.append(message.body.get("item") if isinstance(message.body, dict) else None)
        ctx.emit("put", {"count": len(items)})
