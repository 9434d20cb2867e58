"""``durable-64-senders-64-actors-postgresql-2-nodes``: the durable scenario on
two nodes sharing one PostgreSQL database, each node a process of its own.

The run starts the database (as the one-node scenario does), then node
``n1`` (a child process, `_pg_node_child`), which activates actors 0-31 and
so owns them, then node ``n2``, which activates 32-63. When both are ready
the clock starts on both: 64 senders, one per actor, sender ``i`` on ``n1``
for even ``i`` and on ``n2`` for odd, so each node sends half its messages
to actors it runs and half to actors the other node runs (written to the
shared mailbox, the owner woken by NOTIFY). A message counts once its
handling is committed; each node waits for the actors it sent to, the
other node's through the database. The span is from the first node's start
to the last node's end (one monotonic clock for both processes).

CPU is each node's own process's (no mixing: one runtime a process), over
the measured stretch; ``cpu_us_per_op`` is both nodes' CPU over every
message, ``nodes`` has each node's. PostgreSQL's own CPU is counted in
neither, as in the one-node scenario. Afterwards the actors' totals are
checked against the messages sent.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import Result, Scenario, Settings, cpu_per_op, percentile
from ._postgres import _database

__all__ = ["SCENARIOS"]

_ACTORS = 64
_NODES = ("n1", "n2")
_ROOT = Path(__file__).resolve().parent.parent  # what ``-m benchmarks...`` imports
_READY_TIMEOUT_S = 300.0
_RUN_TIMEOUT_S = 1800.0  # 100,000 messages at a few hundred a second, on a busy machine


class _Node:
    """A child node: lines to its stdin, JSON lines from its stdout, each read
    bounded by a timeout (a child that hangs fails the run, not the machine)."""

    def __init__(self, name: str, url: str, data: Path, warm: range, send: range, per: int):
        def numbers(values: range) -> str:
            return ",".join(str(i) for i in values)

        argv = [url, name, str(data), numbers(warm), numbers(send), str(per)]
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks._pg_node_child", *argv],
            cwd=_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
        )
        self._buffer = b""

    def tell(self, word: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(word.encode() + b"\n")

    def hear(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        give_up = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = give_up - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise RuntimeError(f"node {self.name} said nothing for {timeout:.0f} s")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                status = self.proc.wait()
                raise RuntimeError(f"node {self.name} exited (status {status}); see its stderr")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def close(self) -> None:
        """After ``exit`` (or a kill): wait for it; one still running then is killed."""
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


def _run(url: str, workdir: Path, per_sender: int) -> tuple[list[dict[str, Any]], int, list[int]]:
    half = _ACTORS // 2
    plan = [(range(0, half), range(0, _ACTORS, 2)), (range(half, _ACTORS), range(1, _ACTORS, 2))]
    nodes: list[_Node] = []
    try:
        owned = []
        # One after the other: the first owns its actors before the second opens.
        for name, (warm, send) in zip(_NODES, plan, strict=True):
            node = _Node(name, url, workdir / name, warm, send, per_sender)
            nodes.append(node)
            owned.append(int(node.hear(_READY_TIMEOUT_S)["ready"]))
        for node in nodes:
            node.tell("go")
        reports = [node.hear(_RUN_TIMEOUT_S) for node in nodes]
        for node in nodes:
            node.tell("check")
        totals = sum(int(node.hear(_READY_TIMEOUT_S)["totals"]) for node in nodes)
        for node in nodes:
            node.tell("exit")
    except BaseException:
        for node in nodes:
            node.proc.kill()  # mid-run: it would wait for a word that never comes
        raise
    finally:
        for node in nodes:
            node.close()
    failed = [n.name for n in nodes if n.proc.returncode != 0]
    if failed:
        raise RuntimeError(f"node(s) {', '.join(failed)} exited with an error (see their stderr)")
    return reports, totals, owned


def durable_two_nodes(settings: Settings, workdir: Path) -> Result:
    messages = 12_000 if settings.quick else 100_000
    per_sender = messages // _ACTORS
    with _database(workdir) as url:
        reports, totals, owned = _run(url, workdir, per_sender)
    sent = sum(r["sent"] for r in reports)
    if totals != sent + _ACTORS:  # not a speed check: lost or doubled messages
        raise RuntimeError(f"{sent + _ACTORS} messages sent but {totals} handled")
    started = min(r["started"] for r in reports)
    seconds = max(r["ended"] for r in reports) - started
    timing = {
        "seconds": round(seconds, 4),
        "cpu_main_thread_s": round(sum(r["cpu_main_thread_s"] for r in reports), 4),
        "cpu_other_threads_s": round(sum(r["cpu_other_threads_s"] for r in reports), 4),
    }
    flat = [x for r in reports for x in r["latencies"]]
    batches = sum(r["writer_batches"] for r in reports)
    operations = sum(r["writer_operations"] for r in reports)
    nodes = {}
    for name, report, mine in zip(_NODES, reports, owned, strict=True):
        cpu = report["cpu_main_thread_s"] + report["cpu_other_threads_s"]
        nodes[name] = {
            "actors_owned": mine,
            "sent": report["sent"],
            "sent_to_other_node": report["sent"] - report["sent_local"],
            "seconds": round(report["ended"] - report["started"], 4),
            "cpu_main_thread_s": report["cpu_main_thread_s"],
            "cpu_other_threads_s": report["cpu_other_threads_s"],
            # Its CPU over the messages it sent (it handles as many: half the actors).
            "cpu_us_per_op": round(cpu / report["sent"] * 1e6, 2),
            "writer_batches": report["writer_batches"],
            "writer_ops_per_batch": report["writer_ops_per_batch"],
            "writer_busy": round(report["writer_commit_s"] / seconds, 3),
        }
    return Result(
        ops_per_s=sent / seconds,
        p50_ms=percentile(flat, 50) * 1e3,
        p99_ms=percentile(flat, 99) * 1e3,
        unit="messages",
        details={
            "messages": sent,
            "senders": _ACTORS,
            "actors": _ACTORS,
            "remote_share": round(sum(n["sent_to_other_node"] for n in nodes.values()) / sent, 3),
            "ack_max_ms": round(max(flat) * 1e3, 3),
            "acked_all_s": round(max(r["acked"] for r in reports) - started, 4),
            **timing,
            "writer_batches": batches,
            "writer_operations": operations,
            "writer_ops_per_batch": round(operations / batches, 2) if batches else 0.0,
            **cpu_per_op(timing, sent),
            "cpu_us_per_message": round(
                (timing["cpu_main_thread_s"] + timing["cpu_other_threads_s"]) / sent * 1e6, 1
            ),
            "nodes": nodes,
        },
    )


def _summary(result: Result) -> str:
    d = result.details
    each = "; ".join(
        f"{name} owns {n['actors_owned']}, sent {n['sent']} ({n['sent_to_other_node']} to the "
        f"other), {n['writer_ops_per_batch']} ops/commit, cpu {n['cpu_us_per_op']} us/msg"
        for name, n in d["nodes"].items()
    )
    return (
        f"{d['messages']} msgs in {d['seconds']:.2f}s, {d['remote_share']:.0%} to the other "
        f"node's actors; {each}; both nodes {d['cpu_us_per_op']} us/msg"
    )


SCENARIOS = [
    Scenario(
        "durable-64-senders-64-actors-postgresql-2-nodes",
        durable_two_nodes,
        baseline="durable-64-senders-64-actors-postgresql",
        quick_repeats=1,  # two processes to start, a runtime each: ~15 s
        note="the same on two nodes (processes) sharing the database; half the sends routed",
        summary=_summary,
    ),
]
