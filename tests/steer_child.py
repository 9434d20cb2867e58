"""A runtime with one session in a child process that steers its turn, for SIGKILL tests.

Usage: ``steer_child.py DATA SPEC_JSON PROMPT STEER``. Opens the runtime on
DATA, spawns ``session/s1``, sends PROMPT, and once the turn has started
sends STEER as a prompt with ``"mode": "steer"``. Prints ``event TYPE`` for
each durable event of the session (flushed), until it is killed.
"""

from __future__ import annotations

import json
import sys

import trio

import callboard
from callboard.agent import builtin_kinds


async def main(data: str, spec: str, prompt: str, steer: str) -> None:
    async with callboard.open_runtime(data, kinds=builtin_kinds()) as rt:
        await rt.spawn("session", json.loads(spec), name="s1")
        async with rt.subscribe("session/s1", after=0) as sub:
            await rt.send("session/s1", "prompt", prompt)
            async for event in sub:
                if event.seq is not None:
                    print(f"event {event.type}", flush=True)
                    if event.type == "turn.started":
                        await rt.send("session/s1", "prompt", {"text": steer, "mode": "steer"})


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:5])
