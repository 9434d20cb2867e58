"""The gateway's writer sends queued frames in batches: one socket write, the
same websocket frames. Checked below the gateway (`HeldWrites` under a real
trio-websocket connection over in-memory streams, counting writes), in the
`Outbox` that hands out the batches, and end to end with the `websockets`
client for each ``write_batch``."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import trio
import trio.testing
from credentials import TEST_TOKEN
from gateway_wire import connect, open_gateway
from trio_websocket import WebSocketConnection, wrap_client_stream, wrap_server_stream

from callboard.gateway import GatewayConfig
from callboard.gateway._held_writes import HeldWrites
from callboard.gateway._outbox import Outbox


async def _websocket_pair(nursery: trio.Nursery):
    """A server connection over `HeldWrites`, its client, and the server's
    socket writes, one entry (its bytes) per write."""
    client_end, server_end = trio.testing.memory_stream_pair()
    writes: list[bytes] = []

    async def record_and_pump() -> None:  # what memory_stream_pair's own hook does, and record
        data = server_end.send_stream.get_data_nowait()
        writes.append(data)
        client_end.receive_stream.put_data(data)

    server_end.send_stream.send_all_hook = record_and_pump
    held = HeldWrites(server_end)
    connected: dict[str, WebSocketConnection] = {}
    client_ready = trio.Event()

    async def open_client() -> None:  # the handshake needs both sides at once
        connected["ws"] = await wrap_client_stream(nursery, client_end, "localhost", "/")
        client_ready.set()

    nursery.start_soon(open_client)
    server = await (await wrap_server_stream(nursery, held)).accept()
    await client_ready.wait()
    writes.clear()
    return held, server, connected["ws"], writes


async def test_held_frames_reach_the_client_as_separate_messages_in_one_write():
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            held, server, client, writes = await _websocket_pair(nursery)
            frames = ['{"n":1}', "two", "é" * 3, '{"n":4}']
            held.hold()
            for frame in frames:
                await server.send_message(frame)
            assert writes == []
            await held.flush(lambda: None)
            received = [await client.get_message() for _ in frames]
            nursery.cancel_scope.cancel()
    assert received == frames
    assert len(writes) == 1


async def test_a_flush_to_a_slow_reader_counts_progress_at_every_partial_send():
    server_socket, client_socket = trio.socket.socketpair()
    server_socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    client_socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    in_flight = sum(
        s.getsockopt(socket.SOL_SOCKET, option)
        for s, option in ((server_socket, socket.SO_SNDBUF), (client_socket, socket.SO_RCVBUF))
    )  # the most bytes the socket can take at once
    client = trio.SocketStream(client_socket)
    held = HeldWrites(trio.SocketStream(server_socket))
    payload = bytes(range(256)) * 800
    received = bytearray()
    progress: list[int] = []

    async def read_slowly() -> None:
        while len(received) < len(payload):
            received.extend(await client.receive_some(1024))

    with trio.fail_after(10), server_socket, client_socket:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_slowly)
            held.hold()
            await held.send_all(payload)
            await held.flush(lambda: progress.append(1))
    assert received == payload
    assert len(progress) >= len(payload) // in_flight >= 2


async def test_a_write_cut_off_halfway_closes_the_socket_and_nothing_follows_it():
    server_socket, client_socket = trio.socket.socketpair()
    server_socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    client = trio.SocketStream(client_socket)
    held = HeldWrites(trio.SocketStream(server_socket))
    payload = b"f" * 200_000  # far more than the socket holds: the client does not read
    some_went_out = trio.Event()
    with trio.fail_after(10), server_socket, client_socket:
        async with trio.open_nursery() as nursery:

            async def write_batch() -> None:
                held.hold()
                await held.send_all(payload)
                await held.flush(some_went_out.set)

            nursery.start_soon(write_batch)
            await some_went_out.wait()
            nursery.cancel_scope.cancel()  # as a dropped connection cancels its writer
        with pytest.raises(trio.BrokenResourceError, match="cut in the middle of a frame"):
            await held.send_all(b"a close frame")
        received = bytearray()
        while chunk := await client.receive_some(65536):
            received.extend(chunk)
    assert 0 < len(received) < len(payload)
    assert received == payload[: len(received)]


async def test_a_write_after_the_socket_closed_or_its_peer_went_is_refused_by_name():
    server_socket, client_socket = trio.socket.socketpair()
    held = HeldWrites(trio.SocketStream(server_socket))
    client = trio.SocketStream(client_socket)
    with trio.fail_after(5):
        await held.send_all(b"first")
        assert await client.receive_some(100) == b"first"
        client_socket.close()  # the client vanished
        with pytest.raises(trio.BrokenResourceError, match="the connection broke"):
            for _ in range(100):  # the first writes may still be taken by the kernel
                await held.send_all(b"more")
        server_socket.close()  # and the gateway closed its end: its descriptor is gone
        with pytest.raises(trio.ClosedResourceError, match="socket was closed"):
            await held.send_all(b"after the close")


async def test_reads_come_from_the_socket_with_or_without_a_wait_until_the_end_of_stream():
    server_socket, client_socket = trio.socket.socketpair()
    held = HeldWrites(trio.SocketStream(server_socket))
    client = trio.SocketStream(client_socket)
    with trio.fail_after(5), server_socket, client_socket:
        await client.send_all(b"already there")
        assert await held.receive_some() == b"already there"  # no wait
        async with trio.open_nursery() as nursery:
            got: list[bytes | bytearray] = []

            async def read() -> None:
                got.append(await held.receive_some(4))

            nursery.start_soon(read)
            await trio.testing.wait_all_tasks_blocked()  # the reader waits for data
            await client.send_all(b"abcdefgh")
        assert got == [b"abcd"]  # at most max_bytes
        assert await held.receive_some(100) == b"efgh"
        with pytest.raises(ValueError, match="max_bytes"):
            await held.receive_some(0)
        await client.aclose()
        assert await held.receive_some() == b""  # end of stream


async def test_a_read_of_a_closed_socket_is_refused_even_while_it_waits():
    server_socket, client_socket = trio.socket.socketpair()
    held = HeldWrites(trio.SocketStream(server_socket))
    with trio.fail_after(5), client_socket:
        async with trio.open_nursery() as nursery:
            refused: list[BaseException] = []

            async def read() -> None:
                try:
                    await held.receive_some()
                except trio.ClosedResourceError as exc:
                    refused.append(exc)

            nursery.start_soon(read)
            await trio.testing.wait_all_tasks_blocked()
            server_socket.close()  # the connection is torn down under the reader
        assert len(refused) == 1
        with pytest.raises(trio.ClosedResourceError, match="socket was closed"):
            await held.receive_some()


async def test_a_read_with_data_waiting_is_a_cancel_point_and_lets_other_tasks_run():
    server_socket, client_socket = trio.socket.socketpair()
    held = HeldWrites(trio.SocketStream(server_socket))
    client = trio.SocketStream(client_socket)
    with trio.fail_after(5), server_socket, client_socket:
        await client.send_all(b"x" * 1000)
        with trio.CancelScope() as scope:
            scope.cancel()
            await held.receive_some(1)
        assert scope.cancelled_caught  # cancelled before it read anything
        ran = trio.Event()
        reads = 0

        async def other_task() -> None:
            ran.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(other_task)
            while not ran.is_set():  # data is always there: only a schedule point ends this
                await held.receive_some(1)
                reads += 1
        # The new task runs at the first schedule point or, in trio's shuffled
        # batch order, at the one after it; without them the loop reads all.
        assert reads <= 2 and await held.receive_some() == b"x" * (1000 - reads)


async def test_a_client_closing_during_a_batch_gets_the_held_frames_and_the_close_reply():
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            held, server, client, writes = await _websocket_pair(nursery)
            held.hold()
            await server.send_message("one")
            await server.send_message("two")
            # trio-websocket's reader answers the close from its own task,
            # and then closes the stream: nothing may stay held.
            await client.aclose(1000, "bye")
            nursery.cancel_scope.cancel()
    # Two text frames, then the close reply (1000, "bye"), in one write.
    assert writes == [b"\x81\x03one\x81\x03two\x88\x05\x03\xe8bye"]


async def test_without_hold_every_message_is_its_own_write():
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            _, server, client, writes = await _websocket_pair(nursery)
            for text in ("a", "b", "c"):
                await server.send_message(text)
            received = [await client.get_message() for _ in range(3)]
            nursery.cancel_scope.cancel()
    assert received == ["a", "b", "c"]
    assert len(writes) == 3


class _GatedStream(trio.abc.Stream):
    """Records writes; the first one waits for ``gate``."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.gate = trio.Event()
        self._calls = 0

    async def send_all(self, data) -> None:
        self._calls += 1
        if self._calls == 1:
            await self.gate.wait()
        else:
            await trio.lowlevel.checkpoint()
        self.writes.append(bytes(data))

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def receive_some(self, max_bytes=None) -> bytes:
        await trio.sleep_forever()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


async def test_a_write_during_a_flush_waits_for_the_whole_batch():
    stream = _GatedStream()
    held = HeldWrites(stream)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            held.hold()
            await held.send_all(b"frame 1,")
            await held.send_all(b"frame 2")
            nursery.start_soon(held.flush, lambda: None)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(held.send_all, b"pong")  # as trio-websocket's reader would
            await trio.testing.wait_all_tasks_blocked()
            assert stream.writes == []  # the pong did not overtake the batch
            stream.gate.set()
    assert stream.writes == [b"frame 1,frame 2", b"pong"]


async def test_discard_drops_what_was_held_and_writes_go_straight_through_again():
    stream = _GatedStream()
    stream.gate.set()
    held = HeldWrites(stream)
    held.hold()
    await held.send_all(b"lost")
    held.discard()
    await held.send_all(b"direct")
    assert stream.writes == [b"direct"]


def test_outbox_take_hands_out_frames_in_order_within_both_limits():
    outbox = Outbox(100, reserve=2, max_bytes=10_000)
    for frame in ["a" * 10, "b" * 10, "c" * 10, "d" * 10, "e" * 10]:
        assert outbox.put_nowait(frame)
    assert outbox.take(2, 1000) == ["a" * 10, "b" * 10]
    assert outbox.take(10, 25) == ["c" * 10, "d" * 10]
    assert outbox.take(10, 1000) == ["e" * 10]
    assert outbox.take(10, 1000) == []
    assert len(outbox) == 0


def test_outbox_take_hands_out_a_frame_larger_than_the_limit_alone():
    outbox = Outbox(100, reserve=2, max_bytes=10_000)
    for frame in ["s", "x" * 500, "y"]:
        assert outbox.put_nowait(frame)
    assert outbox.take(10, 100) == ["s"]
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
async def test_a_burst_reaches_every_subscriber_whole_and_in_order(
    tmp_path: Path, monkeypatch, write_batch
):
    batches: list[int] = []  # frames per flush
    flush = HeldWrites.flush

    async def counted_flush(self: HeldWrites, on_progress) -> None:
        batches.append(len(self._held or ()))
        await flush(self, on_progress)

    monkeypatch.setattr(HeldWrites, "flush", counted_flush)
    # 2 KB events: a 64 K batch holds about 30, so both limits take turns.
    config = GatewayConfig(port=0, token=TEST_TOKEN, write_batch=write_batch)
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
    # 300 events queued at once: the writers took as many as the limits allow.
    if write_batch < 30:
        assert max(batches) == write_batch
    else:  # 64 K characters hold about 30 of these frames
        assert 1 < max(batches) <= 64 * 1024 // 2000


async def test_pipelined_sends_are_all_answered_when_their_replies_overflow_the_outbox(tmp_path):
    # Sends to an active actor are answered from their write's commit, all
    # of one group commit at once: with room for one reply outside the
    # reserve, the rest wait for room (a task each) and none is lost.
    config = GatewayConfig(port=0, token=TEST_TOKEN, max_subscriptions=1, send_queue=4)
    with trio.fail_after(30):
        async with open_gateway(tmp_path / "data", config) as (rt, gateway):
            async with connect(gateway.url) as client:
                await client.ok("send", to="counter/piped", type="add", body={"n": 0})
                sent = [f"s{n}" for n in range(40)]
                for rid in sent:
                    await client.send_frame(
                        {"op": "send", "id": rid, "to": "counter/piped", "type": "add"}
                    )
                replies = [await client.receive() for _ in sent]
                view = await rt.inspect("counter/piped")
    assert sorted(r["id"] for r in replies) == sorted(sent)
    assert all(r["op"] == "ok" for r in replies), replies
    assert sorted(r["seq"] for r in replies) == list(range(2, 42))
    assert view.mailbox + view.cursor == 41


async def test_outbox_wait_wakes_its_one_taker_for_a_frame_or_a_close_and_survives_a_cancel():
    outbox = Outbox(4, reserve=1, max_bytes=10_000)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            # A wait cancelled while it waits leaves the outbox to the next taker.
            cancelled = trio.CancelScope()

            async def cancelled_taker() -> None:
                with cancelled:
                    await outbox.wait()

            nursery.start_soon(cancelled_taker)
            await trio.testing.wait_all_tasks_blocked()
            cancelled.cancel()
            await trio.testing.wait_all_tasks_blocked()
            assert cancelled.cancelled_caught
            woken = trio.Event()

            async def taker() -> None:
                await outbox.wait()
                woken.set()

            nursery.start_soon(taker)
            await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(RuntimeError, match="already waits"):
                await outbox.wait()  # one taker at a time: the connection's writer
            assert outbox.put_nowait("frame")
            await woken.wait()
            assert outbox.take(10, 1000) == ["frame"]
            woken = trio.Event()
            nursery.start_soon(taker)
            await trio.testing.wait_all_tasks_blocked()
            outbox.close_after(1000, "done")
            await woken.wait()
    assert outbox.close_request is not None
