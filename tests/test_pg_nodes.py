"""Two `callboard serve` nodes on one PostgreSQL database, as real processes:
sends through either gateway reach actors owned by either node, a client of
one node follows an actor of the other, and when a node is SIGKILLed mid
traffic the other takes its actors over. Every count is read from the
database (the ledger's log is written in the commit that handles a
message), not from what a node says."""

from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import trio
from serve_helpers import connect_to, serve_env, serving
from websockets.exceptions import ConnectionClosed

LEASE_TTL = "2"
ACTORS = [f"ledger/{i}" for i in range(6)]
KIND = "pg_node_kinds:Ledger"


def node(data: Path, url: str, name: str, *extra: str, **env: str):
    """`callboard serve` as node ``name`` of the database at ``url``."""
    return serving(
        data, "--node", name, "--lease-ttl", LEASE_TTL, *extra, kind=KIND,
        env=serve_env(CALLBOARD_STORE=url, LEDGER_NODE=name, **env),
    )  # fmt: skip


def query(url: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return list(conn.execute(sql, args).fetchall())


def handled_log(url: str) -> dict[str, list[list[Any]]]:
    """Each ledger's ``handled`` log, in the order its commits wrote it."""
    log: dict[str, list[list[Any]]] = {}
    rows = query(url, "SELECT address, data FROM logs WHERE log = 'handled' ORDER BY address, idx")
    for address, data in rows:
        log.setdefault(address, []).append(json.loads(bytes(data)))
    return log


def owners(url: str) -> dict[str, str]:
    return dict(query(url, "SELECT address, node FROM callboard_ownership"))  # type: ignore[arg-type]


async def wait_handled(client: Any, actor: str, entries: set[tuple[str, int]]) -> list[int]:
    """Follow ``actor`` from its first event until every ``(sender, n)`` in
    ``entries`` was handled; the seqs of every event seen, in order."""
    sub = (await client.ok("subscribe", actor=actor, after=0))["sub"]
    seqs: list[int] = []
    missing = set(entries)
    while missing:
        (frame,) = await client.events(sub, 1)
        assert frame["op"] == "event", frame
        seqs.append(frame["seq"])
        if frame["type"] == "handled":
            missing.discard((frame["data"][1], frame["data"][2]))
    await client.ok("unsubscribe", sub=sub)
    return seqs


class Sender:
    """One sender: keyed sends, one at a time (so its order is its acks'),
    round the actors; what was acknowledged, and the last one in doubt."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.n = 0
        self.acked: list[tuple[str, int]] = []  # (actor, n)
        self.in_doubt: tuple[str, int] | None = None

    async def send(self, client: Any, count: int) -> None:
        for _ in range(count):
            await self.send_one(client)

    async def send_one(self, client: Any, retry: tuple[str, int] | None = None) -> None:
        if retry is None:
            self.n += 1
            actor, n = ACTORS[self.n % len(ACTORS)], self.n
        else:
            actor, n = retry
        self.in_doubt = (actor, n)
        body = {"sender": self.name, "n": n}
        ack = await client.ok("send", to=actor, type="add", body=body, key=f"{self.name}-{n}")
        self.in_doubt = None
        if not ack["duplicate"]:
            self.acked.append((actor, n))


async def test_two_nodes_share_actors_and_the_survivor_of_a_sigkill_takes_them_over(
    pg_url, tmp_path
):
    with trio.fail_after(120):
        async with (
            node(tmp_path / "a", pg_url, "a") as a,
            node(tmp_path / "b", pg_url, "b") as b,
            connect_to(a) as via_a,
            connect_to(b) as via_b,
            connect_to(b) as watcher,
            connect_to(b) as via_b_too,
        ):
            # The first work for each actor decides its owner: 0-2 on a, 3-5 on b.
            first = Sender("first")
            for i in range(len(ACTORS)):
                first.n = i - 1 + len(ACTORS)  # so that send_one picks ACTORS[i]
                await first.send_one(via_a if i < 3 else via_b)
            for actor, n in first.acked:
                await wait_handled(watcher, actor, {("first", n)})
            assert owners(pg_url) == {
                actor: "a" if i < 3 else "b" for i, actor in enumerate(ACTORS)
            }
            # Traffic through both gateways, to actors owned by either node; a
            # client of b follows ledger/0, which a owns.
            sa, sb = Sender("sa"), Sender("sb")
            followed: list[dict[str, Any]] = []
            sub = (await watcher.ok("subscribe", actor="ledger/0", after=0))["sub"]
            want: set[tuple[str, int]] | None = None
            caught_up = trio.Event()

            def check_caught_up() -> None:
                seen = {(f["data"][1], f["data"][2]) for f in followed if f["type"] == "handled"}
                if want is not None and want <= seen:
                    caught_up.set()

            async def follow() -> None:
                while True:
                    followed.extend(await watcher.events(sub, 1))
                    check_caught_up()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(follow)
                async with trio.open_nursery() as traffic:
                    traffic.start_soon(sb.send, via_b, 90)

                    async def through_a() -> None:
                        await sa.send(via_a, 30)
                        # Mid traffic: a dies with a send of its own under way.
                        request = sa.send_one(via_a)
                        async with trio.open_nursery() as inner:
                            inner.start_soon(_swallow_closed, request)
                            a.process.send_signal(signal.SIGKILL)
                        assert await a.process.wait() == -signal.SIGKILL
                        # The sender goes on through b, retrying the send in doubt
                        # with its key: applied once whether a took it or not.
                        if sa.in_doubt is not None:
                            await sa.send_one(via_b_too, retry=sa.in_doubt)
                        await sa.send(via_b_too, 30)

                    traffic.start_soon(through_a)
                # Everything acknowledged is handled, wherever it went.
                expected: dict[str, set[tuple[str, int]]] = {actor: set() for actor in ACTORS}
                for sender in (first, sa, sb):
                    for actor, n in sender.acked:
                        expected[actor].add((sender.name, n))
                for actor in ACTORS:
                    seqs = await wait_handled(via_b, actor, expected[actor])
                    assert seqs == list(range(1, len(seqs) + 1)), f"{actor}: {seqs}"
                want = expected["ledger/0"]
                check_caught_up()
                await caught_up.wait()  # the follower's own frames may still be on their way
                nursery.cancel_scope.cancel()
            log = handled_log(pg_url)
            final_owners = owners(pg_url)
            b.process.send_signal(signal.SIGTERM)
            assert await b.process.wait() == 0
    # Every acknowledged message applied exactly once; nothing applied twice.
    for actor in ACTORS:
        applied = Counter((sender, n) for _, sender, n in log[actor])
        assert {entry for entry, times in applied.items() if times > 1} == set(), actor
        assert expected[actor] <= set(applied), actor
    # Each sender's messages to one actor applied in the order they were acked.
    for actor in ACTORS:
        for sender in ("sa", "sb"):
            ns = [n for _, s, n in log[actor] if s == sender]
            assert ns == sorted(ns), (actor, sender, ns)
    # The subscription on b to a's actor saw its events with no gap and no duplicate.
    seqs = [f["seq"] for f in followed]
    assert seqs == list(range(1, len(seqs) + 1))
    # a's actors, each sent to after a died, are b's now; a handled some before.
    assert final_owners == dict.fromkeys(ACTORS, "b")
    assert {node for entries in log.values() for node, _, _ in entries} == {"a", "b"}
    assert len(sa.acked) > 30 and len(sb.acked) == 90


async def _swallow_closed(request: Any) -> None:
    # The node died under this send: its outcome is in doubt (the sender retries it).
    try:
        await request
    except (ConnectionClosed, OSError):
        pass
