"""The body of a job's ``watch`` message, as a type the converter structures.

The owner that started a job's process sends it (`JobTools.adopt`): which
process to watch (its pid and start time), where its files are, and where it
runs (``executor``, as `executor_from` reads it). Strict JSON
(`callboard.codec.strict_json`): a body that does not fit starts nothing and
is answered with ``job.refused`` whose reason names the field.
"""

from __future__ import annotations

from typing import Any

import attrs

from ..codec import strict_json

__all__ = ["WatchBody"]


@strict_json()
@attrs.frozen
class WatchBody:
    job_id: str
    command: str
    owner: str
    pid: int
    directory: str
    start_time: int | None = None
    executor: dict[str, Any] | None = None
