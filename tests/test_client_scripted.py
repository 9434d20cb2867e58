"""`callboard.client` against a scripted endpoint: what the real server cannot do on cue.

The endpoint is the one fake the house style allows (a transport): each
test writes the server's every move, to drop a connection with a request in
flight, answer out of order, or use an error code the real server rarely
or never sends.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing
from client_helpers import receive, reply, scripted, welcome

import callboard
from callboard.client import (
    Backoff,
    ConnectionLost,
    ProtocolError,
    ServerError,
    connect,
)

FAST = Backoff(first=0.01, cap=0.1)


async def test_replies_that_arrive_out_of_order_reach_their_own_requests():
    async def script(ws, n):
        await welcome(ws)
        first, second = await receive(ws), await receive(ws)
        for request in (second, first):
            row = {"actor": f"{request['kind']}/x", "status": "idle", "mailbox": 0, "restarts": 0}
            await reply(ws, {"op": "ok", "id": request["id"], "actors": [row]})
        await ws.get_message()

    results: dict[str, list[callboard.ActorInfo]] = {}

    async def ask(client, kind):
        results[kind] = await client.list(kind=kind)

    with trio.fail_after(10):
        async with scripted(script) as url, connect(url) as client:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask, client, "alpha")
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(ask, client, "beta")
    assert {k: [a.actor for a in v] for k, v in results.items()} == {
        "alpha": ["alpha/x"],
        "beta": ["beta/x"],
    }


async def test_a_send_whose_connection_drops_before_the_reply_raises_connection_lost():
    async def script(ws, n):
        await welcome(ws)
        if n == 1:
            await receive(ws)  # the send: dropped without a reply
            return
        request = await receive(ws)
        await reply(ws, {"op": "ok", "id": request["id"]})
        await ws.get_message()

    with trio.fail_after(10):
        async with scripted(script) as url, connect(url, reconnect=FAST) as client:
            with pytest.raises(ConnectionLost, match="may or may not have been applied") as caught:
                await client.send("counter/a", "add")
            # The client reconnected by itself: the next request goes through.
            await client.ping()
    assert caught.value.retryable is True


async def test_a_ping_whose_connection_drops_is_repeated_on_the_next_connection():
    seen: list[tuple[int, str]] = []

    async def script(ws, n):
        await welcome(ws)
        request = await receive(ws)
        seen.append((n, request["op"]))
        if n == 2:
            await reply(ws, {"op": "ok", "id": request["id"]})
            await ws.get_message()

    with trio.fail_after(10):
        async with scripted(script) as url, connect(url, reconnect=FAST) as client:
            await client.ping()
    assert seen == [(1, "ping"), (2, "ping")]


async def test_without_reconnect_a_lost_connection_fails_even_idempotent_requests():
    async def script(ws, n):
        await welcome(ws)
        await receive(ws)  # the ping: dropped without a reply

    with trio.fail_after(10):
        async with scripted(script) as url, connect(url, reconnect=None) as client:
            with pytest.raises(ConnectionLost, match="was lost before the reply to 'ping'"):
                await client.ping()
            with pytest.raises(ConnectionLost, match=r"^lost the connection to ws://\S+: the ser"):
                await client.list()


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("unavailable", callboard.StoreUnavailable),
        ("internal", ServerError),
        ("teapot", ServerError),
    ],
)
async def test_an_error_code_the_real_server_rarely_sends_still_maps_to_its_error(code, error):
    async def script(ws, n):
        await welcome(ws)
        request = await receive(ws)
        message = f"scripted {code}"
        await reply(ws, {"op": "error", "id": request["id"], "code": code, "message": message})
        await ws.get_message()

    with trio.fail_after(10):
        async with scripted(script) as url, connect(url) as client:
            with pytest.raises(error, match=f"^scripted {code}$") as caught:
                await client.ping()
    assert caught.value.code == code


async def test_a_server_that_speaks_another_protocol_version_is_refused():
    async def script(ws, n):
        hello = await receive(ws)
        await reply(ws, {"op": "welcome", "id": hello["id"], "protocol": 2, "server": "future"})
        await ws.get_message()

    with trio.fail_after(10):
        async with scripted(script) as url:
            with pytest.raises(ProtocolError, match="speaks protocol 2; this client speaks 1"):
                async with connect(url):
                    pass


async def test_hello_carries_the_client_name_and_the_token_travels_in_the_header():
    hellos: list[dict] = []

    async def script(ws, n):
        hellos.append(await welcome(ws))
        await ws.get_message()

    with trio.fail_after(10):
        async with scripted(script) as url, connect(url, "tok", client_name="me/1") as client:
            assert client.connected
    assert hellos == [{"op": "hello", "id": "0", "protocol": 1, "client": "me/1"}]
