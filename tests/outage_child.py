"""A runtime with one session whose model is down, in a child process the tests SIGKILL.

Usage: ``outage_child.py DATA SETTINGS_JSON SPEC_JSON PROMPT``. Opens the
runtime on DATA with the agent's kinds bound to the settings (small outage
backoffs), spawns ``session/s1`` with the spec, sends PROMPT, and prints
``event TYPE`` for each durable event of the session (flushed), until it is
killed.
"""

from __future__ import annotations

import json
import sys

import trio

import callboard
from callboard.agent import builtin_kinds


async def main(data: str, settings: str, spec: str, prompt: str) -> None:
    kinds = builtin_kinds(json.loads(settings))
    async with callboard.open_runtime(data, kinds=kinds) as rt:
        await rt.spawn("session", json.loads(spec), name="s1")
        async with rt.subscribe("session/s1", after=0) as sub:
            await rt.send("session/s1", "prompt", prompt)
            async for event in sub:
                if event.seq is not None:
                    print(f"event {event.type}", flush=True)


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:5])
