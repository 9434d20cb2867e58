"""Shell jobs stay with their machine: when their node dies for good, the node
that takes their job actors reports each job to its owner, never leaves it
``running``. Two real `callboard serve` nodes on one PostgreSQL database, on
one machine: a job whose process and files are still on the machine is
followed to its end by pid, start time and exit file (as a node restarted in
place would), and one whose machine went with its node (its process killed,
its files, under the dead node's ``--data``, gone) is reported ``lost``.
What the owners were told is read from the database."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import trio
from serve_helpers import connect_to
from test_pg_nodes import node, owners, query

KINDS = ("--kind", "pg_node_kinds:Starter")


async def first_event(client: Any, actor: str, type_: str) -> dict[str, Any]:
    """The data of ``actor``'s first ``type_`` event, waiting for it if need be."""
    sub = (await client.ok("subscribe", actor=actor, after=0))["sub"]
    while True:
        (frame,) = await client.events(sub, 1)
        assert frame["op"] == "event", frame
        if frame["type"] == type_:
            await client.ok("unsubscribe", sub=sub)
            return dict(frame["data"])


def finished_log(url: str) -> dict[str, list[dict[str, Any]]]:
    """Each starter's ``finished`` log: what its jobs told it, once each."""
    log: dict[str, list[dict[str, Any]]] = {}
    rows = query(url, "SELECT address, data FROM logs WHERE log = 'finished' ORDER BY address, idx")
    for address, data in rows:
        log.setdefault(address, []).append(json.loads(bytes(data)))
    return log


async def test_the_jobs_of_a_node_that_never_returns_are_reported_to_their_owners_not_left_running(
    pg_url, tmp_path
):
    go = tmp_path / "go"
    commands = {
        "starter/kept": f"while [ ! -e {go} ]; do sleep 0.02; done; echo finished",
        "starter/lost": "echo begun; exec sleep 600",
    }
    with trio.fail_after(120):
        async with (
            node(tmp_path / "a", pg_url, "a", *KINDS) as a,
            node(tmp_path / "b", pg_url, "b", *KINDS) as b,
            connect_to(a) as via_a,
            connect_to(b) as via_b,
        ):
            # Both owners' first work goes to a: a owns them, and their jobs run on a.
            started: dict[str, dict[str, Any]] = {}
            for owner, command in commands.items():
                await via_a.ok("send", to=owner, type="start", body={"command": command})
                started[owner] = await first_event(via_b, owner, "started")
                job = f"job/{started[owner]['job_id']}"
                assert (await first_event(via_b, job, "job.started"))["owner"] == owner
            jobs = {owner: f"job/{s['job_id']}" for owner, s in started.items()}
            assert owners(pg_url) == dict.fromkeys([*commands, *jobs.values()], "a")
            for s in started.values():
                assert Path(s["directory"]).is_relative_to(tmp_path / "a")
            # a's machine goes down with a: the lost job's files (under a's
            # --data) first, so that nothing can write its exit status, then
            # a and the job's process.
            shutil.rmtree(started["starter/lost"]["directory"])
            a.process.send_signal(signal.SIGKILL)
            assert await a.process.wait() == -signal.SIGKILL
            os.killpg(started["starter/lost"]["pid"], signal.SIGKILL)
            go.touch()  # the job that still runs on this machine ends now
            told = {owner: await first_event(via_b, owner, "finished") for owner in commands}
            views = {owner: (await via_b.ok("inspect", actor=job)) for owner, job in jobs.items()}
            nodes = (await via_b.ok("nodes"))["nodes"]
            log = finished_log(pg_url)
            final_owners = owners(pg_url)
            b.process.send_signal(signal.SIGTERM)
            assert await b.process.wait() == 0
    kept, lost = told["starter/kept"], told["starter/lost"]
    # b took each job over, and told its owner (which b took too) how it ended.
    assert (kept["node"], kept["status"], kept["exit_code"]) == ("b", "exited", 0)
    assert kept["tail"] == "finished\n"
    assert (lost["node"], lost["status"], lost["exit_code"]) == ("b", "lost", None)
    # Once each; and no job is left running.
    assert {owner: len(entries) for owner, entries in log.items()} == dict.fromkeys(commands, 1)
    assert {owner: view["status"] for owner, view in views.items()} == {
        "starter/kept": "exited",
        "starter/lost": "lost",
    }
    assert {owner: final_owners[owner] for owner in commands} == dict.fromkeys(commands, "b")
    # b is counted for the two owners only: the jobs have ended, and an ended
    # actor is nobody's. a is still listed (its heartbeat tells when it died), with nothing.
    assert [(n["node"], n["actors"]) for n in nodes] == [("a", 0), ("b", 2)]
