"""The `Actor` base, its `Context`, and how it wants to be supervised."""

from ._actor import Actor as Actor
from ._actor import Logs as Logs
from ._context import Context as Context
from ._context import Effects as Effects
from ._policy import OnIntensity as OnIntensity
from ._policy import Restart as Restart
from ._policy import Supervision as Supervision

__all__ = ["Actor", "Context", "Effects", "Logs", "OnIntensity", "Restart", "Supervision"]
