"""What a caller is told about actors: the same types in the runtime and the client."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["ActorInfo", "ActorView"]


@attrs.frozen
class ActorView:
    """What `Runtime.inspect` tells about one actor.

    ``spec`` is the spec it was spawned with, its secrets masked
    (`mask_secrets`); ``summary`` what its kind adds (a session's
    conversation length and last turn), or None.
    """

    actor: str
    kind: str
    status: str
    state: Any
    cursor: int
    mailbox: int
    head: int
    restarts: int
    last_error: dict[str, Any] | None
    spec: Any = None
    summary: dict[str, Any] | None = None


@attrs.frozen
class ActorInfo:
    """One row of `Runtime.list`."""

    actor: str
    status: str
    mailbox: int
    restarts: int
