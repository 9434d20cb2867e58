"""The PostgreSQL store on its own: opening, refusing, and its errors."""

from __future__ import annotations

import trio

from callboard.store import Enqueue


async def test_smoke(open_test_store, tmp_path):
    async with open_test_store(tmp_path) as store:
        acks = await store.enqueue([Enqueue("a", "t", b"{}", create_kind="k", key="k1")])
        assert acks[0].seq == 1
        acks = await store.enqueue([Enqueue("a", "t", b"{}", create_kind="k", key="k1")])
        assert acks[0].duplicate
        rows = await store.pending("a", 0, 10)
        assert rows[0].life == store.life
        await trio.sleep(0)
