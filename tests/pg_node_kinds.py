"""The actor kinds of the several-nodes tests: `callboard serve --kind pg_node_kinds:Ledger`.

A ledger records every message it handles in its ``handled`` log, in the
commit that handles it, naming the node that handled it (``LEDGER_NODE`` in
the server's environment): the tests read that log from the database to
count what was applied, and by whom.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import trio

from callboard import Actor, Context, Message
from callboard.tools import LocalExecutor, shell_run


class Ledger(Actor):
    """Virtual. ``add`` (``{"sender": S, "n": N}``) appends ``[node, S, N]`` to
    its log and emits ``handled`` with the same; ``hold`` does the same once
    the file ``LEDGER_HOLD_UNTIL`` names exists (if that is set), announcing
    ``holding`` first: a test decides when the handler ends, not a clock."""

    kind = "ledger"
    virtual = True

    async def handle(self, ctx: Context, message: Message) -> None:
        body: Any = message.body or {}
        node = os.environ.get("LEDGER_NODE", "?")
        until = os.environ.get("LEDGER_HOLD_UNTIL")
        if message.type == "hold" and until:
            ctx.emit("holding", {"node": node}, ephemeral=True)
            # The file is the test's signal; there is no event to wait on
            # across processes, and how long it takes does not matter.
            while not await trio.Path(until).exists():  # noqa: ASYNC110
                await trio.sleep(0.02)
        entry = [node, body.get("sender"), body.get("n")]
        self.state["handled"] = self.state.get("handled", 0) + 1
        ctx.append("handled", entry)
        ctx.emit("handled", entry)


class Starter(Actor):
    """Virtual. ``start`` (``{"command": C}``) runs ``C`` as a background job of
    this actor, under this node's data directory, as a session's shell tool
    does, and emits ``started`` naming the job; the ``job.finished`` its job
    sends back is kept in its ``finished`` log (with the node that handled
    it) and emitted as ``finished``."""

    kind = "starter"
    virtual = True

    async def handle(self, ctx: Context, message: Message) -> None:
        body: Any = message.body or {}
        if message.type == "start":
            data = Path(ctx.settings["data_dir"])
            result = await shell_run(
                body["command"], workspace=data, executor=LocalExecutor(),
                jobs_root=data / "jobs", owner=ctx.address, timeout=10, background=True,
                output_cap=4096,
            )  # fmt: skip
            job = result.job
            assert job is not None
            ctx.send(
                f"job/{job.job_id}", "watch",
                {"job_id": job.job_id, "command": job.command, "owner": ctx.address,
                 "pid": job.pid, "start_time": job.start_time,
                 "directory": str(job.files.directory)},
            )  # fmt: skip
            ctx.emit("started", {"job_id": job.job_id, "pid": job.pid,
                                 "directory": str(job.files.directory)})  # fmt: skip
        elif message.type == "job.finished":
            told = {k: body.get(k) for k in ("job_id", "status", "exit_code", "tail")}
            entry = {"node": os.environ.get("LEDGER_NODE", "?"), **told}
            ctx.append("finished", entry)
            ctx.emit("finished", entry)
