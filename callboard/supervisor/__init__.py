"""Lifecycles: activation, passivation, restarts with backoff, intensity, dead letters.

`ActorCell` is one actor's supervised life: the runtime supervises every
actor ``one_for_one`` by its kind's `Supervision`, with nothing to set up.
`supervise` is for your own trio tasks: it runs a group of them under OTP's
strategies (``one_for_one``, ``one_for_all``, ``rest_for_one``) and nests
into trees. Both space restarts out by one `Backoff` rule and count them
against intensity in a `RestartWindow`.
"""

from .._retry import Backoff as Backoff
from ._cell import ActorCell as ActorCell
from ._controls import Control as Control
from ._lane import Lane as Lane
from ._log_actor import current_actor as current_actor
from ._restore import restore as restore
from ._services import CellServices as CellServices
from ._states import CellState as CellState
from ._tree import ChildSpec as ChildSpec
from ._tree import Strategy as Strategy
from ._tree import supervise as supervise

__all__ = [
    "ActorCell",
    "Backoff",
    "CellServices",
    "CellState",
    "ChildSpec",
    "Control",
    "Lane",
    "Strategy",
    "current_actor",
    "restore",
    "supervise",
]
