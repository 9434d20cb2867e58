"""Small actor kinds for the gateway tests; `callboard serve --kind gateway_kinds:Counter`
loads them too (with ``tests/`` on ``PYTHONPATH``)."""

from __future__ import annotations

from typing import Any

from callboard import Actor, Context, Message, Supervision


class Counter(Actor):
    """Virtual (no spawn needed). ``add`` counts and emits ``counted``; ``burst``
    emits ``n`` events in one commit; ``stream`` emits ephemeral events;
    ``grow`` makes the state ``size`` characters big."""

    kind = "counter"
    virtual = True

    async def handle(self, ctx: Context, message: Message) -> None:
        body: Any = message.body or {}
        if message.type == "add":
            self.state["count"] = self.state.get("count", 0) + body.get("n", 1)
            ctx.emit("counted", {"count": self.state["count"]})
        elif message.type == "burst":
            for i in range(body["n"]):
                ctx.emit("burst", {"i": i, "pad": "x" * body.get("size", 0)})
        elif message.type == "stream":
            for text in body["texts"]:
                ctx.emit("text.delta", {"text": text}, ephemeral=True)
            ctx.emit("text.done", {"count": len(body["texts"])})
        elif message.type == "grow":
            self.state["blob"] = "x" * body["size"]


class Keeper(Actor):
    """Spawned with a spec (not virtual): ``note`` emits ``noted`` with the body."""

    kind = "keeper"

    async def handle(self, ctx: Context, message: Message) -> None:
        ctx.emit("noted", message.body)


class Digger(Actor):
    """Virtual. ``dig`` emits an ephemeral ``dig.deep`` whose data the handler
    nests ``depth`` arrays deep (deeper than any body may be: ephemeral data
    is not encoded before it is published), then a durable ``dug``."""

    kind = "digger"
    virtual = True

    async def handle(self, ctx: Context, message: Message) -> None:
        deep: Any = "bottom"
        for _ in range(message.body["depth"]):
            deep = [deep]
        ctx.emit("dig.deep", deep, ephemeral=True)
        ctx.emit("dug", {"depth": message.body["depth"]})


class Broken(Actor):
    """A kind with a bug: its initial state cannot be built."""

    kind = "broken"
    supervision = Supervision(restart="temporary")

    @classmethod
    def initial_state(cls, spec: Any) -> Any:
        raise RuntimeError("Broken.initial_state has a bug")


KINDS = (Counter, Keeper, Digger, Broken)
