"""A runtime in a child process for the fault tests: keyed sends, their outcomes.

``store_child.py send DATA COUNT [halt]`` sends COUNT keyed messages to a
few counters, eight at a time, and prints one JSON line per outcome:
``{"key": K, "outcome": "acked" | "failed" | "unknown"}``. An unknown
outcome is retried with the same key, as the error says to, until the
store answers; the retry's answer is printed too. Then ``done``, and the
child waits to be killed (a fault test ends it with SIGKILL, the worst end).
With ``halt``, the sender that meets the first fault kills the process with
SIGKILL at once, before a later write can cover what the fault left in the
WAL (it would be written at the same place). With ``pad=N`` every body
carries N bytes more (to fill a disk sooner). With ``commit=inline`` every
COMMIT is made on the trio thread, with ``commit=thread`` every one in the
writer's thread (the store picks per batch: `CommitPlace`): strace counts
the calls of each thread apart, so a test that fails the Nth call of one
makes one thread commit, once each way. Other children import `send` and
pass ``then``, what to do after ``done`` instead of waiting.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).parent.parent))

import core_kinds

import callboard
from callboard.store._commit_place import CommitPlace

ACTORS = 4
IN_FLIGHT = 8


def _say(key: str, outcome: str) -> None:
    # One write(2) per line: the power-loss VFS prints from the writer's thread.
    os.write(1, (json.dumps({"key": key, "outcome": outcome}) + "\n").encode())


async def send(
    data: str,
    count: int,
    halt: bool,
    *,
    pad: int = 0,
    then: Callable[[], Awaitable[object]] = trio.sleep_forever,
) -> None:
    print(json.dumps({"pid": os.getpid()}), flush=True)  # under strace: the one to kill
    async with callboard.open_runtime(data, kinds=[core_kinds.Counter]) as rt:
        slots = trio.Semaphore(IN_FLIGHT)

        async def one(n: int) -> None:
            key = f"m{n}"
            try:
                while True:
                    try:
                        body = {"id": key, "pad": "x" * pad} if pad else {"id": key}
                        await rt.send(f"counter/a{n % ACTORS}", "add", body, key=key)
                    except callboard.UnknownOutcome:
                        _say(key, "unknown")
                        if halt:
                            os.kill(os.getpid(), signal.SIGKILL)
                        continue  # retry with the same key: the answer tells
                    except callboard.StoreUnavailable:
                        _say(key, "failed")
                        if halt:
                            os.kill(os.getpid(), signal.SIGKILL)
                        return
                    _say(key, "acked")
                    return
            finally:
                slots.release()

        async with trio.open_nursery() as nursery:
            for n in range(count):
                await slots.acquire()
                nursery.start_soon(one, n)
        print("done", flush=True)
        await then()


def commit_at(place: str) -> None:
    """Make every COMMIT ``inline`` or in the writer's ``thread`` (see the module)."""
    assert place in ("inline", "thread"), place
    CommitPlace.inline = lambda self, operations: place == "inline"  # type: ignore[method-assign]


if __name__ == "__main__":
    options = sys.argv[4:]
    for option in options:
        if option.startswith("commit="):
            commit_at(option.removeprefix("commit="))
    pads = [int(o.removeprefix("pad=")) for o in options if o.startswith("pad=")]
    trio.run(partial(send, pad=sum(pads)), sys.argv[2], int(sys.argv[3]), "halt" in options)
