"""An actor kind for the console's tests: `callboard serve --kind console_kinds:Fragile`."""

from __future__ import annotations

from typing import Any

from callboard import Actor, Context, Message, Supervision


class Fragile(Actor):
    """Virtual. ``work`` fails until a ``fix`` came (so a ``work`` sent first ends
    in the dead letters, and re-queued after the ``fix`` it is handled: ``worked``)."""

    kind = "fragile"
    virtual = True
    supervision = Supervision(max_attempts=1, backoff_initial=0.01, backoff_max=0.05)

    async def handle(self, ctx: Context, message: Message) -> None:
        body: Any = message.body or {}
        if message.type == "fix":
            self.state["fixed"] = True
            ctx.emit("fixed", {})
        elif message.type == "work":
            if not self.state.get("fixed"):
                raise RuntimeError(f"cannot do {body.get('job', 'the work')!r} before a fix")
            ctx.emit("worked", body)
