"""The named stages of an actor cell's life (see `ActorCell`)."""

from __future__ import annotations

import enum

__all__ = ["CellState"]


class CellState(enum.Enum):
    """Where one active actor's cell stands. Requests from outside (stop,
    passivate) are flags the mailbox loop reads; these are what it is doing."""

    LOADING = "loading"
    """Reading its cursor and unhandled messages from the store; a message
    delivered meanwhile is read from the store afterwards, not kept."""
    STARTING = "starting"
    """Restoring the actor from its snapshot and running ``on_start``."""
    RUNNING = "running"
    """Handling a batch of its mailbox (or committing it)."""
    IDLE = "idle"
    """Nothing to handle: waiting for a message, a stop or the passivation sweep."""
    RESTING = "resting"
    """Idle for ``rest_after``: still in the directory with its actor, state and
    inbox, but with no task (its stack, nursery and frames are what an idle
    actor cost most). A message, a stop or the passivation sweep starts a task
    that goes on from where it stood, without reading the store."""
    STOPPING = "stopping"
    """Running ``on_stop`` and committing the final status, on request."""
    PASSIVATING = "passivating"
    """Committing its last snapshot before it leaves memory (forgotten by the
    directory already: a new message activates a successor, which waits)."""
    ENDED = "ended"
    """Passivated, stopped or failed: its loop is over; activities wind down."""
    DONE = "done"
    """Gone from the directory; ``done`` is set."""
