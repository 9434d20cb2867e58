"""Replays through the embedding API (``rt.subscribe(actor, after=...)``): every
stored event in order, read a page at a time, so what is held at once is
one page however long the history; a lag while replaying reads on."""

from __future__ import annotations

import gc

import trio
import trio.testing

import callboard
from callboard.store import EventRecord

PAD = 64 * 1024


class Blob(callboard.Actor):
    """Virtual. Each message emits ``n`` events of ``size`` characters of padding."""

    kind = "blob"
    virtual = True

    async def handle(self, ctx: callboard.Context, message: callboard.Message) -> None:
        for i in range(message.body["n"]):
            ctx.emit("blob", {"i": i, "pad": "x" * message.body.get("size", 0)})


def stored_events_in_memory() -> tuple[int, int]:
    """Events read from the store and not let go yet: how many, and the bytes of their data."""
    records = [o for o in gc.get_objects() if type(o) is EventRecord]
    return len(records), sum(len(record.data) for record in records)


async def emit(rt: callboard.Runtime, messages: int, n: int, size: int = 0) -> int:
    for _ in range(messages):
        ack = await rt.send("blob/b", "emit", {"n": n, "size": size})
    await rt.wait_handled("blob/b", ack.seq)
    return await rt.head("blob/b")


async def test_a_replay_of_many_big_events_yields_them_all_in_order_one_page_in_memory(
    store_url, tmp_path
):
    config = callboard.RuntimeConfig(replay_page_bytes=4 * PAD + 4096)  # four events to a page
    seqs: list[int] = []
    held: list[tuple[int, int]] = []
    with trio.fail_after(30):
        async with callboard.open_runtime(
            tmp_path / "data", kinds=[Blob], config=config, store=store_url
        ) as rt:
            head = await emit(rt, 8, 12, PAD)
            send, receive = trio.open_memory_channel[callboard.Event](1)

            async def forward() -> None:
                async with rt.subscribe("blob/b", after=0) as events, send:
                    async for event in events:
                        await send.send(event)
                        if event.seq == head:
                            return

            async with trio.open_nursery() as nursery:
                nursery.start_soon(forward)
                async for event in receive:
                    seqs.append(event.seq)
                    held.append(stored_events_in_memory())
    assert head == 97  # actor.started, then 96 events of 64 K
    assert seqs == list(range(1, head + 1))
    # One page at most: the first holds the small actor.started and four big
    # events (the bytes bound decides), every other page four big events.
    assert max(count for count, _ in held) <= 5
    assert max(size for _, size in held) <= config.replay_page_bytes


async def test_live_events_that_overflow_the_buffer_during_a_replay_are_read_from_the_store(
    store_url,
    tmp_path,
):
    config = callboard.RuntimeConfig(replay_page=5)
    seqs: list[int] = []
    with trio.fail_after(30):
        async with callboard.open_runtime(
            tmp_path / "data", kinds=[Blob], config=config, store=store_url
        ) as rt:
            head = await emit(rt, 1, 19)
            async with rt.subscribe("blob/b", after=0, buffer=2, on_lag="raise") as events:
                seqs.append((await events.__anext__()).seq)
                lagged_before = rt.statistics().lagged
                # Ten live events while the replay is on its first page of five.
                head = await emit(rt, 1, 10)
                overflowed = rt.statistics().lagged - lagged_before
                async for event in events:
                    seqs.append(event.seq)
                    if event.seq == head:
                        break
    assert overflowed == 1
    assert seqs == list(range(1, 31))
