"""An owner for job tests: records every message it gets, in order."""

from __future__ import annotations

import callboard


class Inbox(callboard.Actor):
    kind = "inbox"
    virtual = True

    async def handle(self, ctx, message):
        self.state.setdefault("got", []).append({"type": message.type, "body": message.body})
        ctx.emit("got", {"type": message.type})
