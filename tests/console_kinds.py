"""Actor kinds for the console's tests: `callboard serve --kind console_kinds:Fragile`
(and ``console_kinds:Ledger``)."""

from __future__ import annotations

from typing import Any

import attrs

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


@attrs.define
class Books:
    total: int = 0
    entries: list[str] = attrs.Factory(list)


class Ledger(Actor):
    """Virtual, with a typed state (so a replaced state that does not fit is refused,
    naming the field). ``add`` adds ``n`` and notes ``note``: ``added``."""

    kind = "ledger"
    virtual = True
    state_type = Books

    async def handle(self, ctx: Context, message: Message) -> None:
        body: Any = message.body or {}
        if message.type == "add":
            self.state.total += body.get("n", 1)
            self.state.entries.append(body.get("note", ""))
            ctx.emit("added", {"total": self.state.total})
