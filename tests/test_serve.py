"""`callboard serve` as a real subprocess on loopback port 0 with a tmp data
directory: its one line, its signals, its refusals, its metrics, and a
subscriber that resumes across a SIGKILL and a restart on the same data."""

from __future__ import annotations

import json
import re
import signal
import sys
import urllib.request

import pytest
import trio
from gateway_wire import connect
from serve_helpers import LINE, connect_to, serving
from serve_helpers import serve_env as _env
from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State
from websockets.uri import parse_uri


async def test_serve_prints_one_line_answers_and_exits_0_on_sigterm_releasing_the_data(
    tmp_path,
):
    data = tmp_path / "data"
    with trio.fail_after(20):
        async with serving(data) as served:
            assert LINE.match(served.line).group(2) == str(data)
            async with connect_to(served) as client:
                assert await client.ok("send", to="counter/a", type="add") == {
                    "seq": 1, "duplicate": False,
                }  # fmt: skip
                served.process.send_signal(signal.SIGTERM)
                with pytest.raises(ConnectionClosed) as closed:
                    while True:
                        await client.receive()
            assert await served.process.wait() == 0
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
        async with serving(data) as again:  # the data directory was released
            async with connect_to(again) as client:
                # The acked message is kept; if the stop came before it was
                # handled, this server handles it now.
                sub = await client.ok("subscribe", actor="counter/a", after=0)
                while (event := (await client.events(sub["sub"], 1))[0])["type"] != "counted":
                    pass
                view = await client.ok("inspect", actor="counter/a")
            again.process.send_signal(signal.SIGINT)
            assert await again.process.wait() == 0
    assert event["data"] == {"count": 1}
    assert (view["state"], view["cursor"], view["mailbox"]) == ({"count": 1}, 1, 0)


async def test_a_non_loopback_host_without_a_token_is_refused_naming_how_to_set_one(tmp_path):
    data = tmp_path / "data"
    with trio.fail_after(20):
        result = await trio.run_process(
            [sys.executable, "-m", "callboard", "serve", "--host", "0.0.0.0", "--port", "0",
             "--data", str(data)],
            capture_stdout=True, capture_stderr=True, check=False, env=_env(),
        )  # fmt: skip
    assert result.returncode == 2
    assert result.stdout == b""
    assert b"--token TOKEN or set CALLBOARD_TOKEN" in result.stderr
    assert not data.exists()


async def test_a_token_from_the_environment_is_required_by_the_server(tmp_path):
    with trio.fail_after(20):
        async with serving(tmp_path / "data", env=_env(CALLBOARD_TOKEN="t0k")) as served:
            async with connect(served.url, hello=False) as client:
                await client.send_frame({"op": "hello", "id": "h", "protocol": 1})
                refused = await client.receive()
            async with connect(served.url, token="t0k", header_token=None) as client:
                assert await client.ok("ping") == {}
    assert refused["code"] == "unauthorized"


async def test_a_subscriber_resumes_across_sigkill_and_restart_with_no_gap_and_no_duplicate(
    tmp_path,
):
    data = tmp_path / "data"
    seen: list[dict] = []
    with trio.fail_after(30):
        async with serving(data) as first:
            async with connect_to(first) as writer, connect_to(first) as reader:
                sub = await reader.ok("subscribe", actor="counter/a", after=0)

                async def write_until_killed() -> None:
                    try:
                        while True:
                            await writer.ok("send", to="counter/a", type="add")
                    except ConnectionClosed:
                        pass

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(write_until_killed)
                    while len(seen) < 20:
                        seen.extend(await reader.events(sub["sub"], 1))
                    first.process.kill()  # mid-stream: sends and commits under way
                    try:
                        while True:
                            seen.extend(await reader.events(sub["sub"], 1))
                    except ConnectionClosed:
                        pass
            assert await first.process.wait() == -signal.SIGKILL
        async with serving(data) as second:
            async with connect_to(second) as client:
                resumed = await client.ok("subscribe", actor="counter/a", after=seen[-1]["seq"])
                last = await client.ok("send", to="counter/a", type="add")
                while not (seen[-1]["type"] == "counted"
                           and seen[-1]["data"]["count"] == last["seq"]):  # fmt: skip
                    seen.extend(await client.events(resumed["sub"], 1))
    assert [e["seq"] for e in seen] == list(range(1, len(seen) + 1))
    counts = [e["data"]["count"] for e in seen if e["type"] == "counted"]
    assert counts == list(range(1, last["seq"] + 1))  # every acked message handled once


async def test_serve_exposes_prometheus_metrics_on_its_own_port(tmp_path):
    with trio.fail_after(20):
        async with serving(tmp_path / "data", "--metrics-port", "0") as served:
            metrics_url = re.search(r"metrics at (http://\S+/metrics)", served.line).group(1)
            async with connect_to(served) as client:
                await client.ok("send", to="counter/a", type="add")
                await client.ok("subscribe", actor="counter/a")
                scrape = urllib.request.Request(
                    metrics_url, headers={"Authorization": f"Bearer {served.token}"}
                )
                page = await trio.to_thread.run_sync(
                    lambda: urllib.request.urlopen(scrape, timeout=5).read().decode()
                )
    samples = dict(line.rsplit(" ", 1) for line in page.splitlines() if not line.startswith("#"))
    assert samples["callboard_messages_accepted_total"] == "1.0"
    assert samples["callboard_gateway_connections"] == "1.0"
    assert samples["callboard_subscribers"] == "1.0"
    assert float(samples["callboard_store_commits_total"]) >= 1


async def test_a_second_sigint_exits_at_once_while_the_graceful_stop_waits(tmp_path):
    with trio.fail_after(20):
        async with serving(tmp_path / "data") as served:
            # A client that says hello and then reads nothing, not even the
            # close frame: the graceful stop waits for its close handshake.
            stream = await trio.open_tcp_stream("127.0.0.1", int(served.url.split(":")[2][:-3]))
            protocol = ClientProtocol(parse_uri(served.url))
            protocol.send_request(protocol.connect())
            for chunk in protocol.data_to_send():
                await stream.send_all(chunk)
            while protocol.state is not State.OPEN:
                protocol.receive_data(await stream.receive_some())
            hello = {"op": "hello", "id": "h", "protocol": 1, "token": served.token}
            protocol.send_text(json.dumps(hello).encode())
            for chunk in protocol.data_to_send():
                await stream.send_all(chunk)
            served.process.send_signal(signal.SIGINT)
            await served.wait_logged("SIGINT: stopping gracefully")
            served.process.send_signal(signal.SIGINT)
            assert await served.process.wait() == 130
            await stream.aclose()
    assert any("SIGINT again: exiting at once" in line for line in served.stderr)


async def test_a_store_that_cannot_open_ends_serve_with_one_line_not_a_traceback(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "callboard.sqlite3").write_bytes(b"not a database, as a full disk leaves none" * 50)
    with trio.fail_after(20):
        result = await trio.run_process(
            [sys.executable, "-m", "callboard", "serve", "--data", str(data), "--port", "0"],
            capture_stdout=True, capture_stderr=True, check=False, env=_env(), cwd=tmp_path,
        )  # fmt: skip
    last = result.stderr.decode().splitlines()[-1]
    assert result.returncode == 1
    assert last.startswith(f"callboard serve: cannot open the store in {str(data)!r}: ")
    assert "Traceback" not in result.stderr.decode()
