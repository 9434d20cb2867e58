"""`callboard serve` as a real subprocess: start it, read its one line, connect
with the token it keeps in its data directory."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
from gateway_wire import connect

__all__ = ["LINE", "Serving", "connect_to", "read_line", "serve_env", "serving"]

TESTS = Path(__file__).parent
LINE = re.compile(r"^callboard serving (ws://127\.0\.0\.1:\d+/v1) with data in (\S+?)(,|$)")


def serve_env(**extra: str) -> dict[str, str]:
    """The test's environment without its token (the server makes its own) or a
    store (SQLite in the data directory, unless the test names one). The
    tests' directory joins ``PYTHONPATH`` (which may name the callboard to test)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CALLBOARD_TOKEN", "CALLBOARD_STORE")}
    path = os.pathsep.join(p for p in (str(TESTS), env.get("PYTHONPATH")) if p)
    return {**env, "PYTHONPATH": path, **extra}


@attrs.define
class Serving:
    """A running `callboard serve`: its process, URL, first line and stderr so far."""

    process: trio.Process
    url: str
    line: str
    token: str | None
    stderr: list[str] = attrs.Factory(list)
    _grew: trio.Event = attrs.Factory(trio.Event)

    async def wait_logged(self, text: str) -> None:
        while not any(text in line for line in self.stderr):
            self._grew = trio.Event()
            await self._grew.wait()

    async def read_stderr(self) -> None:
        assert self.process.stderr is not None
        pending = b""
        async for chunk in self.process.stderr:
            pending += chunk
            *lines, pending = pending.split(b"\n")
            self.stderr.extend(line.decode() for line in lines)
            self._grew.set()


async def read_line(stream: trio.abc.ReceiveStream) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = await stream.receive_some(1)
        assert chunk, f"callboard serve closed its stdout after {data!r}"
        data += chunk
    return data.decode().rstrip("\n")


def connect_to(served: Serving, **options: Any):
    """A `gateway_wire` client presenting the server's own token, from its data directory."""
    return connect(served.url, token=served.token, header_token=served.token, **options)


@asynccontextmanager
async def serving(data: Path, *extra: str, env: dict[str, str] | None = None,
                  cwd: Path | None = None, kind: str = "gateway_kinds:Counter",
                  ) -> AsyncIterator[Serving]:  # fmt: skip
    command = [sys.executable, "-m", "callboard", "serve", "--data", str(data), "--port", "0",
               "--kind", kind, *extra]  # fmt: skip
    process = await trio.lowlevel.open_process(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env or serve_env(), cwd=cwd
    )
    try:
        async with trio.open_nursery() as nursery:
            assert process.stdout is not None
            line = await read_line(process.stdout)
            match = LINE.match(line)
            assert match is not None, line
            token_file = data / "token"  # made on the first start, unless the env names one
            token = token_file.read_text().strip() if token_file.exists() else None
            served = Serving(process, match.group(1), line, token)
            nursery.start_soon(served.read_stderr)
            yield served
            nursery.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            process.kill()
        with trio.move_on_after(5, shield=True):
            await process.wait()
