"""What a caller is told about actors: the same types in the runtime and the client."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["ActorInfo", "ActorView"]


@attrs.frozen
class ActorView:
    """What `Runtime.inspect` tells about one actor."""

    actor: str
    kind: str
    status: str
    state: Any
    cursor: int
    mailbox: int
    head: int
    restarts: int
    last_error: dict[str, Any] | None
    owner: str | None = None
    """The node it is active on (several nodes on one store); None on one node."""


@attrs.frozen
class ActorInfo:
    """One row of `Runtime.list`."""

    actor: str
    status: str
    mailbox: int
    restarts: int
    owner: str | None = None
    """The node it is active on (several nodes on one store); None on one node."""
