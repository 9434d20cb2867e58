"""Lifecycles: activation, passivation, restarts with backoff, intensity, dead letters.

`ActorCell` is one actor's supervised life; `supervise` runs a group of trio
tasks under OTP's strategies (``one_for_one``, ``one_for_all``,
``rest_for_one``) and nests into trees.
"""

from ._cell import ActorCell as ActorCell
from ._cell import CellServices as CellServices
from ._tree import ChildSpec as ChildSpec
from ._tree import Strategy as Strategy
from ._tree import supervise as supervise

__all__ = ["ActorCell", "CellServices", "ChildSpec", "Strategy", "supervise"]
