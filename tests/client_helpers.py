"""Servers for the client tests: the real gateway in-process, and a scripted endpoint.

`Server` runs ``open_runtime`` + ``serve_gateway`` on a data directory and
can be stopped and started again on the same directory and port, which is
what a restart looks like to a client. `scripted` is the one fake the
house style allows: a websocket endpoint whose every move a test writes,
for what the real server cannot be made to do on cue (drop a connection
with a request in flight, answer out of order, send an unknown error code).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
from client_kinds import Box, Counter
from credentials import TEST_TOKEN
from trio_websocket import ConnectionClosed, WebSocketConnection, WebSocketRequest, serve_websocket

import callboard
from callboard.agent import builtin_kinds
from callboard.gateway import GatewayConfig, serve_gateway

REPO = Path(__file__).resolve().parent.parent
# The agent's kinds beside the test kinds, as `callboard serve` composes them.
KINDS = [Counter, Box, *builtin_kinds()]


class Server:
    """The runtime and its gateway in this process, restartable on the same port."""

    def __init__(
        self,
        data: Path,
        *,
        config: GatewayConfig | None = None,
        runtime: callboard.RuntimeConfig | None = None,
    ) -> None:
        self.data = data
        self.config = config or GatewayConfig(port=0, token=TEST_TOKEN)
        self.runtime_config = runtime
        self.url = ""
        self.rt: callboard.Runtime | None = None
        self._scope: trio.CancelScope | None = None
        self._stopped = trio.Event()

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/", 1)[0])

    async def start(self, nursery: trio.Nursery) -> str:
        self._stopped = trio.Event()
        self.url = await nursery.start(self._run)
        return self.url

    async def stop(self) -> None:
        """Cancel the gateway and the runtime, and wait until the data directory is free."""
        assert self._scope is not None
        self._scope.cancel()
        await self._stopped.wait()

    async def _run(self, *, task_status: trio.TaskStatus[str]) -> None:
        try:
            with trio.CancelScope() as self._scope:
                async with callboard.open_runtime(
                    self.data, kinds=KINDS, config=self.runtime_config
                ) as rt:
                    self.rt = rt
                    async with trio.open_nursery() as nursery:
                        self.url = await nursery.start(serve_gateway, rt, self.config)
                        # The next start reuses the port, so a restart keeps the URL.
                        self.config = attrs.evolve(self.config, port=self.port)
                        task_status.started(self.url)
        finally:
            self.rt = None
            self._stopped.set()


@asynccontextmanager
async def serving(data: Path, **kwargs: Any) -> AsyncIterator[Server]:
    async with trio.open_nursery() as nursery:
        server = Server(data, **kwargs)
        await server.start(nursery)
        yield server
        nursery.cancel_scope.cancel()


Script = Callable[[WebSocketConnection, int], Awaitable[None]]


@asynccontextmanager
async def scripted(script: Script) -> AsyncIterator[str]:
    """Serve ``script(ws, n)`` for the n-th connection (from 1); yields the URL."""
    count = 0

    async def accept(request: WebSocketRequest) -> None:
        nonlocal count
        count += 1
        ws = await request.accept()
        try:
            await script(ws, count)
        except ConnectionClosed:
            pass  # the client left; scripts end with ``await ws.get_message()`` to wait for it
        finally:
            with trio.move_on_after(1, shield=True):
                await ws.aclose()

    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve_websocket, accept, "127.0.0.1", 0, None)
        yield f"ws://127.0.0.1:{server.port}/v1"
        nursery.cancel_scope.cancel()


async def receive(ws: WebSocketConnection) -> dict[str, Any]:
    return json.loads(await ws.get_message())


async def reply(ws: WebSocketConnection, frame: dict[str, Any]) -> None:
    await ws.send_message(json.dumps(frame))


async def welcome(ws: WebSocketConnection) -> dict[str, Any]:
    """Take the ``hello`` and answer ``welcome``; returns the hello."""
    hello = await receive(ws)
    await reply(ws, {"op": "welcome", "id": hello["id"], "protocol": 1, "server": "script"})
    return hello


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for a ``callboard`` subprocess that can import ``tests.client_kinds``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("CALLBOARD_URL", None)
    env["CALLBOARD_TOKEN"] = TEST_TOKEN  # the in-process servers' (a test may say otherwise)
    env.update(extra)
    return env


CALLBOARD = [sys.executable, "-m", "callboard"]
