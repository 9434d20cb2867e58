"""Lifecycles: activation, passivation, restarts with backoff, intensity, dead letters."""

from ._cell import ActorCell as ActorCell
from ._cell import CellServices as CellServices

__all__ = ["ActorCell", "CellServices"]
