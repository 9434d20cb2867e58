"""Test helpers: a runtime and gateway on loopback port 0, and a client that
speaks docs/protocol.md through the `websockets` library (deliberately not the
server's trio-websocket), so the suite tests the wire, not one library."""

from __future__ import annotations

import itertools
import json
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from credentials import TEST_TOKEN
from gateway_kinds import KINDS
from websockets.exceptions import ConnectionClosed
from websockets.trio.client import ClientConnection
from websockets.trio.client import connect as ws_connect

import callboard
from callboard.gateway import Gateway, GatewayConfig

__all__ = ["Client", "close_code", "connect", "open_gateway"]


@asynccontextmanager
async def open_gateway(
    data: Path,
    config: GatewayConfig | None = None,
    *,
    runtime_config: callboard.RuntimeConfig | None = None,
) -> AsyncIterator[tuple[callboard.Runtime, Gateway]]:
    """A runtime on ``data`` with the test kinds, and a gateway in front of it."""
    async with callboard.open_runtime(data, kinds=KINDS, config=runtime_config) as rt:
        gateway = Gateway(rt, config or GatewayConfig(port=0, token=TEST_TOKEN))
        async with trio.open_nursery() as nursery:
            await nursery.start(gateway.serve)
            yield rt, gateway
            nursery.cancel_scope.cancel()


class Client:
    """One connection. `request` sends an op and returns its reply; frames that
    arrive meanwhile (events, lagged, other replies) wait in `pending`."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.pending: deque[dict[str, Any]] = deque()
        self._ids = itertools.count(1)

    def next_id(self) -> str:
        return f"r{next(self._ids)}"

    async def send_frame(self, frame: dict[str, Any] | str) -> None:
        await self.ws.send(frame if isinstance(frame, str) else json.dumps(frame))

    async def receive(self) -> dict[str, Any]:
        """The next frame: first those set aside by `request`."""
        if self.pending:
            return self.pending.popleft()
        return json.loads(await self.ws.recv())

    async def reply_to(self, rid: str | None) -> dict[str, Any]:
        for i, frame in enumerate(self.pending):
            if frame.get("op") in ("ok", "error", "welcome") and frame.get("id") == rid:
                del self.pending[i]
                return frame
        while True:
            frame = json.loads(await self.ws.recv())
            if frame.get("op") in ("ok", "error", "welcome") and frame.get("id") == rid:
                return frame
            self.pending.append(frame)

    async def request(self, op: str, **fields: Any) -> dict[str, Any]:
        rid = self.next_id()
        await self.send_frame({"op": op, "id": rid, **fields})
        return await self.reply_to(rid)

    async def ok(self, op: str, **fields: Any) -> dict[str, Any]:
        """`request` that insists on ``ok``; returns the reply without op and id."""
        reply = await self.request(op, **fields)
        assert reply["op"] == "ok", reply
        return {k: v for k, v in reply.items() if k not in ("op", "id")}

    async def events(self, sub: str, count: int) -> list[dict[str, Any]]:
        """The next ``count`` frames of subscription ``sub`` (events or lagged)."""
        got: list[dict[str, Any]] = []
        kept: list[dict[str, Any]] = []
        while len(got) < count:
            frame = await self.receive()
            (got if frame.get("sub") == sub else kept).append(frame)
        self.pending.extendleft(reversed(kept))
        return got


@asynccontextmanager
async def connect(
    url: str,
    *,
    hello: bool = True,
    token: str | None = TEST_TOKEN,
    header_token: str | None = TEST_TOKEN,
    origin: str | None = None,
    **options: Any,
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {header_token}"} if header_token else None
    async with ws_connect(
        url, proxy=None, origin=origin, additional_headers=headers, compression=None,
        ping_interval=None, open_timeout=5, close_timeout=2, **options,
    ) as ws:  # fmt: skip
        client = Client(ws)
        if hello:
            hello_frame: dict[str, Any] = {"op": "hello", "id": "h", "protocol": 1}
            if token is not None:
                hello_frame["token"] = token
            await client.send_frame(hello_frame)
            welcome = await client.receive()
            assert welcome["op"] == "welcome", welcome
        yield client


async def close_code(client: Client, *, into: list[dict] | None = None) -> int | None:
    """Read until the server closes (keeping the frames ``into`` a list); the
    close code it sent (None: no close frame)."""
    try:
        while True:
            frame = await client.receive()
            if into is not None:
                into.append(frame)
    except ConnectionClosed as exc:
        return exc.rcvd.code if exc.rcvd is not None else None
