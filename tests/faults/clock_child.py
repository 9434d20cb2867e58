"""A runtime child for the wall-clock test: durable timers and keyed sends, on command.

``clock_child.py DATA`` prints its pid, then reads one JSON command a line
from stdin and prints what came of it:

- ``{"arm": [[ID, DELAY], ...]}``: ``alarm/a`` schedules a ``ring`` DELAY
  seconds after the wall clock's now; ``{"armed": ID}`` each, once committed.
- ``{"send": [KEY, ...]}``: a keyed ``add`` to ``counter/c`` each;
  ``{"key": KEY, "outcome": "acked", "duplicate": BOOL}``.

Whenever a timer rings, the alarm prints ``{"rang": ID, "due": DUE, "at": AT}``
(AT: the wall clock when it fired). The test moves the wall clock with
libfaketime and ends the child with SIGKILL.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

import attrs
import trio

sys.path.insert(0, str(Path(__file__).parent.parent))

import core_kinds

import callboard


def _say(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


@attrs.define
class Alarms:
    rang: list[tuple[str, float, float]] = attrs.Factory(list)  # (id, due, at) as they rang


class Alarm(callboard.Actor):
    """``arm`` schedules a ``ring`` at a due time; a ``ring`` is recorded and printed."""

    kind = "alarm"
    state_type = Alarms
    virtual = True

    async def handle(self, ctx: callboard.Context, message: callboard.Message) -> None:
        body = message.body
        if message.type == "arm":
            due = ctx.now() + body["delay"]
            when = datetime.fromtimestamp(due, UTC)
            ctx.schedule(when, "ring", {"id": body["id"], "due": due})
        elif message.type == "ring":
            self.state.rang.append((body["id"], body["due"], message.at))
            _say(rang=body["id"], due=body["due"], at=message.at)


KINDS = [Alarm, core_kinds.Counter]


async def main(data: str) -> None:
    _say(pid=os.getpid())
    async with callboard.open_runtime(data, kinds=KINDS) as rt:
        commands = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
        pending = b""
        async for chunk in commands:
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                command = json.loads(line)
                for timer, delay in command.get("arm", []):
                    ack = await rt.send("alarm/a", "arm", {"id": timer, "delay": delay})
                    await rt.wait_handled("alarm/a", ack.seq)  # scheduled and committed
                    _say(armed=timer)
                for key in command.get("send", []):
                    ack = await rt.send("counter/c", "add", {"id": key}, key=key)
                    _say(key=key, outcome="acked", duplicate=ack.duplicate)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
