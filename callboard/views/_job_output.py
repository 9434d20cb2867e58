"""What a read of a job's output answers: the same type from a runtime and a client."""

from __future__ import annotations

import attrs

__all__ = ["OUTPUT_READ_LIMIT", "OutputPage"]

OUTPUT_READ_LIMIT = 65536
"""The most bytes of output one read returns (and the default): a reply stays
well inside a 1 MiB frame even when every byte is escaped in JSON."""


@attrs.frozen
class OutputPage:
    """One read of a job's output, from byte ``after`` up to ``next``.

    ``running``: the job's process may still write more. ``truncated``: this
    read stopped at its limit and more is held already (read again from
    ``next`` at once). ``capped``: the job wrote more than its output cap,
    and what came past the cap was not kept.
    """

    text: str
    next: int
    running: bool
    truncated: bool
    capped: bool = False
