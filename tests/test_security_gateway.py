"""Who gets in and what they may touch: the operator token, scoped client tokens,
the limiter of failed guesses and the activation quota, over real websockets."""

from __future__ import annotations

import logging
import stat
from concurrent.futures import ThreadPoolExecutor

import pytest
import trio
from gateway_wire import close_code, connect, open_gateway

from callboard.gateway import (
    GatewayConfig,
    add_client_token,
    ensure_operator_token,
    list_client_tokens,
    read_token,
    remove_client_token,
)
from callboard.gateway._access import _limited_as


async def test_a_gateway_with_no_token_given_makes_one_only_its_owner_can_read(tmp_path):
    data = tmp_path / "data"
    with trio.fail_after(10):
        async with open_gateway(data, GatewayConfig(port=0)) as (_, gateway):
            token_file = data / "token"
            token = read_token(token_file)
            async with connect(gateway.url, token=token, header_token=None) as client:
                assert await client.ok("ping") == {}
            async with connect(gateway.url, hello=False, header_token=None) as client:
                await client.send_frame({"op": "hello", "id": "h", "protocol": 1})
                refused = await client.receive()
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert len(token) >= 40
    assert gateway.operator_token == token
    assert refused["code"] == "unauthorized"


def test_the_operator_token_is_made_once_and_kept(tmp_path):
    first = read_token(ensure_operator_token(tmp_path / "data"))
    again = read_token(ensure_operator_token(tmp_path / "data"))
    assert first == again
    assert [p.name for p in (tmp_path / "data").iterdir()] == ["token"]


def test_an_empty_token_file_left_by_a_crash_is_replaced(tmp_path):
    (tmp_path / "token").write_text("")
    token = read_token(ensure_operator_token(tmp_path))
    assert token and stat.S_IMODE((tmp_path / "token").stat().st_mode) == 0o600


async def test_a_read_only_token_can_subscribe_and_inspect_but_not_send_spawn_or_stop(tmp_path):
    data = tmp_path / "data"
    viewer = add_client_token(data, "viewer", access="read", actors=["counter/*"])
    with trio.fail_after(10):
        async with open_gateway(data) as (_, gateway):
            async with connect(gateway.url) as operator:
                await operator.ok("send", to="counter/a", type="add")
            async with connect(gateway.url, token=viewer, header_token=viewer) as client:
                sub = await client.ok("subscribe", actor="counter/a", after=0)
                (started, counted) = await client.events(sub["sub"], 2)
                view = await client.ok("inspect", actor="counter/a")
                send = await client.request("send", to="counter/a", type="add")
                spawn = await client.request("spawn", kind="keeper", name="k", spec={})
                stop = await client.request("stop", actor="counter/a")
    assert (started["type"], counted["type"], view["state"]) == (
        "actor.started", "counted", {"count": 1}
    )  # fmt: skip
    for refused, verb in [(send, "send to"), (spawn, "spawn"), (stop, "stop")]:
        assert refused["code"] == "forbidden"
        assert refused["message"].startswith(f"the token 'viewer' (read access to counter/*) "
                                             f"may not {verb} ")  # fmt: skip


async def test_a_write_token_reaches_only_its_own_actors(tmp_path):
    data = tmp_path / "data"
    bot = add_client_token(data, "bot", access="write", actors=["counter/mine", "keeper"])
    with trio.fail_after(10):
        async with open_gateway(data) as (_, gateway):
            async with connect(gateway.url) as operator:
                await operator.ok("send", to="counter/theirs", type="add")
            async with connect(gateway.url, token=bot, header_token=bot) as client:
                mine = await client.ok("send", to="counter/mine", type="add")
                theirs = await client.request("send", to="counter/theirs", type="add")
                peek = await client.request("inspect", actor="counter/theirs")
                watch = await client.request("subscribe", actor="*")
                kept = await client.ok("spawn", kind="keeper", spec={})
                listed = await client.ok("list")
    assert mine == {"seq": 1, "duplicate": False}
    assert [theirs["code"], peek["code"], watch["code"]] == ["forbidden"] * 3
    assert kept["actor"].startswith("keeper/")
    assert sorted(a["actor"] for a in listed["actors"]) == sorted(["counter/mine", kept["actor"]])


async def test_a_removed_client_token_is_refused_at_its_next_hello(tmp_path):
    data = tmp_path / "data"
    bot = add_client_token(data, "bot", access="read", actors=["*"])
    with trio.fail_after(10):
        async with open_gateway(data) as (_, gateway):
            async with connect(gateway.url, token=bot, header_token=bot) as client:
                assert await client.ok("ping") == {}
            remove_client_token(data, "bot")
            async with connect(gateway.url, hello=False, header_token=bot) as client:
                await client.send_frame({"op": "hello", "id": "h", "protocol": 1})
                refused = await client.receive()
    assert refused["code"] == "unauthorized"


async def _guess(url: str, token: str) -> dict:
    async with connect(url, hello=False, header_token=None) as client:
        await client.send_frame({"op": "hello", "id": "h", "protocol": 1, "token": token})
        return await client.receive()


async def test_failed_authentications_are_limited_per_peer_and_logged_once_per_burst(
    tmp_path, caplog
):
    config = GatewayConfig(port=0, token="right", auth_burst=3, auth_rate=0.001)
    caplog.set_level(logging.WARNING, logger="callboard.gateway")
    with trio.fail_after(20):
        async with open_gateway(tmp_path / "data", config) as (_, gateway):
            answers = [await _guess(gateway.url, f"guess-{i}") for i in range(20)]
            # Shut out: even the right token is not looked at now.
            right = await _guess(gateway.url, "right")
    codes = [a["code"] for a in answers]
    assert codes == ["unauthorized"] * 3 + ["rate_limited"] * 17
    assert answers[3]["message"].startswith("too many failed authentications from 127.0.0.1")
    assert right["code"] == "rate_limited"
    refusals = [r for r in caplog.records if "refused 127.0.0.1" in r.getMessage()]
    assert len(refusals) == 2  # the burst's first guess, and the one that used it up


async def test_a_peer_regains_its_guesses_as_time_passes(tmp_path, autojump_clock):
    config = GatewayConfig(port=0, token="right", auth_burst=2, auth_rate=0.5)
    with trio.fail_after(60):
        async with open_gateway(tmp_path / "data", config) as (_, gateway):
            first = [(await _guess(gateway.url, "wrong"))["code"] for _ in range(3)]
            await trio.sleep(4)  # the virtual clock: two guesses regained
            later = await _guess(gateway.url, "right")
    assert first == ["unauthorized", "unauthorized", "rate_limited"]
    assert later["op"] == "welcome"


async def test_a_token_creates_at_most_its_activation_quota_of_new_actors(tmp_path):
    config = GatewayConfig(port=0, token="t", activation_quota=3)
    with trio.fail_after(10):
        async with open_gateway(tmp_path / "data", config) as (rt, gateway):
            async with connect(gateway.url, token="t", header_token="t") as client:
                made = [await client.request("send", to=f"counter/{n}", type="add") for n in "abcd"]
                existing = await client.ok("send", to="counter/a", type="add")
                spawn = await client.request("spawn", kind="keeper", spec={})
            listed = await rt.list()
    assert [r["op"] for r in made] == ["ok", "ok", "ok", "error"]
    assert made[3]["code"] == spawn["code"] == "rate_limited"
    assert "activation_quota (--activation-quota)" in made[3]["message"]
    assert existing == {"seq": 2, "duplicate": False}
    assert sorted(a.actor for a in listed) == ["counter/a", "counter/b", "counter/c"]


@pytest.mark.parametrize("name", ["operator", "has space", ""])
def test_a_client_token_name_must_be_plain_and_not_operator(tmp_path, name):
    with pytest.raises(ValueError, match="name"):
        add_client_token(tmp_path, name, access="read", actors=["*"])


async def test_a_token_that_globs_into_a_kind_cannot_subscribe_to_the_whole_kind(tmp_path):
    data = tmp_path / "data"
    narrow = add_client_token(data, "narrow", access="read", actors=["counter/?"])
    with trio.fail_after(10):
        async with open_gateway(data) as (_, gateway):
            async with connect(gateway.url, token=narrow, header_token=narrow) as client:
                whole = await client.request("subscribe", actor="counter/*")
                one = await client.ok("subscribe", actor="counter/a")
    assert whole["code"] == "forbidden"
    assert "sub" in one


async def test_a_token_removed_while_its_connection_is_open_is_refused_at_its_next_request(
    tmp_path,
):
    data = tmp_path / "data"
    app = add_client_token(data, "app", access="write", actors=["counter/*"])
    with trio.fail_after(10):
        async with open_gateway(data) as (_, gateway):
            async with connect(gateway.url, token=app, header_token=app) as client:
                before = await client.ok("send", to="counter/a", type="add")
                remove_client_token(data, "app")
                after = await client.request("send", to="counter/a", type="add")
                code = await close_code(client)
    assert before == {"seq": 1, "duplicate": False}
    assert (after["code"], after["message"]) == (
        "unauthorized", "the token 'app' was revoked; this connection is closed"
    )  # fmt: skip
    assert code == 1008


def test_client_tokens_added_and_removed_at_once_all_take_effect(tmp_path):
    add_client_token(tmp_path, "gone", access="read", actors=["*"])

    def add(n: int) -> None:
        add_client_token(tmp_path, f"t{n}", access="read", actors=["*"])

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(add, n) for n in range(16)]
        futures.append(pool.submit(remove_client_token, tmp_path, "gone"))
        for future in futures:
            future.result()
    names = sorted(t.name for t in list_client_tokens(tmp_path))
    assert names == sorted(f"t{n}" for n in range(16))


@pytest.mark.parametrize("peer", ["127.0.0.1", "127.0.1.5", "::1"])
def test_every_loopback_address_counts_its_failed_guesses_as_one_peer(peer):
    assert _limited_as(peer) == "loopback"
    assert _limited_as("192.0.2.7") == "192.0.2.7"
