"""Actor kinds the core tests run, in this process and in crashing child processes."""

from __future__ import annotations

import os

import attrs

import callboard


@attrs.define
class Tally:
    total: int = 0
    seen: list[str] = attrs.Factory(list)


class Counter(callboard.Actor):
    """Adds ``n`` and remembers every message id it applied, in order."""

    kind = "counter"
    state_type = Tally
    virtual = True
    # The crash tests SIGKILL the process at random; a message that happened to be
    # in flight at several of those kills is not a poison message. (Brittle is.)
    supervision = callboard.Supervision(max_attempts=1_000_000)

    async def handle(self, ctx: callboard.Context, message: callboard.Message) -> None:
        self.state.total += message.body.get("n", 1)
        self.state.seen.append(message.body["id"])
        ctx.emit("counted", {"total": self.state.total, "id": message.body["id"]})


@attrs.define
class Fragile:
    handled: list[str] = attrs.Factory(list)


class Brittle(callboard.Actor):
    """Crashes on ``boom`` (after changing its state), dies with the process on ``die``."""

    kind = "brittle"
    state_type = Fragile
    virtual = True
    supervision = callboard.Supervision(max_attempts=3, intensity=100, backoff_initial=0.01)

    async def handle(self, ctx: callboard.Context, message: callboard.Message) -> None:
        self.state.handled.append(f"{message.type}:{message.body}")
        ctx.emit("handled", {"type": message.type})
        if message.type == "boom":
            raise RuntimeError(f"boom on attempt {message.attempt}")
        if message.type == "die":
            os._exit(17)


class Alarm(callboard.Actor):
    """``set`` schedules a ``ring`` after ``delay`` seconds; ``ring`` is recorded."""

    kind = "alarm"
    virtual = True

    async def handle(self, ctx, message):
        if message.type == "set":
            ctx.schedule(message.body["delay"], "ring", {"label": message.body["label"]})
        else:
            self.state.setdefault("rang", []).append(message.body["label"])
            ctx.emit("rang", message.body)
