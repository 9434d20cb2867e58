"""Live attach over the wire: the ``state``, ``set_state``, ``pause``, ``resume``
and ``step`` frames exactly, and the ``callboard state|pause|resume|step``
commands as real subprocesses (their output and exit codes), up to a pause
that survives a SIGKILL of ``callboard serve`` and its restart on the same data."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import trio
from client_helpers import CALLBOARD, REPO, serving, subprocess_env
from gateway_wire import connect, open_gateway
from serve_helpers import connect_to
from serve_helpers import serving as serving_process

from callboard.gateway import add_client_token


async def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        [*CALLBOARD, *args], cwd=REPO, env=subprocess_env(), capture_stdout=True,
        capture_stderr=True, check=False,
    )  # fmt: skip


def lines(output: bytes) -> list[str]:
    return output.decode().splitlines()


async def test_the_attach_frames_answer_as_the_protocol_writes_them(tmp_path):
    data = tmp_path / "data"
    with trio.fail_after(20):
        async with open_gateway(data) as (_, gateway):
            async with connect(gateway.url) as client:
                await client.ok("send", to="counter/a", type="add")
                sub = await client.ok("subscribe", actor="counter/a", after=0)
                await client.events(sub["sub"], 2)  # actor.started, counted
                frames = [
                    await client.request("state", actor="counter/a"),
                    await client.request("set_state", actor="counter/a", state={"count": 10}),
                    await client.request("pause", actor="counter/a"),
                    await client.request("send", to="counter/a", type="add"),
                    await client.request("step", actor="counter/a"),
                    await client.request("step", actor="counter/a"),
                    await client.request("resume", actor="counter/a"),
                    await client.request("step", actor="counter/a"),
                    await client.request("set_state", actor="counter/a"),
                    await client.request("pause", actor="counter/nobody"),
                ]
                events = await client.events(sub["sub"], 4)
    assert frames[:8] == [
        {"op": "ok", "id": frames[0]["id"], "actor": "counter/a", "state": {"count": 1}},
        {"op": "ok", "id": frames[1]["id"], "seq": 3},
        {"op": "ok", "id": frames[2]["id"], "actor": "counter/a", "status": "paused"},
        {"op": "ok", "id": frames[3]["id"], "seq": 2, "duplicate": False},
        {"op": "ok", "id": frames[4]["id"], "actor": "counter/a", "handled": 2},
        {"op": "ok", "id": frames[5]["id"], "actor": "counter/a", "handled": None},
        {"op": "ok", "id": frames[6]["id"], "actor": "counter/a", "status": "active"},
        {
            "op": "error", "id": frames[7]["id"], "code": "bad_request",
            "error_type": "BadRequest",
            "message": "counter/a is not paused, so it handles its mailbox by itself; pause it "
            "first to step it one message at a time",
        },
    ]  # fmt: skip
    assert (frames[8]["code"], frames[8]["message"]) == (
        "bad_request", "field 'state' is missing: it must be the new state, an object"
    )  # fmt: skip
    assert (frames[9]["code"], frames[9]["message"]) == (
        "unknown_actor", "there is no actor at 'counter/nobody'"
    )  # fmt: skip
    assert [(e["seq"], e["type"]) for e in events] == [
        (3, "actor.state_replaced"), (4, "actor.paused"), (5, "counted"), (6, "actor.resumed")
    ]  # fmt: skip
    assert events[2]["data"] == {"count": 11}


async def test_a_read_token_reads_the_state_and_may_not_edit_pause_or_step(tmp_path):
    data = tmp_path / "data"
    viewer = add_client_token(data, "viewer", access="read", actors=["counter/*"])
    with trio.fail_after(20):
        async with open_gateway(data) as (_, gateway):
            async with connect(gateway.url) as operator:
                sub = await operator.ok("subscribe", actor="counter/a", after=0)
                await operator.ok("send", to="counter/a", type="add")
                await operator.events(sub["sub"], 2)  # actor.started, counted
                await operator.ok("pause", actor="counter/a")
            async with connect(gateway.url, token=viewer, header_token=viewer) as client:
                state = await client.ok("state", actor="counter/a")
                refused = [
                    await client.request(op, actor="counter/a", **extra)
                    for op, extra in [("set_state", {"state": {"count": 0}}), ("pause", {}),
                                      ("resume", {}), ("step", {})]
                ]  # fmt: skip
    assert state == {"actor": "counter/a", "state": {"count": 1}}
    verbs = ["replace the state of", "pause", "resume", "step"]
    assert [(r["code"], r["message"]) for r in refused] == [
        ("forbidden", f"the token 'viewer' (read access to counter/*) may not {verb} "
                      "'counter/a'; ask the operator for a token that reaches it")
        for verb in verbs
    ]  # fmt: skip


async def test_the_commands_print_edit_pause_step_and_resume_with_their_exit_codes(tmp_path):
    with trio.fail_after(60):
        async with serving(tmp_path) as server:
            url = ("--url", server.url)
            assert server.rt is not None
            await server.rt.wait_handled(
                "counter/c", (await server.rt.send("counter/c", "add")).seq
            )
            shown = await cli("state", "counter/c", *url)
            edited = await cli("state", "counter/c", "--set", '{"total": 41}', *url)
            wrong = await cli("state", "counter/c", "--set", '{"total": "lots"}', *url)
            unparsed = await cli("state", "counter/c", "--set", "{total", *url)
            nulled = await cli("state", "counter/c", "--set", "null", *url)
            early = await cli("step", "counter/c", *url)
            paused = await cli("pause", "counter/c", *url)
            for _ in range(2):
                await server.rt.send("counter/c", "add")
            listed = await cli("ls", *url)
            stepped = await cli("step", "counter/c", "--json", *url)
            machine = await cli("state", "counter/c", "--json", *url)
            resumed = await cli("resume", "counter/c", *url)
            await server.rt.wait_handled("counter/c", 3)
            empty = await cli("pause", "counter/c", *url)
            nothing = await cli("step", "counter/c", *url)
            final = await server.rt.get_state("counter/c")
    assert (shown.returncode, lines(shown.stdout)) == (0, ["{", '  "total": 1', "}"])
    assert (edited.returncode, lines(edited.stdout)) == (
        0, ["counter/c: state replaced (event 3, actor.state_replaced)"]
    )  # fmt: skip
    assert (wrong.returncode, wrong.stdout) == (1, b"")
    assert lines(wrong.stderr) == [
        "callboard: the new state of 'counter/c': $.total is not valid (invalid literal for "
        "int() with base 10: 'lots') (a CounterState); nothing was changed"
    ]
    assert unparsed.returncode == 2
    assert (nulled.returncode, lines(nulled.stderr)) == (1, [
        "callboard: field 'state' is missing: it must be the new state, an object"
    ])  # fmt: skip
    assert "argument --set: '{total' is not valid JSON" in unparsed.stderr.decode()
    assert (early.returncode, lines(early.stderr)) == (1, [
        "callboard: counter/c is not paused, so it handles its mailbox by itself; pause it "
        "first to step it one message at a time"
    ])  # fmt: skip
    assert (paused.returncode, lines(paused.stdout)) == (0, ["counter/c paused"])
    assert lines(listed.stdout) == [
        "ACTOR      STATUS  MAILBOX  RESTARTS",
        "counter/c  paused  2        0",
    ]
    assert (stepped.returncode, json.loads(stepped.stdout)) == (
        0, {"actor": "counter/c", "handled": 2}
    )  # fmt: skip
    assert json.loads(machine.stdout) == {"actor": "counter/c", "state": {"total": 42}}
    assert (resumed.returncode, lines(resumed.stdout)) == (0, ["counter/c active"])
    assert (empty.returncode, nothing.returncode) == (0, 0)
    assert lines(nothing.stdout) == ["counter/c: no message waits; nothing was handled"]
    assert final == {"total": 43}


async def test_the_repl_pauses_steps_edits_and_resumes_with_the_same_verbs(tmp_path):
    script = (
        b"pause counter/c\nsend counter/c add\nstep counter/c\nstate counter/c\n"
        b"state counter/c --set '{\"total\": 0}'\nresume counter/c\nstep counter/c\n"
    )
    with trio.fail_after(30):
        async with serving(tmp_path) as server:
            assert server.rt is not None
            await server.rt.wait_handled(
                "counter/c", (await server.rt.send("counter/c", "add")).seq
            )
            done = await trio.run_process(
                [*CALLBOARD, "repl", "--url", server.url], cwd=REPO,
                env=subprocess_env(CALLBOARD_HISTORY=os.devnull), stdin=script,
                capture_stdout=True, capture_stderr=True, check=False,
            )  # fmt: skip
            state = await server.rt.get_state("counter/c")
    assert lines(done.stdout) == [
        "counter/c paused",
        "sent to counter/c as seq 2",
        "counter/c handled message 2",
        "{",
        '  "total": 2',
        "}",
        "counter/c: state replaced (event 5, actor.state_replaced)",
        "counter/c active",
    ]
    assert (done.returncode, lines(done.stderr)) == (1, [
        "error: counter/c is not paused, so it handles its mailbox by itself; pause it first "
        "to step it one message at a time"
    ])  # fmt: skip
    assert state == {"total": 0}


async def test_a_pause_outlives_a_sigkill_of_the_server_and_its_restart(tmp_path):
    data = tmp_path / "data"
    token = ("--token-file", str(data / "token"))
    with trio.fail_after(60):
        async with serving_process(data) as first:
            async with connect_to(first) as client:
                sub = await client.ok("subscribe", actor="counter/a", after=0)
                await client.ok("send", to="counter/a", type="add")
                await client.events(sub["sub"], 2)  # actor.started, counted: it was handled
                paused = await cli("pause", "counter/a", "--url", first.url, *token)
                for _ in range(3):
                    await client.ok("send", to="counter/a", type="add")
            first.process.kill()
            assert await first.process.wait() == -signal.SIGKILL
        async with serving_process(data) as second:
            url = ("--url", second.url, *token)
            listed = await cli("ls", *url)
            stepped = await cli("step", "counter/a", *url)
            held = await cli("inspect", "counter/a", "--json", *url)
            resumed = await cli("resume", "counter/a", *url)
            async with connect_to(second) as client:
                sub = await client.ok("subscribe", actor="counter/a", after=0)
                seen = []
                while not seen or seen[-1]["data"] != {"count": 4}:
                    (event,) = await client.events(sub["sub"], 1)
                    if event["type"] == "counted":
                        seen.append(event)
    assert (paused.returncode, lines(paused.stdout)) == (0, ["counter/a paused"])
    assert (listed.returncode, lines(listed.stdout)) == (0, [
        "ACTOR      STATUS  MAILBOX  RESTARTS",
        "counter/a  paused  3        0",
    ])  # fmt: skip
    assert (stepped.returncode, lines(stepped.stdout)) == (0, ["counter/a handled message 2"])
    view = json.loads(held.stdout)
    assert (view["status"], view["mailbox"], view["state"]) == ("paused", 2, {"count": 2})
    assert (resumed.returncode, lines(resumed.stdout)) == (0, ["counter/a active"])
    assert [e["data"]["count"] for e in seen] == [1, 2, 3, 4]  # each message once, in order
