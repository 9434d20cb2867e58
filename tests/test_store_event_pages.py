"""Pages of stored events, as a replay reads them: at most ``limit`` events and
``max_bytes`` bytes of their data, always at least the next event, and
whether more follow."""

from __future__ import annotations

import trio

from callboard.store import EventPage, Store
from callboard.store._records import Commit, NewEvent


def data(size: int) -> bytes:
    """JSON of exactly ``size`` bytes: a string."""
    return b'"' + b"x" * (size - 2) + b'"'


async def store_events(store: Store, address: str, sizes: list[int]) -> None:
    await store.spawn(address, "k", b"{}")
    events = tuple(NewEvent("e", data(size), 0.0) for size in sizes)
    await store.commit(Commit(address, events=events))


def seqs(page: EventPage) -> list[int]:
    return [event.seq for event in page.events]


async def test_a_page_holds_no_more_bytes_of_event_data_than_max_bytes(tmp_path, store_backend):
    with trio.fail_after(10):
        async with store_backend.open(tmp_path) as store:
            await store_events(store, "a", [100] * 10)
            first = await store.read_events("a", 0, limit=512, max_bytes=350)
            second = await store.read_events("a", 3, limit=512, max_bytes=350)
            exact = await store.read_events("a", 0, limit=512, max_bytes=300)
    assert (seqs(first), first.more) == ([1, 2, 3], True)
    assert (seqs(second), second.more) == ([4, 5, 6], True)
    assert (seqs(exact), exact.more) == ([1, 2, 3], True)
    assert [len(event.data) for event in first.events] == [100, 100, 100]


async def test_a_page_holds_the_next_event_even_when_it_alone_is_over_max_bytes(
    tmp_path, store_backend
):
    with trio.fail_after(10):
        async with store_backend.open(tmp_path) as store:
            await store_events(store, "a", [1000, 10, 10, 1000])
            big = await store.read_events("a", 0, limit=512, max_bytes=100)
            small = await store.read_events("a", 1, limit=512, max_bytes=100)
            last = await store.read_events("a", 3, limit=512, max_bytes=100)
    assert (seqs(big), big.more) == ([1], True)
    assert (seqs(small), small.more) == ([2, 3], True)
    assert (seqs(last), last.more) == ([4], False)
    assert big.events[0].data == data(1000)


async def test_a_page_holds_at_most_limit_events_and_says_whether_more_were_stored(
    tmp_path, store_backend
):
    with trio.fail_after(10):
        async with store_backend.open(tmp_path) as store:
            await store_events(store, "a", [10] * 5)
            await store_events(store, "b", [10] * 3)
            partial = await store.read_events("a", 0, limit=4, max_bytes=1 << 20)
            whole = await store.read_events("a", 0, limit=5, max_bytes=1 << 20)
            past_the_end = await store.read_events("a", 5, limit=5, max_bytes=1 << 20)
    assert (seqs(partial), partial.more) == ([1, 2, 3, 4], True)
    assert (seqs(whole), whole.more) == ([1, 2, 3, 4, 5], False)
    assert {event.address for event in whole.events} == {"a"}
    assert past_the_end == EventPage((), more=False)


async def test_pages_read_at_once_by_many_tasks_each_get_their_own_events(tmp_path, store_backend):
    pages: dict[str, EventPage] = {}
    with trio.fail_after(10):
        async with store_backend.open(tmp_path) as store:
            for n in range(8):
                await store_events(store, f"a{n}", [10] * (n + 1))

            async def read(address: str) -> None:
                pages[address] = await store.read_events(address, 0, limit=512, max_bytes=1000)

            async with trio.open_nursery() as nursery:
                for n in range(8):
                    nursery.start_soon(read, f"a{n}")
    assert {address: seqs(page) for address, page in pages.items()} == {
        f"a{n}": list(range(1, n + 2)) for n in range(8)
    }
