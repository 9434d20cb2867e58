"""A runtime in a child process, for tests that kill it.

Modes:
  send DATA CYCLE SENDERS ACTORS  senders send keyed messages until killed,
                                  printing "ack SENDER N SEQ" after each ack
  drain DATA                      open the runtime (recovering), wait until
                                  every actor handled its mailbox, print "idle"
  poison DATA                     send "die" then "ok" to brittle/p, then drain

The store is SQLite in DATA, or the PostgreSQL database named by
``CALLBOARD_TEST_STORE`` (`Child.start`'s ``store``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).parent))

import core_kinds

import callboard

KINDS = [core_kinds.Counter, core_kinds.Brittle]
STORE = os.environ.get("CALLBOARD_TEST_STORE") or None


async def send(data: str, cycle: str, senders: int, actors: int) -> None:
    async with callboard.open_runtime(data, kinds=KINDS, store=STORE) as rt:

        async def sender(i: int) -> None:
            n = 0
            while True:
                msg_id = f"{cycle}-s{i}-{n}"
                ack = await rt.send(
                    f"counter/a{(i + n) % actors}", "add", {"id": msg_id}, key=msg_id
                )
                print(f"ack {cycle}-s{i} {n} {ack.seq}", flush=True)
                n += 1

        print("ready", flush=True)
        async with trio.open_nursery() as nursery:
            for i in range(senders):
                nursery.start_soon(sender, i)


async def drain(rt: callboard.Runtime) -> None:
    for info in await rt.list():
        view = await rt.inspect(info.actor)
        await rt.wait_handled(info.actor, view.cursor + view.mailbox)


async def drain_only(data: str) -> None:
    async with callboard.open_runtime(data, kinds=KINDS, store=STORE) as rt:
        await drain(rt)
        print("idle", flush=True)


async def poison(data: str) -> None:
    async with callboard.open_runtime(data, kinds=KINDS, store=STORE) as rt:
        await rt.send("brittle/p", "die", {"n": 1}, key="die-1")
        await rt.send("brittle/p", "ok", {"n": 2}, key="ok-2")
        await drain(rt)
        print("idle", flush=True)


def main() -> None:
    mode, data, *rest = sys.argv[1:]
    if mode == "send":
        trio.run(send, data, rest[0], int(rest[1]), int(rest[2]))
    elif mode == "drain":
        trio.run(drain_only, data)
    elif mode == "poison":
        trio.run(poison, data)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
