"""A job's output, kept in the store: copied from its file while it runs, read by byte offset.

The process writes its output to a file (``JobFiles.out``), which is removed
once the job's end is committed. So that a person can still read it, the
job actor copies the file into its own log ``output`` as the job runs (every
``job_output_interval`` seconds, default 0.5) and once more in the commit
that records the end, up to ``job_output_cap`` bytes (default 1 MiB); what
the process writes past the cap is not kept (``capped``).

The log holds the output in chunks of exactly `CHUNK` bytes (base64, as the
output need not be UTF-8), so byte ``n`` is in item ``n // CHUNK``; the bytes
past the last whole chunk wait in the snapshot (``output_pending``, less
than one chunk). A commit appends at most what was copied since the last, so
its cost does not grow with the job's age; the snapshot and the log advance
in one commit, so a crash neither loses nor repeats a byte. Being in the
store, the output is read through any node's gateway, and kept after the
job ends for as long as the job actor is (``stopped_retention``).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, Protocol

from ..errors import BadRequest
from ..views import OUTPUT_READ_LIMIT, ActorView, OutputPage

__all__ = [
    "CHUNK",
    "OUTPUT_CAP",
    "OUTPUT_INTERVAL",
    "OUTPUT_LOG",
    "Copied",
    "output_cap",
    "output_interval",
    "read_output",
    "take_output",
]

OUTPUT_LOG = "output"
CHUNK = 4096
"""Bytes in one item of the ``output`` log (the last bytes wait in the snapshot)."""
OUTPUT_CAP = 1024 * 1024
"""Bytes of a job's output kept, unless the ``job_output_cap`` setting says otherwise."""
OUTPUT_INTERVAL = 0.5
"""Seconds between copies of a running job's output (setting ``job_output_interval``)."""
_RUNNING = ("new", "running")


def output_cap(settings: Mapping[str, Any]) -> int:
    """The ``job_output_cap`` setting, rounded up to whole chunks (at least one)."""
    cap = int(settings.get("job_output_cap", OUTPUT_CAP))
    return max(CHUNK, -(-cap // CHUNK) * CHUNK)


def output_interval(settings: Mapping[str, Any]) -> float:
    return float(settings.get("job_output_interval", OUTPUT_INTERVAL))


class Copied(Protocol):
    """The parts of a job's state that say how much output it has copied."""

    output_size: int
    output_pending: str
    output_capped: bool


def take_output(state: Copied, data: bytes) -> list[str]:
    """Add ``data`` (the bytes after ``state.output_size``) to ``state``; return
    the log items (whole chunks) to append in the same commit. No await: the
    state and the items change together or not at all."""
    pending = base64.b64decode(state.output_pending) + data
    whole = len(pending) - len(pending) % CHUNK
    items = [base64.b64encode(pending[i : i + CHUNK]).decode() for i in range(0, whole, CHUNK)]
    state.output_pending = base64.b64encode(pending[whole:]).decode()
    state.output_size += len(data)
    return items


class _Reader(Protocol):
    async def inspect(self, address: str) -> ActorView: ...

    async def read_log(
        self, address: str, log: str, start: int = 0, limit: int = 1000
    ) -> list[Any]: ...


async def read_output(
    rt: _Reader, address: str, after: int = 0, limit: int = OUTPUT_READ_LIMIT
) -> OutputPage:
    """The output of job ``address`` from byte ``after``, at most ``limit`` bytes
    (capped to `OUTPUT_READ_LIMIT`), as its last commit holds it.

    A read never ends inside a UTF-8 character while more may follow: ``next``
    then points at that character.

    Raises:
        UnknownActor: there is no such job.
        BadRequest: ``address`` is no job, or ``after`` is past the output held.
    """
    kind = address.partition("/")[0]
    if kind != "job":
        raise BadRequest(f"output reads a job's output; {address!r} is a {kind}, not a job")
    if after < 0 or limit < 1:
        raise BadRequest(f"output needs after >= 0 and limit >= 1, got {after} and {limit}")
    limit = min(limit, OUTPUT_READ_LIMIT)
    view = await rt.inspect(address)
    state = view.state if isinstance(view.state, dict) else {}
    size = int(state.get("output_size") or 0)
    pending = base64.b64decode(state.get("output_pending") or "")
    running = state.get("status", "new") in _RUNNING
    capped = bool(state.get("output_capped"))
    if after > size:
        raise BadRequest(
            f"after={after} is past the end of the output of {address!r}, which holds "
            f"{size} bytes so far; read from after={size} or less"
        )
    end = min(size, after + limit)
    whole = size - len(pending)  # the bytes in whole chunks in the log
    first = after // CHUNK
    data = b""
    if after < whole:
        last = (min(end, whole) + CHUNK - 1) // CHUNK
        items = await rt.read_log(address, OUTPUT_LOG, first, last - first)
        data = b"".join(base64.b64decode(item) for item in items)
    if end > whole:
        data += pending
    start = first * CHUNK
    data = data[after - start : end - start]
    truncated = end < size
    if truncated or running:
        data = data[: _complete_prefix(data)] or data
    return OutputPage(
        text=data.decode("utf-8", "replace"),
        next=after + len(data),
        running=running,
        truncated=truncated,
        capped=capped,
    )


def _complete_prefix(data: bytes) -> int:
    """The length of ``data`` without a UTF-8 sequence cut off at its end."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: look further back for its lead
        need = 1 if byte < 0xC0 else 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
        return len(data) - back if need > back else len(data)
    return len(data)
