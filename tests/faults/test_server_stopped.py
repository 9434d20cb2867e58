"""A real `callboard serve` stopped with SIGSTOP while clients send to it, then continued.

Clients send keyed messages over the gateway, one request at a time each,
and wait `PATIENCE` seconds for a reply. While the server is stopped their
requests go unanswered: each client gives up on its request (its outcome is
unknown), leaves the connection, and once the server runs again connects
anew and sends the same key, as an unknown outcome asks; an error reply is
taken at its word. After the stops the server is SIGKILLed, a runtime
restarts on its data directory, and every acknowledged message must be
there exactly once, and no refused one at all.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from pathlib import Path

import attrs
import trio
from checker import Tally, applied, outcomes
from serve_helpers import Serving, connect_to, serve_env, serving
from websockets.exceptions import WebSocketException

CLIENTS = 4
PATIENCE = 0.5  # seconds a client waits for one reply before it gives the request up
ACKS = 25  # acks each client gets before a stop, and after the last one


@attrs.define
class Clients:
    """What the clients were told, and a way to wait until they were told more."""

    served: Serving
    lines: list[str] = attrs.Factory(list)
    acks: Counter[int] = attrs.Factory(Counter)
    gave_up: Counter[int] = attrs.Factory(Counter)
    keys: int = 0
    duplicates: int = 0  # acks of a retry that found its first attempt applied
    _grew: trio.Event = attrs.Factory(trio.Event)

    def say(self, client: int, key: str, outcome: str) -> None:
        self.lines.append(json.dumps({"key": key, "outcome": outcome}))
        self.acks[client] += outcome == "acked"
        self.gave_up[client] += outcome == "unknown"
        self._grew.set()

    async def wait_until(self, condition) -> None:
        while not condition():
            self._grew = trio.Event()
            await self._grew.wait()

    async def run(self, client: int) -> None:
        """Send keys to ``counter/c{client}`` without end, each until its answer is known."""
        key: str | None = None
        while True:
            try:
                async with connect_to(self.served) as ws:
                    while True:
                        if key is None:
                            key, self.keys = f"k{self.keys}", self.keys + 1
                        to = f"counter/c{client}"
                        with trio.move_on_after(PATIENCE) as waiting:
                            body = {"id": key}
                            reply = await ws.request("send", to=to, type="add", body=body, key=key)
                        if waiting.cancelled_caught:
                            self.say(client, key, "unknown")
                            break  # a new connection, then the same key again
                        if reply["op"] == "ok":
                            self.duplicates += reply["duplicate"]
                            self.say(client, key, "acked")
                            key = None
                        elif reply["error"]["code"] == "unknown_outcome":
                            self.say(client, key, "unknown")
                        else:
                            self.say(client, key, "failed")
                            key = None
            except (OSError, WebSocketException):
                if key is not None:
                    self.say(client, key, "unknown")  # the connection went: ask again

    async def wait_acks(self, each: int) -> None:
        """Wait until every client has had ``each`` acks."""
        await self.wait_until(lambda: all(self.acks[c] >= each for c in range(CLIENTS)))

    async def wait_everyone_gave_up(self) -> None:
        """Wait until every client has given up one more request than now."""
        before = self.gave_up.copy()
        await self.wait_until(lambda: all(self.gave_up[c] > before[c] for c in range(CLIENTS)))


async def _trial(data: Path, stops: int) -> Clients:
    """Clients send to a server that is stopped ``stops`` times; then it is SIGKILLed."""
    async with serving(data, env=serve_env(), kind="core_kinds:Counter") as served:
        pid = served.process.pid
        clients = Clients(served)
        async with trio.open_nursery() as nursery:
            for client in range(CLIENTS):
                nursery.start_soon(clients.run, client)
            for stop in range(1, stops + 1):
                await clients.wait_acks(ACKS * stop)
                os.kill(pid, signal.SIGSTOP)
                await clients.wait_everyone_gave_up()  # on a request the stopped server held
                os.kill(pid, signal.SIGCONT)
            await clients.wait_acks(ACKS * (stops + 1))
            nursery.cancel_scope.cancel()
        assert served.process.returncode is None, served.stderr[-5:]  # it lived through it
        os.kill(pid, signal.SIGKILL)
    return clients


async def test_a_stopped_server_loses_no_acknowledged_send_and_doubles_none(tmp_path, request):
    trials, stops = (10, 3) if request.config.getoption("--longrun") else (1, 2)
    tally = Tally()
    duplicates = 0
    with trio.fail_after(60 * trials):
        for trial in range(trials):
            data = tmp_path / f"data-{trial}"
            clients = await _trial(data, stops)
            unknown = sum('"unknown"' in line for line in clients.lines)
            tally.add(outcomes(clients.lines), unknown, await applied(data))
            duplicates += clients.duplicates
    print(
        tally.line(f"SIGSTOP of the server ({stops} stops a trial)"),
        f"({duplicates} retries found their first attempt applied)",
    )
    tally.check()
    assert tally.unknown >= trials * stops * CLIENTS  # every stop held a request of each client
