"""The health endpoints of `callboard serve` on its metrics port, for load balancers and
supervisors: ``/healthz`` (the process answers) and ``/readyz`` (the store takes
writes), asked with no token, on a data directory whose disk fills up and empties."""

from __future__ import annotations

import errno
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
import trio
from serve_helpers import connect_to, serving

DISK = "16m"
BIG = 600 * 1024  # a body the WAL must grow for


def probe(url: str, *, method: str = "GET", host: str | None = None,
          token: str | None = None) -> tuple[int, bytes]:  # fmt: skip
    request = urllib.request.Request(url, method=method)
    if host is not None:
        request.add_unredirected_header("Host", host)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def base(line: str) -> str:
    return line.split("metrics at ")[1].removesuffix("/metrics")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of `DISK` (the suite runs as root), unmounted whatever happened on it."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(disk)],
                             capture_output=True, text=True)  # fmt: skip
    assert mounted.returncode == 0, f"this test mounts a tmpfs, as root: {mounted.stderr}"
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def fill(path: Path) -> None:
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


async def test_health_endpoints_need_no_token_nor_host_and_answer_one_fixed_word(tmp_path):
    with trio.fail_after(30):
        async with serving(tmp_path / "data", "--metrics-port", "0") as served:
            url = base(served.line)
            answers = [
                await trio.to_thread.run_sync(partial(probe, url + path, host=host))
                for path in ("/healthz", "/readyz")
                for host in (None, "callboard.internal:80")  # a balancer's own name
            ]
            posted = await trio.to_thread.run_sync(lambda: probe(url + "/readyz", method="POST"))
            metrics = await trio.to_thread.run_sync(lambda: probe(url + "/metrics"))
    assert answers == [(200, b"ok\n")] * 4
    assert posted[0] == 405
    assert metrics[0] == 401  # the metrics themselves still need the token


async def test_readyz_fails_while_the_disk_refuses_writes_and_passes_once_it_has_room(small_disk):
    with trio.fail_after(60):
        async with serving(small_disk / "data", "--metrics-port", "0") as served:
            ready = base(served.line) + "/readyz"
            alive = base(served.line) + "/healthz"
            async with connect_to(served) as client:
                assert await trio.to_thread.run_sync(probe, ready) == (200, b"ok\n")
                fill(small_disk / "ballast")
                refused = await client.request(
                    "send", to="counter/a", type="add", body={"pad": "x" * BIG}
                )
                full = await trio.to_thread.run_sync(probe, ready)
                still_alive = await trio.to_thread.run_sync(probe, alive)
                (small_disk / "ballast").unlink()
                again = await trio.to_thread.run_sync(probe, ready)
                sent = await client.ok("send", to="counter/a", type="add", body={"pad": "x"})
    assert (refused["op"], refused["code"]) == ("error", "unavailable")
    assert full == (503, b"unavailable\n")
    assert still_alive == (200, b"ok\n")
    assert again == (200, b"ok\n")
    assert sent["seq"] == 1  # the refused send left nothing behind
