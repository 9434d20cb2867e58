"""`callboard.client` against the real gateway in this process: every op, the
error codes the server sends, and subscriptions that outlive a connection.

What the real server cannot be made to do on cue is in
``test_client_scripted.py``.
"""

from __future__ import annotations

import re
import time

import pytest
import trio
import trio.testing
from client_helpers import KINDS, Server, serving
from credentials import TEST_TOKEN

import callboard
from callboard.client import (
    Backoff,
    ConnectionFailed,
    RateLimited,
    TooLarge,
    Unauthorized,
    connect,
)
from callboard.gateway import GatewayConfig

FAST = Backoff(first=0.01, cap=0.1)


def seqs(events: list[callboard.Event]) -> list[int | None]:
    return [e.seq for e in events]


async def take(events: callboard.client.EventStream, n: int) -> list[callboard.Event]:
    return [await anext(events) for _ in range(n)]


# -- every op ----------------------------------------------------------------------------


async def test_send_returns_the_durable_seq_and_a_repeated_key_is_acknowledged_as_duplicate(
    tmp_path,
):
    with trio.fail_after(10):
        async with serving(tmp_path) as server, connect(server.url) as client:
            first = await client.send("counter/a", "add", {"n": 2}, key="k1")
            again = await client.send("counter/a", "add", {"n": 2}, key="k1")
            other = await client.send("counter/a", "add")
    assert (first, again, other) == (
        callboard.Ack(1, False),
        callboard.Ack(1, True),
        callboard.Ack(2, False),
    )


async def test_spawn_returns_the_address_and_whether_it_already_existed(tmp_path):
    with trio.fail_after(10):
        async with serving(tmp_path) as server, connect(server.url) as client:
            new = await client.spawn("box", {"label": "x"}, name="b1")
            same = await client.spawn("box", {"label": "x"}, name="b1")
            generated = await client.spawn("box")
    assert (new, new.existed) == ("box/b1", False)
    assert (same, same.existed) == ("box/b1", True)
    assert isinstance(new, callboard.Address) and isinstance(same, callboard.Address)
    assert (generated.kind, generated.existed) == ("box", False)
    assert generated != "box/b1"


async def test_list_gives_every_actor_and_filters_by_kind_and_status(tmp_path):
    with trio.fail_after(10):
        async with serving(tmp_path) as server, connect(server.url) as client:
            await client.spawn("box", name="b1")
            await client.spawn("box", name="b2")
            await client.stop("box/b2")
            ack = await client.send("counter/c", "add")
            await server.rt.wait_handled("counter/c", ack.seq)
            everyone = await client.list()
            boxes = await client.list(kind="box")
            stopped = await client.list(status="stopped")
    info = callboard.ActorInfo
    assert sorted(everyone, key=lambda a: a.actor) == [
        info("box/b1", "active", 0, 0),
        info("box/b2", "stopped", 0, 0),
        info("counter/c", "active", 0, 0),
    ]
    assert sorted(a.actor for a in boxes) == ["box/b1", "box/b2"]
    assert stopped == [info("box/b2", "stopped", 0, 0)]


async def test_list_reads_every_page_of_a_list_longer_than_the_servers_limit(tmp_path):
    config = GatewayConfig(port=0, token=TEST_TOKEN, list_limit=2)
    with trio.fail_after(10):
        async with serving(tmp_path, config=config) as server, connect(server.url) as client:
            for n in range(5):
                await client.spawn("box", name=f"b{n}")
            await client.stop("box/b3")
            boxes = await client.list(kind="box")
            stopped = await client.list(kind="box", status="stopped")
    assert [(a.actor, a.status) for a in boxes] == [
        ("box/b0", "active"), ("box/b1", "active"), ("box/b2", "active"),
        ("box/b3", "stopped"), ("box/b4", "active"),
    ]  # fmt: skip
    assert [a.actor for a in stopped] == ["box/b3"]


async def test_inspect_returns_the_committed_state_and_its_bookkeeping(tmp_path):
    with trio.fail_after(10):
        async with serving(tmp_path) as server, connect(server.url) as client:
            ack = await client.send("counter/c", "add", {"n": 5})
            await server.rt.wait_handled("counter/c", ack.seq)
            view = await client.inspect("counter/c")
    assert view == callboard.ActorView(
        actor="counter/c",
        kind="counter",
        status="active",
        state={"total": 5},
        cursor=1,
        mailbox=0,
        head=2,
        restarts=0,
        last_error=None,
    )


async def test_stop_returns_the_final_status_once_the_actor_has_stopped(tmp_path):
    with trio.fail_after(10):
        async with serving(tmp_path) as server, connect(server.url) as client:
            await client.spawn("box", name="b1")
            status = await client.stop("box/b1")
            view = await client.inspect("box/b1")
    assert (status, view.status) == ("stopped", "stopped")


async def test_ping_returns_the_round_trip_time(tmp_path):
    with trio.fail_after(10):
        async with serving(tmp_path) as server, connect(server.url) as client:
            seconds = await client.ping()
    assert 0 <= seconds < 10


async def test_subscribe_after_zero_replays_the_stored_events_then_the_live_ones(tmp_path):
    with trio.fail_after(10):
        async with serving(tmp_path) as server, connect(server.url) as client:
            await client.send("counter/a", "add")
            ack = await client.send("counter/a", "add")
            await server.rt.wait_handled("counter/a", ack.seq)
            async with client.subscribe("counter/a", after=0) as events:
                got = await take(events, 3)
                await client.send("counter/a", "add")
                got += await take(events, 1)
                last = events.last
    assert [(e.actor, e.seq, e.type, e.data) for e in got] == [
        ("counter/a", 1, "actor.started", {}),
        ("counter/a", 2, "counted", {"total": 1}),
        ("counter/a", 3, "counted", {"total": 2}),
        ("counter/a", 4, "counted", {"total": 3}),
    ]
    assert all(abs(e.at - time.time()) < 60 for e in got)
    assert last == 4


async def test_subscribe_without_after_yields_only_events_from_now_on(tmp_path):
    with trio.fail_after(10):
        async with serving(tmp_path) as server, connect(server.url) as client:
            ack = await client.send("counter/a", "add")
            await server.rt.wait_handled("counter/a", ack.seq)
            async with client.subscribe("counter/a") as events:
                await client.send("counter/a", "add")
                (event,) = await take(events, 1)
    assert (event.seq, event.type, event.data) == (3, "counted", {"total": 2})


async def test_a_pattern_subscription_yields_live_events_of_every_actor_of_the_kind(tmp_path):
    with trio.fail_after(10):
        async with serving(tmp_path) as server, connect(server.url) as client:
            async with client.subscribe("counter/*") as events:
                await client.send("counter/a", "add")
                await client.send("counter/b", "add", {"n": 7})
                got = await take(events, 4)
                last = events.last
    assert sorted((e.actor, e.type, str(e.data)) for e in got) == [
        ("counter/a", "actor.started", "{}"),
        ("counter/a", "counted", "{'total': 1}"),
        ("counter/b", "actor.started", "{}"),
        ("counter/b", "counted", "{'total': 7}"),
    ]
    assert last is None


async def test_many_concurrent_requests_each_get_their_own_reply(tmp_path):
    acks: dict[str, callboard.Ack] = {}

    async def send(client: callboard.client.Client, key: str) -> None:
        acks[key] = await client.send("counter/a", "add", key=key)

    with trio.fail_after(10):
        async with serving(tmp_path) as server, connect(server.url) as client:
            async with trio.open_nursery() as nursery:
                for i in range(50):
                    nursery.start_soon(send, client, f"k{i}")
            again = await client.send("counter/a", "add", key="k7")
    assert sorted(a.seq for a in acks.values()) == list(range(1, 51))
    assert again == callboard.Ack(acks["k7"].seq, True)


# -- errors ------------------------------------------------------------------------------


async def test_server_error_codes_are_raised_as_the_matching_callboard_errors(tmp_path):
    with trio.fail_after(10):
        async with serving(tmp_path) as server, connect(server.url) as client:
            with pytest.raises(callboard.UnknownActor, match="box/nope"):
                await client.inspect("box/nope")
            with pytest.raises(callboard.UnknownKind, match="nokind"):
                await client.spawn("nokind")
            with pytest.raises(callboard.BadRequest, match="no-slash"):
                await client.send("no-slash", "add")
            await client.spawn("box", {"a": 1}, name="b1")
            with pytest.raises(callboard.BadRequest, match="box/b1"):
                await client.spawn("box", {"a": 2}, name="b1")
            with pytest.raises(callboard.BadRequest, match="patterns are live only"):
                async with client.subscribe("counter/*", after=0):
                    pass
            with pytest.raises(callboard.BadMessage, match="does not serialize"):
                await client.send("counter/a", "add", {"n": object()})
            # The connection is still good after every error.
            assert await client.send("counter/a", "add") == callboard.Ack(1, False)


async def test_a_body_over_the_frame_limit_raises_too_large(tmp_path):
    with trio.fail_after(10):
        async with serving(
            tmp_path, config=GatewayConfig(port=0, token=TEST_TOKEN, max_frame=1024)
        ) as server:
            async with connect(server.url) as client:
                with pytest.raises(TooLarge):
                    await client.send("counter/a", "add", {"pad": "x" * 2000})
                assert await client.send("counter/a", "add") == callboard.Ack(1, False)


async def test_a_request_over_the_rate_limit_raises_rate_limited_which_is_retryable(tmp_path):
    config = GatewayConfig(port=0, token=TEST_TOKEN, rate_limit=0.001, rate_burst=1)
    with trio.fail_after(10):
        async with serving(tmp_path, config=config) as server, connect(server.url) as client:
            await client.ping()
            with pytest.raises(RateLimited) as caught:
                await client.ping()
    assert caught.value.retryable is True


async def test_a_missing_or_wrong_token_is_refused_and_the_right_one_accepted(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("CALLBOARD_TOKEN")  # missing means missing, not the test token
    config = GatewayConfig(port=0, token="s3cret")
    with trio.fail_after(10):
        async with serving(tmp_path, config=config) as server:
            with pytest.raises(Unauthorized):
                async with connect(server.url):
                    pass
            with pytest.raises(Unauthorized):
                async with connect(server.url, token="wrong"):
                    pass
            async with connect(server.url, token="s3cret") as client:
                assert await client.send("counter/a", "add") == callboard.Ack(1, False)


async def test_connecting_to_a_port_nobody_listens_on_raises_connection_failed():
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    await listeners[0].aclose()
    with trio.fail_after(10):
        with pytest.raises(ConnectionFailed, match=rf"^cannot connect to ws://127.0.0.1:{port}/v1"):
            async with connect(f"ws://127.0.0.1:{port}/v1"):
                pass


async def test_a_url_that_is_not_a_websocket_url_is_refused_as_not_retryable():
    message = "cannot connect to 'http://127.0.0.1:7341/v1': a gateway URL looks like ws://127.0.0.1:7341/v1"
    with pytest.raises(ConnectionFailed, match=f"^{re.escape(message)}$") as caught:
        async with connect("http://127.0.0.1:7341/v1"):
            pass
    assert caught.value.retryable is False


async def test_a_handshake_refused_with_a_4xx_is_a_connection_failure_not_worth_retrying(
    tmp_path,
):
    with trio.fail_after(10):
        async with serving(tmp_path) as server:
            with pytest.raises(
                ConnectionFailed, match="refused the websocket handshake with HTTP 404"
            ) as caught:
                async with connect(server.url.replace("/v1", "/v2")):
                    pass
    assert caught.value.retryable is False


async def test_a_client_that_cannot_reconnect_within_give_up_after_fails_its_requests(tmp_path):
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            server = Server(tmp_path)
            url = await server.start(nursery)
            backoff = Backoff(first=0.01, cap=0.05, give_up_after=0.2)
            async with connect(url, reconnect=backoff) as client:
                await server.stop()
                with pytest.raises(
                    ConnectionFailed, match=r"^gave up reconnecting to \S+ after 0.2 s"
                ):
                    await client.ping()
                with pytest.raises(ConnectionFailed, match=r"^gave up reconnecting"):
                    await client.list()


async def test_an_error_raised_in_the_body_of_connect_comes_out_as_itself(tmp_path):
    with trio.fail_after(10):
        async with serving(tmp_path) as server:
            with pytest.raises(KeyError, match="mine"):
                async with connect(server.url):
                    raise KeyError("mine")


# -- subscriptions that outlive their connection ------------------------------------------------


async def test_a_subscription_survives_a_server_restart_with_no_gap_and_no_duplicate(tmp_path):
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            server = Server(tmp_path)
            url = await server.start(nursery)
            async with connect(url, reconnect=FAST) as client:
                async with client.subscribe("counter/a", after=0) as events:
                    for _ in range(2):
                        await client.send("counter/a", "add")
                    got = await take(events, 3)
                    await server.stop()
                    # While the gateway is down, the actor moves on.
                    async with callboard.open_runtime(tmp_path, kinds=KINDS) as rt:
                        for _ in range(2):
                            ack = await rt.send("counter/a", "add")
                        await rt.wait_handled("counter/a", ack.seq)
                    assert await server.start(nursery) == url
                    await client.send("counter/a", "add")
                    got += await take(events, 5)
                    resumes = events.statistics().resumes
            nursery.cancel_scope.cancel()
    assert [(e.seq, e.type, e.data) for e in got] == [
        (1, "actor.started", {}),
        (2, "counted", {"total": 1}),
        (3, "counted", {"total": 2}),
        (4, "actor.started", {}),
        (5, "counted", {"total": 3}),
        (6, "counted", {"total": 4}),
        (7, "actor.started", {}),
        (8, "counted", {"total": 5}),
    ]
    assert resumes == 1


async def test_a_lagged_subscription_resumes_by_itself_with_no_gap_and_no_duplicate(tmp_path):
    config = GatewayConfig(port=0, token=TEST_TOKEN, subscriber_buffer=4, send_queue=1024)
    with trio.fail_after(20):
        async with serving(tmp_path, config=config) as server, connect(server.url) as client:
            async with client.subscribe("counter/a", after=0) as events:
                await client.send("counter/a", "burst", {"n": 300})
                got = await take(events, 301)
                resumes = events.statistics().resumes
    assert seqs(got) == list(range(1, 302))
    assert [e.data for e in got[1:]] == [{"i": i} for i in range(300)]
    assert resumes == 1


async def test_a_consumer_slower_than_its_buffer_resumes_from_the_store(tmp_path):
    with trio.fail_after(20):
        async with serving(tmp_path) as server, connect(server.url, event_buffer=16) as client:
            ack = await client.send("counter/a", "burst", {"n": 20})
            await server.rt.wait_handled("counter/a", ack.seq)
            async with client.subscribe("counter/a", after=0) as events:
                # Let the 21 replayed events arrive while nobody reads: 16 fit.
                # The server reads them on a worker thread, which
                # wait_all_tasks_blocked does not wait for: wait for the 16th too.
                while events.statistics().buffered < 16:
                    await trio.testing.wait_all_tasks_blocked()
                await trio.testing.wait_all_tasks_blocked()
                assert events.statistics().buffered == 16
                got = await take(events, 21)
                resumes = events.statistics().resumes
    assert seqs(got) == list(range(1, 22))
    assert resumes == 1
