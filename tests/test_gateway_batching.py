"""The gateway's writer sends queued frames in batches: one socket write, the
same websocket frames. Checked below the gateway (`send_text_frames` on a
trio-websocket connection over an in-memory stream, counting writes), in the
`Outbox` that hands out the batches, and end to end with the `websockets`
client for each ``write_batch``."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing
from gateway_wire import connect, open_gateway
from trio_websocket import ConnectionClosed, wrap_client_stream, wrap_server_stream

from callboard.gateway import GatewayConfig
from callboard.gateway._batch_send import can_batch, send_text_frames
from callboard.gateway._outbox import Outbox


async def _websocket_pair(nursery: trio.Nursery):
    """A server and a client trio-websocket connection over memory streams,
    and a list that gets one entry per ``send_all`` of the server."""
    client_end, server_end = trio.testing.memory_stream_pair()
    writes: list[int] = []
    pump = server_end.send_stream.send_all_hook  # moves the bytes to the client's end

    async def count_write() -> None:
        writes.append(1)
        await pump()

    server_end.send_stream.send_all_hook = count_write

    connected: dict[str, object] = {}
    client_ready = trio.Event()

    async def open_client() -> None:  # the handshake needs both sides at once
        connected["ws"] = await wrap_client_stream(nursery, client_end, "localhost", "/")
        client_ready.set()

    nursery.start_soon(open_client)
    server = await (await wrap_server_stream(nursery, server_end)).accept()
    await client_ready.wait()
    client = connected["ws"]
    writes.clear()
    return server, client, writes


async def test_send_text_frames_delivers_each_frame_as_its_own_message_in_one_write():
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            server, client, writes = await _websocket_pair(nursery)
            frames = ['{"n":1}', "two", "é" * 3, '{"n":4}']
            await send_text_frames(server, frames)
            received = [await client.get_message() for _ in frames]
            nursery.cancel_scope.cancel()
    assert received == frames
    assert len(writes) == 1


async def test_the_pinned_trio_websocket_has_what_batching_needs():
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            server, _, _ = await _websocket_pair(nursery)
            batching = can_batch(server)
            nursery.cancel_scope.cancel()
    assert batching is True


async def test_send_text_frames_on_a_closed_connection_raises_connection_closed():
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            server, client, writes = await _websocket_pair(nursery)
            await client.aclose(1000, "bye")  # the server answers with its close frame
            writes_before = len(writes)
            with pytest.raises(ConnectionClosed):
                await send_text_frames(server, ["late"])
            nursery.cancel_scope.cancel()
    assert len(writes) == writes_before


def test_outbox_take_hands_out_frames_in_order_within_both_limits():
    outbox = Outbox(100, reserve=2, max_bytes=10_000)
    for frame in ["a" * 10, "b" * 10, "c" * 10, "d" * 10, "e" * 10]:
        assert outbox.put_nowait(frame)
    assert outbox.take(2, 1000) == ["a" * 10, "b" * 10]
    assert outbox.take(10, 15) == ["c" * 10, "d" * 10]
    assert outbox.take(10, 1000) == ["e" * 10]
    assert outbox.take(10, 1000) == []
    assert len(outbox) == 0


def test_outbox_take_hands_out_a_frame_larger_than_the_limit_alone():
    outbox = Outbox(100, reserve=2, max_bytes=10_000)
    assert outbox.put_nowait("x" * 500)
    assert outbox.put_nowait("y")
    assert outbox.take(10, 100) == ["x" * 500]
    assert outbox.take(10, 100) == ["y"]


async def test_outbox_take_makes_room_for_every_waiting_reply():
    outbox = Outbox(4, reserve=1, max_bytes=10_000)
    for i in range(3):
        assert outbox.put_nowait(f"event {i}")
    queued: list[str] = []

    async def reply(text: str) -> None:
        await outbox.put(text)
        queued.append(text)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reply, "reply 1")
            nursery.start_soon(reply, "reply 2")
            await trio.testing.wait_all_tasks_blocked()
            assert queued == []
            assert outbox.take(3, 1000) == ["event 0", "event 1", "event 2"]
    assert sorted(queued) == ["reply 1", "reply 2"]
    assert sorted(outbox.take(10, 1000)) == ["reply 1", "reply 2"]


@pytest.mark.parametrize("write_batch", [1, 7, 64])
async def test_a_burst_reaches_every_subscriber_whole_and_in_order(tmp_path: Path, write_batch):
    # 2 KB events: a 64 KiB write holds about 30, so both limits take turns.
    config = GatewayConfig(port=0, write_batch=write_batch)
    with trio.fail_after(20):
        async with open_gateway(tmp_path / "data", config) as (rt, gateway):
            async with connect(gateway.url) as a, connect(gateway.url) as b:
                ack = await a.ok("send", to="counter/x", type="add")
                await rt.wait_handled("counter/x", ack["seq"])  # started, counted: seq 1, 2
                subs = [await c.ok("subscribe", actor="counter/x") for c in (a, b)]
                await a.ok("send", to="counter/x", type="burst", body={"n": 300, "size": 2000})
                got = [await c.events(s["sub"], 300) for c, s in zip((a, b), subs, strict=True)]
    assert [s["head"] for s in subs] == [2, 2]
    for events in got:
        assert [e["seq"] for e in events] == list(range(3, 303))
        assert [e["data"]["i"] for e in events] == list(range(300))
        assert {len(e["data"]["pad"]) for e in events} == {2000}
