"""The first life of a task, in a child process that the tests SIGKILL.

Usage: ``task_child.py SETUP_JSON`` with ``data``, ``workspace``, ``model_url``, ``provider``,
``prompt``, and optionally ``message`` and ``spec`` (more `RunSpec` fields, as JSON).
Opens a runtime on ``data``, spawns the task (and sends the message, waiting
until the task has queued it), prints ``SPAWNED <handle> <message id>``
(flushed), then waits for the task until it is killed, wherever its turn stands.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta

import trio

import callboard
from callboard.agent import RunSpec, Tasks, builtin_kinds


async def main(setup_json: str) -> None:
    setup = json.loads(setup_json)
    async with callboard.open_runtime(
        setup["data"], kinds=builtin_kinds({"workspace": setup["workspace"]})
    ) as rt:
        tasks = Tasks(rt)
        spec = RunSpec(
            setup["prompt"],
            base_url=setup["model_url"],
            model="test-model",
            deadline=timedelta(minutes=2),
            approve="always",
            provider=setup.get("provider"),
            **(setup.get("spec") or {}),
        )
        handle = await tasks.spawn(spec)
        message_id = ""
        if setup.get("message"):
            message_id = await tasks.send(handle, setup["message"])
            await rt.wait_handled(handle, int(message_id.removeprefix("msg-")))
        print(f"SPAWNED {handle} {message_id}", flush=True)
        await tasks.wait(handle)


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
