"""Servers and jobs for the reading tests: the real gateway in-process, kinds with settings.

`serving_with` is `client_helpers.serving` with the agent's kinds bound to
``settings`` (a job's output cap and copy interval), restartable on the same
data directory and port (`Served.restart`). `start_job` starts a real
background job under ``/bin/sh`` and hands it to its ``job`` actor, as a
session's ``shell_run`` does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
from client_kinds import Box, Counter
from credentials import TEST_TOKEN
from shell_helpers import JOBS_DIR

import callboard
from callboard.agent import builtin_kinds
from callboard.gateway import GatewayConfig, serve_gateway
from callboard.tools import JobHandle, LocalExecutor, shell_run

__all__ = ["Served", "job_event", "serving_with", "start_job"]


@attrs.define
class Served:
    """A runtime and its gateway in this process; ``restart`` stops and starts both."""

    data: Path
    settings: dict[str, Any]
    nursery: trio.Nursery
    config: GatewayConfig = attrs.field(factory=lambda: GatewayConfig(port=0, token=TEST_TOKEN))
    url: str = ""
    rt: callboard.Runtime | None = None
    _scope: trio.CancelScope | None = None
    _stopped: trio.Event = attrs.Factory(trio.Event)

    async def start(self) -> None:
        self._stopped = trio.Event()
        self.url = await self.nursery.start(self._run)

    async def restart(self) -> None:
        assert self._scope is not None
        self._scope.cancel()
        await self._stopped.wait()
        await self.start()

    async def _run(self, *, task_status: trio.TaskStatus[str]) -> None:
        kinds = [Counter, Box, *builtin_kinds(self.settings)]
        try:
            with trio.CancelScope() as self._scope:
                async with callboard.open_runtime(self.data, kinds=kinds) as rt:
                    self.rt = rt
                    async with trio.open_nursery() as nursery:
                        url = await nursery.start(serve_gateway, rt, self.config)
                        port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
                        self.config = attrs.evolve(self.config, port=port)  # the same URL again
                        task_status.started(url)
        finally:
            self.rt = None
            self._stopped.set()


@asynccontextmanager
async def serving_with(data: Path, **settings: Any) -> AsyncIterator[Served]:
    async with trio.open_nursery() as nursery:
        served = Served(data, settings, nursery)
        await served.start()
        yield served
        nursery.cancel_scope.cancel()


async def start_job(rt: callboard.Runtime, root: Path, owner: str, command: str) -> JobHandle:
    """A background job of ``owner`` that a ``job`` actor watches (as a session starts one)."""
    result = await shell_run(
        command, workspace=root, executor=LocalExecutor(), jobs_root=root / JOBS_DIR,
        owner=owner, timeout=10, background=True, output_cap=4096,
    )  # fmt: skip
    job = result.job
    assert job is not None
    ack = await rt.send(
        f"job/{job.job_id}", "watch",
        {"job_id": job.job_id, "command": job.command, "owner": owner, "pid": job.pid,
         "start_time": job.start_time, "directory": str(job.files.directory)},
        sender=owner,  # as the owner that started it: only the owner may
    )  # fmt: skip
    await rt.wait_handled(f"job/{job.job_id}", ack.seq)
    return job


async def job_event(events: Any, type: str) -> callboard.Event:
    """The next event of ``type`` from a subscription."""
    async for event in events:
        if event.type == type:
            return event  # type: ignore[no-any-return]
    raise AssertionError(f"the events ended before {type}")
