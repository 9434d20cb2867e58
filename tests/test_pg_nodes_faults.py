"""The database goes away mid traffic (its server stopped, then started again):
sends get an error meanwhile, nothing refused is applied, the node gets its
lease and its actors back, and nothing acknowledged is lost. Counted in the
database. A client of another node following one of the actors sees its
events through the outage with no gap and no duplicate. The URL's password
shows in none of the nodes' complaints (as text or JSON log lines), replies,
``nodes`` or ``inspect``."""

from __future__ import annotations

import json
import signal
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import trio
from pg_server import PgServer, skip_or_fail_without_postgres
from serve_helpers import connect_to
from test_pg_nodes import ACTORS, handled_log, node, owners, wait_handled
from test_store_postgres import with_password


class RestartableServer(PgServer):
    """A server of the test's own (the session's serves every other test), that
    can be stopped and started again on the same files."""

    def halt(self) -> None:
        self._run(self._pg_ctl, "-D", str(self.data), "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        options = f"-k {self._root} -c listen_addresses=127.0.0.1 -p {self.port} -c autovacuum=off"
        self._run(self._pg_ctl, "-D", str(self.data), "-o", options, "-l",
                  str(self._root / "log"), "-w", "start")  # fmt: skip


@pytest.fixture
def restartable() -> Iterator[RestartableServer]:
    skip_or_fail_without_postgres()
    server = RestartableServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_a_database_restart_mid_traffic_loses_nothing_acknowledged(restartable, tmp_path):
    url = restartable.new_database()
    secret_url = with_password(url, "hunter2-secret")  # the test server trusts any
    acked: list[tuple[str, int]] = []
    refused: dict[int, str] = {}  # n -> the error's code
    n = 0

    async def send(client: Any, number: int) -> dict[str, Any]:
        actor = ACTORS[number % 3]
        return await client.request(
            "send", to=actor, type="add", body={"sender": "s", "n": number}, key=f"s-{number}"
        )

    followed: list[dict[str, Any]] = []
    replies: list[dict[str, Any]] = []
    want: set[tuple[str, int]] | None = None
    caught_up = trio.Event()

    def check_caught_up() -> None:
        seen = {(f["data"][1], f["data"][2]) for f in followed if f.get("type") == "handled"}
        if want is not None and want <= seen:
            caught_up.set()

    async def follow(watcher: Any, sub: str) -> None:
        while True:
            followed.extend(await watcher.events(sub, 1))
            check_caught_up()

    with trio.fail_after(120):
        async with (
            node(tmp_path / "a", secret_url, "a", "--log-format", "json") as a,
            node(tmp_path / "b", secret_url, "b") as b,
            connect_to(a) as client,
            connect_to(b) as watcher,
        ):
            for _ in range(20):
                n += 1
                reply = await send(client, n)
                assert reply["op"] == "ok", reply
                acked.append((ACTORS[n % 3], n))
            await wait_handled(client, ACTORS[1], {("s", 1)})
            assert owners(url)[ACTORS[1]] == "a"  # b follows an actor it does not own
            sub = (await watcher.ok("subscribe", actor=ACTORS[1], after=0))["sub"]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(follow, watcher, sub)
                await trio.to_thread.run_sync(restartable.halt)
                # While the database is down: every send gets an error, none an ack.
                for _ in range(3):
                    n += 1
                    reply = await send(client, n)
                    assert reply["op"] == "error", reply
                    refused[n] = reply["code"]
                    replies.append(reply)
                # Past lease_ttl without a heartbeat, the node stops its actors itself.
                await a.wait_logged("could not renew its lease")
                await trio.to_thread.run_sync(restartable.resume)
                # Each refused send, retried with its key until the node takes it: one
                # refused as "unavailable" was not accepted, so its retry is no duplicate.
                for number, code in refused.items():
                    while (reply := await send(client, number))["op"] != "ok":
                        assert reply["code"] in ("unavailable", "unknown_outcome"), reply
                    if code == "unavailable":
                        assert reply["duplicate"] is False, (number, reply)
                    acked.append((ACTORS[number % 3], number))
                for _ in range(20):
                    n += 1
                    reply = await send(client, n)
                    assert reply["op"] == "ok", reply
                    acked.append((ACTORS[n % 3], n))
                for actor in ACTORS[:3]:
                    await wait_handled(client, actor, {("s", m) for a_, m in acked if a_ == actor})
                want = {("s", m) for actor, m in acked if actor == ACTORS[1]}
                check_caught_up()
                await caught_up.wait()  # the follower's own frames may still be on their way
                nursery.cancel_scope.cancel()
            replies += [await watcher.ok("nodes"), await watcher.ok("inspect", actor=ACTORS[1])]
            log = handled_log(url)
            for served in (a, b):
                served.process.send_signal(signal.SIGTERM)
                assert await served.process.wait() == 0
            said = [a.line, b.line, *a.stderr, *b.stderr, *map(json.dumps, replies)]
            json_lines = [json.loads(line) for line in a.stderr if line]
    assert set(refused.values()) <= {"unavailable", "unknown_outcome"}
    applied = Counter((actor, m) for actor in ACTORS[:3] for _, _, m in log[actor])
    assert sorted(applied) == sorted(acked)  # every acked message, and nothing else
    assert set(applied.values()) == {1}  # each once
    assert len(acked) == 43
    # The follower on b saw every event of the actor once, in order, through the outage.
    seqs = [f["seq"] for f in followed]
    assert seqs == list(range(1, len(seqs) + 1))
    assert any("***@" in line for line in said)  # it did name the URL, redacted
    assert any("could not renew its lease" in entry["message"] for entry in json_lines)
    assert not [line for line in said if "hunter2-secret" in line]
