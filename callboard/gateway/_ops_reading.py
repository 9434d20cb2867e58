"""Answers to the reading ops that look into one kind's data: ``output`` (a job's output).

The output itself is the job kind's to lay out (`callboard.jobs.read_output`
reads it from the job's log and snapshot); here it becomes the ``ok`` frame
of docs/protocol.md. The grant was checked by ``_operations.dispatch``.
"""

from __future__ import annotations

from ..jobs import read_output
from ..runtime import Runtime
from ..views import OUTPUT_READ_LIMIT
from . import _frames as f

__all__ = ["answer_output"]


async def answer_output(rt: Runtime, request: f.Output) -> str:
    """``{"op":"ok","id":...,"text":...,"next":N,"running":...,"truncated":...,"capped":...}``."""
    page = await read_output(
        rt, request.job, request.after or 0, request.limit or OUTPUT_READ_LIMIT
    )
    return f.encode_ok(
        request.id,
        text=page.text,
        next=page.next,
        running=page.running,
        truncated=page.truncated,
        capped=page.capped,
    )
