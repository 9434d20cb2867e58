"""``nodes`` on the wire and ``callboard nodes``, and an actor's ``owner`` in
``list`` and ``inspect``: on two nodes of one PostgreSQL database, and on one
SQLite node, where nothing of it shows."""

from __future__ import annotations

import json
import re
import signal
import sys

import trio
from gateway_wire import connect, open_gateway
from serve_helpers import connect_to, serve_env
from test_pg_nodes import node, query, wait_handled

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


async def test_nodes_lists_each_node_with_its_heartbeat_and_the_actors_it_owns(pg_url, tmp_path):
    with trio.fail_after(60):
        async with (
            node(tmp_path / "a", pg_url, "a") as a,
            node(tmp_path / "b", pg_url, "b") as b,
            connect_to(a) as via_a,
            connect_to(b) as via_b,
        ):
            for client, actor, n in ((via_a, "ledger/p", 1), (via_b, "ledger/q", 2)):
                body = {"sender": "t", "n": n}
                await client.ok("send", to=actor, type="add", body=body)
                await wait_handled(client, actor, {("t", n)})
            nodes = (await via_a.ok("nodes"))["nodes"]
            rows = (await via_b.ok("list", kind="ledger"))["actors"]
            view = await via_b.ok("inspect", actor="ledger/p")
            cli = await trio.run_process(
                [sys.executable, "-m", "callboard", "nodes", "--json", "--url", a.url,
                 "--token-file", str(tmp_path / "a" / "token")],
                env=serve_env(), capture_stdout=True, capture_stderr=True, check=False,
            )  # fmt: skip
            for served in (a, b):
                served.process.send_signal(signal.SIGTERM)
                assert await served.process.wait() == 0
    assert [(n["node"], n["actors"]) for n in nodes] == [("a", 1), ("b", 1)]
    assert all(ISO.match(n["heartbeat"]) for n in nodes), nodes
    assert [(r["actor"], r["owner"]) for r in rows] == [("ledger/p", "a"), ("ledger/q", "b")]
    assert view["owner"] == "a"
    assert cli.returncode == 0, cli.stderr
    assert [(n["node"], n["actors"]) for n in json.loads(cli.stdout)["nodes"]] == [
        ("a", 1), ("b", 1),
    ]  # fmt: skip
    # Each node gave its lease and its actors up as it closed.
    assert query(pg_url, "SELECT COUNT(*) FROM callboard_nodes") == [(0,)]
    assert query(pg_url, "SELECT COUNT(*) FROM callboard_ownership") == [(0,)]


async def test_one_sqlite_node_lists_no_nodes_and_no_owner(tmp_path):
    with trio.fail_after(20):
        async with open_gateway(tmp_path) as (rt, gateway), connect(gateway.url) as client:
            ack = await client.ok("send", to="counter/c", type="add")
            await rt.wait_handled("counter/c", ack["seq"])
            nodes = await client.ok("nodes")
            rows = (await client.ok("list"))["actors"]
            view = await client.ok("inspect", actor="counter/c")
    assert nodes == {"nodes": []}
    assert rows == [{"actor": "counter/c", "status": "active", "mailbox": 0, "restarts": 0}]
    assert "owner" not in view
