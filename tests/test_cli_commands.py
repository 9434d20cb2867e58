"""The small commands, run as real ``callboard`` subprocesses against the real gateway.

The gateway runs in the test's process (so the test can restart it and read
its state); the commands are separate processes, as a user runs them.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import trio
from child import Lines
from client_helpers import CALLBOARD, REPO, serving, subprocess_env

import callboard
from callboard.client import connect
from callboard.gateway import GatewayConfig


async def cli(*args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        [*CALLBOARD, *args],
        cwd=REPO,
        env=subprocess_env(**env),
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )


def lines(output: bytes) -> list[str]:
    return output.decode().splitlines()


async def test_ls_prints_an_aligned_table_of_the_actors(tmp_path):
    with trio.fail_after(20):
        async with serving(tmp_path) as server:
            async with connect(server.url) as client:
                await client.spawn("box", name="b1")
                ack = await client.send("counter/c", "add")
                await server.rt.wait_handled("counter/c", ack.seq)
            done = await cli("ls", "--url", server.url)
    assert (done.returncode, done.stderr) == (0, b"")
    assert lines(done.stdout) == [
        "ACTOR      STATUS  MAILBOX  RESTARTS",
        "box/b1     active  0        0",
        "counter/c  active  0        0",
    ]


async def test_ls_with_json_prints_one_object_and_filters_by_kind(tmp_path):
    with trio.fail_after(20):
        async with serving(tmp_path) as server:
            async with connect(server.url) as client:
                await client.spawn("box", name="b1")
                await client.send("counter/c", "add")
            done = await cli("ls", "--kind", "box", "--json", "--url", server.url)
    assert done.returncode == 0
    assert [json.loads(line) for line in lines(done.stdout)] == [
        {"actors": [{"actor": "box/b1", "status": "active", "mailbox": 0, "restarts": 0}]}
    ]


async def test_ls_with_no_actors_says_so(tmp_path):
    with trio.fail_after(20):
        async with serving(tmp_path) as server:
            done = await cli("ls", "--url", server.url)
    assert (done.returncode, lines(done.stdout)) == (0, ["no actors"])


async def test_send_prints_the_seq_and_a_repeated_key_as_a_duplicate(tmp_path):
    with trio.fail_after(20):
        async with serving(tmp_path) as server:
            first = await cli("send", "counter/a", "add", '{"n": 2}', "--key", "k1",
                              "--url", server.url)  # fmt: skip
            again = await cli("send", "counter/a", "add", '{"n": 2}', "--key", "k1", "--json",
                              "--url", server.url)  # fmt: skip
    assert (first.returncode, lines(first.stdout)) == (0, ["sent to counter/a as seq 1"])
    assert (again.returncode, json.loads(again.stdout)) == (0, {"seq": 1, "duplicate": True})


async def test_spawn_prints_the_address_and_whether_it_existed(tmp_path):
    with trio.fail_after(20):
        async with serving(tmp_path) as server:
            new = await cli("spawn", "box", '{"label": "x"}', "--name", "b1", "--url", server.url)
            same = await cli("spawn", "box", '{"label": "x"}', "--name", "b1", "--json",
                             "--url", server.url)  # fmt: skip
    assert (new.returncode, lines(new.stdout)) == (0, ["box/b1 (spawned)"])
    assert (same.returncode, json.loads(same.stdout)) == (0, {"actor": "box/b1", "existed": True})


async def test_inspect_prints_the_fields_and_the_state(tmp_path):
    with trio.fail_after(20):
        async with serving(tmp_path) as server:
            async with connect(server.url) as client:
                ack = await client.send("counter/c", "add", {"n": 5})
                await server.rt.wait_handled("counter/c", ack.seq)
            human = await cli("inspect", "counter/c", "--url", server.url)
            machine = await cli("inspect", "counter/c", "--json", "--url", server.url)
    assert (human.returncode, machine.returncode) == (0, 0)
    assert lines(human.stdout) == [
        "actor       counter/c",
        "status      active",
        "mailbox     0",
        "cursor      1",
        "head        2",
        "restarts    0",
        "last_error  -",
        "state",
        "  {",
        '    "total": 5',
        "  }",
    ]
    assert json.loads(machine.stdout) == {
        "actor": "counter/c",
        "status": "active",
        "state": {"total": 5},
        "cursor": 1,
        "mailbox": 0,
        "head": 2,
        "restarts": 0,
        "last_error": None,
        "spec": None,
        "summary": None,
    }


async def test_stop_prints_the_final_status(tmp_path):
    with trio.fail_after(20):
        async with serving(tmp_path) as server:
            async with connect(server.url) as client:
                await client.spawn("box", name="b1")
            done = await cli("stop", "box/b1", "--url", server.url)
    assert (done.returncode, lines(done.stdout)) == (0, ["box/b1 stopped"])


async def test_tail_prints_stored_then_live_events_as_json_lines_until_ctrl_c(tmp_path):
    with trio.fail_after(20):
        async with serving(tmp_path) as server, connect(server.url) as client:
            await client.send("counter/a", "add")
            cmd = [*CALLBOARD, "tail", "counter/a", "--after", "0", "--json", "--url", server.url]
            proc = await trio.lowlevel.open_process(
                cmd, cwd=REPO, env=subprocess_env(), stdout=subprocess.PIPE
            )
            try:
                assert proc.stdout is not None
                out = Lines(proc.stdout)
                got = [json.loads(await out.next()) for _ in range(2)]
                await client.send("counter/a", "add", {"n": 4})
                got.append(json.loads(await out.next()))
                proc.send_signal(signal.SIGINT)
                code = await proc.wait()
            finally:
                proc.kill()
    assert code == 0
    assert [(e["actor"], e["seq"], e["type"], e["data"]) for e in got] == [
        ("counter/a", 1, "actor.started", {}),
        ("counter/a", 2, "counted", {"total": 1}),
        ("counter/a", 3, "counted", {"total": 5}),
    ]
    assert all(e["at"].endswith("Z") for e in got)


async def serve(data: Path, port: int) -> tuple[trio.Process, str]:
    """``callboard serve`` as a child; returns it and the URL from its first line."""
    cmd = [*CALLBOARD, "serve", "--port", str(port), "--data", str(data),
           "--kind", "tests.client_kinds:Counter", "--log-level", "warning"]  # fmt: skip
    proc = await trio.lowlevel.open_process(
        cmd, cwd=REPO, env=subprocess_env(), stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    first = await Lines(proc.stdout).next()
    return proc, first.split()[2]


async def test_tail_goes_on_across_a_sigkill_and_restart_of_serve_with_no_gap_or_duplicate(
    tmp_path,
):
    children: list[trio.Process] = []
    try:
        with trio.fail_after(40):
            server, url = await serve(tmp_path, 0)
            children.append(server)
            cmd = [*CALLBOARD, "tail", "counter/a", "--after", "0", "--json", "--url", url]
            tail = await trio.lowlevel.open_process(
                cmd, cwd=REPO, env=subprocess_env(), stdout=subprocess.PIPE
            )
            children.append(tail)
            assert tail.stdout is not None
            out = Lines(tail.stdout)
            async with connect(url) as client:
                for _ in range(2):
                    await client.send("counter/a", "add")
            got = [json.loads(await out.next()) for _ in range(3)]
            server.kill()
            assert await server.wait() == -signal.SIGKILL
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            server, again = await serve(tmp_path, port)
            children.append(server)
            assert again == url
            async with connect(url) as client:
                await client.send("counter/a", "add")
            got += [json.loads(await out.next()) for _ in range(2)]
    finally:
        for child in children:
            child.kill()
            with trio.move_on_after(5, shield=True):
                await child.wait()
    assert [(e["seq"], e["type"], e["data"]) for e in got] == [
        (1, "actor.started", {}),
        (2, "counted", {"total": 1}),
        (3, "counted", {"total": 2}),
        (4, "actor.started", {}),
        (5, "counted", {"total": 3}),
    ]


async def test_an_error_reply_exits_1_with_the_servers_sentence_on_stderr(tmp_path):
    with trio.fail_after(20):
        async with serving(tmp_path) as server:
            done = await cli("inspect", "box/nope", "--url", server.url)
    assert (done.returncode, done.stdout) == (1, b"")
    assert lines(done.stderr) == ["callboard: there is no actor at 'box/nope'"]


async def test_a_json_argument_that_does_not_parse_exits_2_before_connecting():
    with trio.fail_after(20):
        done = await cli("send", "counter/a", "add", "{oops", "--url", "ws://127.0.0.1:9/v1")
    assert (done.returncode, done.stdout) == (2, b"")
    assert "argument JSON: '{oops' is not valid JSON" in done.stderr.decode()


async def test_an_unreachable_gateway_exits_3_with_one_sentence_on_stderr():
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    await listeners[0].aclose()
    with trio.fail_after(20):
        done = await cli("ls", "--url", f"ws://127.0.0.1:{port}/v1")
    assert (done.returncode, done.stdout) == (3, b"")
    (line,) = lines(done.stderr)
    assert line.startswith(f"callboard: cannot connect to ws://127.0.0.1:{port}/v1: ")


async def test_the_url_and_token_come_from_the_environment(tmp_path):
    config = GatewayConfig(port=0, token="s3cret")
    with trio.fail_after(20):
        async with serving(tmp_path, config=config) as server:
            good = await cli("ls", CALLBOARD_URL=server.url, CALLBOARD_TOKEN="s3cret")
            bad = await cli("ls", CALLBOARD_URL=server.url, CALLBOARD_TOKEN="wrong")
    assert (good.returncode, lines(good.stdout)) == (0, ["no actors"])
    assert (bad.returncode, bad.stdout) == (1, b"")
    assert lines(bad.stderr)[0].startswith("callboard: wrong or missing token")


async def test_ctrl_c_during_a_one_shot_command_exits_130_without_a_traceback(tmp_path):
    # A server that takes the connection and never answers the handshake:
    # the command is then surely inside its work when the signal comes.
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    with trio.fail_after(30):
        cmd = [*CALLBOARD, "ping", "--url", f"ws://127.0.0.1:{port}/"]
        proc = await trio.lowlevel.open_process(
            cmd, cwd=REPO, env=subprocess_env(), stderr=subprocess.PIPE
        )
        try:
            async with await listener.accept() as stream:
                assert b"Upgrade" in await stream.receive_some()
                proc.send_signal(signal.SIGINT)
                code = await proc.wait()
            assert proc.stderr is not None
            stderr = await proc.stderr.receive_some()
        finally:
            proc.kill()
            await listener.aclose()
    assert (code, stderr) == (130, b"")


async def test_callboard_version_prints_the_version_and_exits_0():
    with trio.fail_after(20):
        done = await cli("--version")
    assert (done.returncode, done.stdout) == (0, f"callboard {callboard.__version__}\n".encode())


async def test_tail_after_a_negative_seq_is_bad_usage_exit_2():
    with trio.fail_after(20):
        done = await cli("tail", "counter/a", "--after", "-1")
    assert done.returncode == 2
    assert lines(done.stderr)[-1] == (
        "callboard tail: error: argument --after: must be a whole number >= 0, got '-1'"
    )
