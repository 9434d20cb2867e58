"""A data directory on a small tmpfs that fills up while a runtime writes to it.

The child sends keyed messages without end. The test fills the filesystem
with a ballast file until sends are refused, waits for the store's log of it,
deletes the ballast and waits for sends to be acknowledged again, with no
restart; a trial does that a few times, then SIGKILLs the child, restarts
on the same directory and checks every answer: a refusal must be clean
(nothing of it applied), nothing acknowledged lost, and the store logs each
full disk once, however many writes it refused, and once that it goes on.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
from checker import Tally, applied
from core_kinds import Counter
from runner import Child, open_child

import callboard

CHILD = Path(__file__).parent / "store_child.py"
# Room for what a trial's store grows to (its database and a WAL of about
# 4 MB reach 8.4 MB by a third episode) and a ballast bigger than
# `SPACE_AGAIN` on top: on 8 MB the ballast could take less than that, and
# once it was deleted the store rightly never said it had space again.
DISK = "16m"
PAD = 2000  # bytes more in each body, so the WAL grows into the ballast's space soon
# Sends that make one transaction larger than SQLite's page cache (2 MiB).
SPILLING, BIG = 16, 256 * 1024
FULL = "the disk is full"
GOES_ON = "the store has space again"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of `DISK`, unmounted after the test whatever happened in it."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0 and not os.environ.get("CI"):
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    assert mounted.returncode == 0, mounted.stderr
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


@asynccontextmanager
async def _step(child: Child, disk: Path, what: str) -> AsyncIterator[None]:
    """One wait of a trial; if it never ends, fail saying what the child was doing.

    Not a time limit on the store (each step takes well under a second): a
    wait that does not end otherwise hangs until the test's whole budget, and
    says nothing of where it stood.
    """
    try:
        with trio.fail_after(120):
            yield
    except trio.TooSlowError:
        outcomes = {o: child.count(f'"{o}"') for o in ("acked", "failed", "unknown")}
        raise AssertionError(
            f"{what} never came: the child printed {outcomes}; {_disk_usage(disk)}; "
            f"its log ends {child.errors[-8:]}"
        ) from None


def _disk_usage(disk: Path) -> str:
    stat = os.statvfs(disk)
    files = {p.name: p.stat().st_size for p in disk.rglob("*") if p.is_file()}
    return f"{stat.f_bavail * stat.f_frsize} bytes free, files {files}"


def _fill(path: Path) -> None:
    """Write ``path`` until the filesystem has no byte left."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (1 << 16, 1 << 12, 1):
            chunk = b"\0" * size
            try:
                while True:
                    os.write(fd, chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)


async def test_a_full_disk_refuses_sends_cleanly_logs_once_and_goes_on_once_space_is_freed(
    small_disk, request
):
    trials, episodes = (10, 3) if request.config.getoption("--longrun") else (1, 2)
    tally = Tally()
    with trio.fail_after(60 * trials):
        for trial in range(trials):
            data = small_disk / f"data-{trial}"
            command = [sys.executable, str(CHILD), "send", str(data), "1000000000", f"pad={PAD}"]
            async with open_child(command) as child:
                for episode in range(1, episodes + 1):
                    async with _step(child, small_disk, f"episode {episode}: 100 acks"):
                        await child.wait_printed('"acked"', 100)
                    _fill(small_disk / "ballast")
                    async with _step(child, small_disk, f"episode {episode}: 20 refusals"):
                        await child.wait_printed('"failed"', 20)
                    async with _step(child, small_disk, f"episode {episode}: the full disk logged"):
                        await child.wait_logged(FULL, episode)
                    (small_disk / "ballast").unlink()
                    async with _step(child, small_disk, f"episode {episode}: going on logged"):
                        await child.wait_logged(GOES_ON, episode)
                async with _step(child, small_disk, "100 acks at the end"):
                    await child.wait_printed('"acked"', 100)
                child.kill()
            run = child.run()
            tally.add(run.told, run.unknown, await applied(data))
            assert (run.logged(FULL), run.logged(GOES_ON)) == (episodes, episodes), run.errors
            for leftover in data.iterdir():
                leftover.unlink()  # the next trial's space
    print(tally.line("full disk (tmpfs), space freed"))
    tally.check()
    assert tally.refused > 0


async def test_a_batch_too_big_for_the_page_cache_is_refused_whole_on_a_full_disk(small_disk):
    """Its statements spill to the WAL and meet the full disk before the COMMIT;
    SQLite then rolls the transaction back itself, and every send is refused."""
    data = small_disk / "data"
    with trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=[Counter]) as rt:
            await rt.send("counter/a", "add", {"id": "before"}, key="before")
            _fill(small_disk / "ballast")
            answers: dict[str, str] = {}

            async def send(key: str) -> None:
                try:
                    await rt.send("counter/a", "add", {"id": key, "pad": "x" * BIG}, key=key)
                except callboard.StoreUnavailable:
                    answers[key] = "failed"
                else:
                    answers[key] = "acked"

            async with trio.open_nursery() as nursery:
                for n in range(SPILLING):  # queued together: one batch, one transaction
                    nursery.start_soon(send, f"big{n}")
            (small_disk / "ballast").unlink()
            await rt.send("counter/a", "add", {"id": "after"}, key="after")
        seen = await applied(data)
    assert answers == {f"big{n}": "failed" for n in range(SPILLING)}
    assert seen == {"before": 1, "after": 1}
