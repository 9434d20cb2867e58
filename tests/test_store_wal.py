"""The write-ahead log under a reader: it grows while a reader in another process
holds a snapshot, and comes back under its limit within a few commits once the
reader lets go."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import trio
from child import Lines

import callboard
from callboard.store._wal import WAL_CHECKPOINT_RETRY, WAL_SIZE_LIMIT

READER = Path(__file__).parent / "wal_reader.py"

SENDERS = 64
MESSAGES_EACH = 400
SINKS = 4
PADDING = "x" * 1000  # a message of about 1 KB


class Sink(callboard.Actor):
    """Counts what it is sent."""

    kind = "sink"
    virtual = True

    async def handle(self, ctx, message):
        self.state["count"] = self.state.get("count", 0) + 1


async def send_many(rt: callboard.Runtime) -> None:
    """SENDERS concurrent senders, so group commit batches their messages."""

    async def sender(index: int) -> None:
        for _ in range(MESSAGES_EACH):
            await rt.send(f"sink/{index % SINKS}", "note", {"pad": PADDING})

    async with trio.open_nursery() as nursery:
        for index in range(SENDERS):
            nursery.start_soon(sender, index)


def wal_size(data: Path) -> int:
    return (data / "callboard.sqlite3-wal").stat().st_size


async def test_the_wal_returns_under_its_limit_within_a_few_commits_after_a_reader_lets_go(data):
    with trio.fail_after(120):
        async with callboard.open_runtime(data, kinds=[Sink]) as rt:
            await rt.send("sink/0", "note", {})
            async with trio.open_nursery() as nursery:
                start = functools.partial(
                    trio.run_process,
                    [sys.executable, str(READER), str(data / "callboard.sqlite3")],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                )
                reader: trio.Process = await nursery.start(start)
                assert reader.stdin is not None and reader.stdout is not None
                lines = Lines(reader.stdout)
                assert await lines.next() == "reading 1"
                await send_many(rt)
                held = wal_size(data)
                # The premise: no checkpoint could start the log over meanwhile.
                assert held > WAL_SIZE_LIMIT, f"the WAL grew to only {held} bytes"
                await reader.stdin.send_all(b"let go\n")
                assert await lines.next() == "done"
            # The reader has exited. A checkpoint that it blocked is tried again
            # after WAL_CHECKPOINT_RETRY batches, and each send is at least one
            # batch; an in-process read that overlaps the retry may put it off
            # once more.
            sizes = []
            for _ in range(3 * (WAL_CHECKPOINT_RETRY + 1)):
                await rt.send("sink/0", "note", {})
                sizes.append(wal_size(data))
                if sizes[-1] < WAL_SIZE_LIMIT:
                    break
    assert sizes[-1] < WAL_SIZE_LIMIT, f"the WAL stayed at {sizes} bytes after the reader left"
