"""The actor kind of the several-nodes tests: `callboard serve --kind pg_node_kinds:Ledger`.

A ledger records every message it handles in its ``handled`` log, in the
commit that handles it, naming the node that handled it (``LEDGER_NODE`` in
the server's environment): the tests read that log from the database to
count what was applied, and by whom.
"""

from __future__ import annotations

import os
from typing import Any

import trio

from callboard import Actor, Context, Message


class Ledger(Actor):
    """Virtual. ``add`` (``{"sender": S, "n": N}``) appends ``[node, S, N]`` to
    its log and emits ``handled`` with the same; ``hold`` does the same after
    ``LEDGER_HOLD_SECONDS`` (if that is set), announcing ``holding`` first."""

    kind = "ledger"
    virtual = True

    async def handle(self, ctx: Context, message: Message) -> None:
        body: Any = message.body or {}
        node = os.environ.get("LEDGER_NODE", "?")
        if message.type == "hold" and os.environ.get("LEDGER_HOLD_SECONDS"):
            ctx.emit("holding", {"node": node}, ephemeral=True)
            await trio.sleep(float(os.environ["LEDGER_HOLD_SECONDS"]))
        entry = [node, body.get("sender"), body.get("n")]
        self.state["handled"] = self.state.get("handled", 0) + 1
        ctx.append("handled", entry)
        ctx.emit("handled", entry)
