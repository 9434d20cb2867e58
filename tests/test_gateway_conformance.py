"""The gateway against docs/protocol.md, driven by the `websockets` library: the
connection (hello, token, Origin), then every op. Subscriptions are in
test_gateway_subscriptions.py, error codes in test_gateway_errors.py.

Loopback port 0 only; every test is bounded by ``trio.fail_after``; order is
kept by replies and events, never by sleeping.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from credentials import TEST_TOKEN
from gateway_kinds import KINDS
from gateway_wire import close_code, connect, open_gateway
from websockets.exceptions import InvalidStatus

import callboard
from callboard.gateway import Gateway, GatewayConfig, serve_gateway

TOKEN = "s3cret-token"


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[callboard.Runtime, Gateway]]:
    async with open_gateway(tmp_path / "data") as served:
        yield served


# -- the connection ----------------------------------------------------------------


async def test_hello_is_answered_with_welcome_echoing_its_id(served):
    _, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url, hello=False) as client:
            await client.send_frame({"op": "hello", "id": "1", "protocol": 1, "client": "t/1"})
            welcome = await client.receive()
    assert welcome == {"op": "welcome", "id": "1", "protocol": 1, "server": "callboard/0.1.0"}


async def test_an_op_before_hello_is_unauthorized_and_closes_the_connection(served):
    _, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url, hello=False) as client:
            await client.send_frame({"op": "ping", "id": "p"})
            reply = await client.receive()
            code = await close_code(client)
    assert (reply["op"], reply["id"], reply["code"]) == ("error", "p", "unauthorized")
    assert code == 1008


async def test_a_second_hello_is_a_bad_request(served):
    _, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            reply = await client.request("hello", protocol=1)
            assert (await client.request("ping"))["op"] == "ok"
    assert reply["code"] == "bad_request"


async def test_no_hello_within_the_handshake_timeout_closes_with_1008(tmp_path):
    config = GatewayConfig(port=0, token=TEST_TOKEN, handshake_timeout=0.2)
    with trio.fail_after(5):
        async with open_gateway(tmp_path / "data", config) as (_, gateway):
            async with connect(gateway.url, hello=False) as client:
                assert await close_code(client) == 1008


@pytest.mark.parametrize("where", ["header", "hello"])
async def test_the_token_is_accepted_from_the_header_or_from_hello(tmp_path, where):
    config = GatewayConfig(port=0, token=TOKEN)
    presented = (
        {"header_token": TOKEN, "token": None}
        if where == "header"
        else {"token": TOKEN, "header_token": None}
    )
    with trio.fail_after(5):
        async with open_gateway(tmp_path / "data", config) as (_, gateway):
            async with connect(gateway.url, **presented) as client:
                assert await client.ok("ping") == {}


@pytest.mark.parametrize(
    "presented",
    [{}, {"token": "wrong"}, {"header_token": "wrong"}, {"header_token": TOKEN, "token": "wrong"}],
    ids=["missing", "wrong-in-hello", "wrong-in-header", "right-header-wrong-hello"],
)
async def test_a_wrong_or_missing_token_is_unauthorized_and_closed_with_1008(tmp_path, presented):
    config = GatewayConfig(port=0, token=TOKEN)
    with trio.fail_after(5):
        async with open_gateway(tmp_path / "data", config) as (_, gateway):
            header = presented.get("header_token")
            async with connect(gateway.url, hello=False, header_token=header) as client:
                hello = {"op": "hello", "id": "h", "protocol": 1}
                if "token" in presented:
                    hello["token"] = presented["token"]
                await client.send_frame(hello)
                reply = await client.receive()
                code = await close_code(client)
    assert (reply["op"], reply["id"], reply["code"]) == ("error", "h", "unauthorized")
    assert code == 1008


async def test_a_foreign_origin_is_refused_with_http_403_before_the_upgrade(served):
    _, gateway = served
    with trio.fail_after(5), pytest.raises(InvalidStatus) as refused:
        async with connect(gateway.url, origin="http://evil.example"):
            pass  # pragma: no cover
    assert refused.value.response.status_code == 403
    assert gateway.statistics().connections_total == 0


async def test_the_servers_own_origins_and_configured_ones_are_allowed(tmp_path):
    config = GatewayConfig(port=0, token=TEST_TOKEN, allowed_origins=["https://app.example"])
    with trio.fail_after(5):
        async with open_gateway(tmp_path / "data", config) as (_, gateway):
            port = gateway.url.rsplit(":", 1)[1].split("/")[0]
            for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}",
                           "https://app.example"):  # fmt: skip
                async with connect(gateway.url, origin=origin) as client:
                    assert await client.ok("ping") == {}


async def test_a_path_other_than_v1_is_refused_with_http_404(served):
    _, gateway = served
    with trio.fail_after(5), pytest.raises(InvalidStatus) as refused:
        async with connect(gateway.url.replace("/v1", "/v2")):
            pass  # pragma: no cover
    assert refused.value.response.status_code == 404


async def test_connections_over_the_limit_are_refused_with_http_503(tmp_path):
    config = GatewayConfig(port=0, token=TEST_TOKEN, max_connections=1)
    with trio.fail_after(5):
        async with open_gateway(tmp_path / "data", config) as (_, gateway):
            async with connect(gateway.url):
                with pytest.raises(InvalidStatus) as refused:
                    async with connect(gateway.url):
                        pass  # pragma: no cover
    assert refused.value.response.status_code == 503


async def test_the_default_bind_is_loopback_on_port_7341(tmp_path):
    assert (GatewayConfig().host, GatewayConfig().port, GatewayConfig().token) == (
        "127.0.0.1", 7341, None,
    )  # fmt: skip
    with trio.fail_after(5):
        async with open_gateway(tmp_path / "data", GatewayConfig(port=0, token=TEST_TOKEN)) as (
            _,
            gateway,
        ):
            assert gateway.url.startswith("ws://127.0.0.1:")
            assert gateway.url.endswith("/v1")


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "192.168.1.10", "example.com"])
def test_binding_beyond_loopback_without_a_token_is_refused_naming_how_to_set_one(host):
    with pytest.raises(ValueError, match=r"pass --token TOKEN or set CALLBOARD_TOKEN"):
        GatewayConfig(host=host)
    assert GatewayConfig(host=host, token=TOKEN).host == host


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_hosts_need_no_token(host):
    assert GatewayConfig(host=host).token is None


async def serve_until_stopped(
    rt: callboard.Runtime, stop: trio.Event, *, task_status: trio.TaskStatus[str]
) -> None:
    """`serve_gateway` until ``stop`` is set: stopping it cancels only the gateway,
    not the test's own code (as cancelling the nursery around both would)."""
    async with trio.open_nursery() as nursery:
        task_status.started(
            await nursery.start(serve_gateway, rt, GatewayConfig(port=0, token=TEST_TOKEN))
        )
        await stop.wait()
        nursery.cancel_scope.cancel()


async def test_stopping_the_gateway_closes_connections_with_1001(tmp_path):
    stop = trio.Event()
    with trio.fail_after(5):
        async with callboard.open_runtime(tmp_path / "data") as rt:
            async with trio.open_nursery() as nursery:
                url = await nursery.start(serve_until_stopped, rt, stop)
                async with connect(url) as client:
                    assert await client.ok("ping") == {}
                    stop.set()
                    code = await close_code(client)
    assert code == 1001


async def test_stopping_answers_every_request_it_read_before_closing_with_1001(tmp_path):
    stop = trio.Event()
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path / "data", kinds=KINDS) as rt:
            async with trio.open_nursery() as nursery:
                url = await nursery.start(serve_until_stopped, rt, stop)
                async with connect(url) as client:
                    for i in range(200):
                        await client.send_frame({"op": "send", "id": f"s{i}", "to": "counter/a",
                                                 "type": "add"})  # fmt: skip
                    acks = [await client.receive()]
                    stop.set()  # stop while sends are in flight
                    code = await close_code(client, into=acks)
            stored = await rt.inspect("counter/a")
    assert code == 1001
    assert {a["op"] for a in acks} == {"ok"}
    assert sorted(a["seq"] for a in acks) == list(range(1, len(acks) + 1))
    assert stored.cursor + stored.mailbox == len(acks)  # nothing stored went unanswered


# -- the ops -----------------------------------------------------------------------


async def test_ping_is_answered_ok(served):
    _, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            assert await client.request("ping") == {"op": "ok", "id": "r1"}


async def test_pipelined_requests_are_each_answered_with_their_own_id(served):
    _, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            for i in range(20):
                await client.send_frame({"op": "send", "id": f"s{i}", "to": f"counter/c{i % 3}",
                                         "type": "add"})  # fmt: skip
            replies = [await client.receive() for _ in range(20)]
    assert sorted(r["id"] for r in replies) == sorted(f"s{i}" for i in range(20))
    assert {r["op"] for r in replies} == {"ok"}


async def test_send_is_acknowledged_with_its_mailbox_seq_and_a_key_makes_it_idempotent(served):
    rt, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            first = await client.ok("send", to="counter/a", type="add", body={"n": 1}, key="k-1")
            again = await client.ok("send", to="counter/a", type="add", body={"n": 1}, key="k-1")
            other = await client.ok("send", to="counter/a", type="add", body={"n": 1})
            await rt.wait_handled("counter/a", 2)
    assert (first, again, other) == (
        {"seq": 1, "duplicate": False}, {"seq": 1, "duplicate": True},
        {"seq": 2, "duplicate": False},
    )  # fmt: skip
    assert (await rt.inspect("counter/a")).state == {"count": 2}
    assert gateway.statistics().sends_accepted_total == 2


async def test_spawn_creates_then_reports_existed_then_refuses_another_spec(served):
    _, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            created = await client.ok("spawn", kind="keeper", name="k1", spec={"colour": "red"})
            existed = await client.ok("spawn", kind="keeper", name="k1", spec={"colour": "red"})
            conflict = await client.request("spawn", kind="keeper", name="k1", spec={"c": "b"})
    assert created == {"actor": "keeper/k1", "existed": False}
    assert existed == {"actor": "keeper/k1", "existed": True}
    assert (conflict["op"], conflict["code"]) == ("error", "bad_request")
    assert "different spec" in conflict["message"]


async def test_spawn_without_a_name_generates_one(served):
    _, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            reply = await client.ok("spawn", kind="keeper", spec={})
    kind, name = reply["actor"].split("/")
    assert (kind, len(name), reply["existed"]) == ("keeper", 26, False)


async def test_list_reports_every_actor_and_filters_by_kind_and_status(served):
    rt, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            await client.ok("send", to="counter/a", type="add")
            await client.ok("spawn", kind="keeper", name="k1")
            await client.ok("spawn", kind="keeper", name="k2")
            await client.ok("stop", actor="keeper/k2")
            await rt.wait_handled("counter/a", 1)
            everything = await client.ok("list")
            keepers = await client.ok("list", kind="keeper")
            stopped = await client.ok("list", status="stopped")
    row = {"mailbox": 0, "restarts": 0}
    assert everything["actors"] == [
        {"actor": "counter/a", "status": "active", **row},
        {"actor": "keeper/k1", "status": "active", **row},
        {"actor": "keeper/k2", "status": "stopped", **row},
    ]
    assert [r["actor"] for r in keepers["actors"]] == ["keeper/k1", "keeper/k2"]
    assert [r["actor"] for r in stopped["actors"]] == ["keeper/k2"]


async def test_a_list_longer_than_list_limit_comes_in_pages_joined_by_next(tmp_path):
    config = GatewayConfig(port=0, token=TEST_TOKEN, list_limit=2)
    with trio.fail_after(10):
        async with open_gateway(tmp_path / "data", config) as (rt, gateway):
            for name in ("k1", "k2", "k3", "k4", "k5"):
                await rt.spawn("keeper", {}, name)
            async with connect(gateway.url) as client:
                first = await client.ok("list", kind="keeper")
                second = await client.ok("list", kind="keeper", after=first["next"])
                last = await client.ok("list", kind="keeper", after=second["next"])
                one = await client.ok("list", kind="keeper", limit=1)
                capped = await client.ok("list", kind="keeper", limit=50)
    names = [[r["actor"] for r in page["actors"]] for page in (first, second, last)]
    assert names == [["keeper/k1", "keeper/k2"], ["keeper/k3", "keeper/k4"], ["keeper/k5"]]
    assert (first["next"], second["next"], "next" in last) == ("keeper/k2", "keeper/k4", False)
    assert ([r["actor"] for r in one["actors"]], one["next"]) == (["keeper/k1"], "keeper/k1")
    assert (len(capped["actors"]), capped["next"]) == (2, "keeper/k2")


async def test_inspect_reports_the_committed_state_and_its_bookkeeping(served):
    rt, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            await client.ok("send", to="counter/a", type="add", body={"n": 2})
            await client.ok("send", to="counter/a", type="add", body={"n": 5})
            await rt.wait_handled("counter/a", 2)
            view = await client.ok("inspect", actor="counter/a")
    assert view == {
        "actor": "counter/a", "kind": "counter", "status": "active", "state": {"count": 7},
        "cursor": 2, "mailbox": 0, "head": 3, "restarts": 0, "last_error": None,
        "spec": None, "summary": None,
    }  # fmt: skip


async def test_stop_answers_once_the_actor_has_stopped(served):
    rt, gateway = served
    with trio.fail_after(5):
        async with connect(gateway.url) as client:
            await client.ok("spawn", kind="keeper", name="k1")
            stopped = await client.ok("stop", actor="keeper/k1")
            assert (await rt.inspect("keeper/k1")).status == "stopped"
            again = await client.ok("stop", actor="keeper/k1")
    assert stopped == again == {"actor": "keeper/k1", "status": "stopped"}
