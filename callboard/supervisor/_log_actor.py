"""`current_actor`: which actor the running trio task works for, for log lines.

A cell sets it at the top of its task; the tasks it starts (its activities:
a model turn, a job's watcher) copy it when they are spawned, as trio copies
a task's context. So every line logged on an actor's behalf, by whatever
module (a model call's retry, a crash that could not be recorded), can name
the actor without each call passing it: `callboard serve --log-format json`
puts it in the line's ``actor`` field.
"""

from __future__ import annotations

from contextvars import ContextVar

__all__ = ["current_actor"]

current_actor: ContextVar[str | None] = ContextVar("callboard_actor", default=None)
"""The address of the actor the current task runs for, or None outside any actor."""
