"""Views a caller shares with the server: what `inspect`, `list` and the task
operations answer, the same types from an embedded runtime and over the wire.

Below the store and the runtime in the layers, so `callboard.client` can
import them without loading either.
"""

from ._actors import ActorInfo as ActorInfo
from ._actors import ActorView as ActorView

__all__ = ["ActorInfo", "ActorView"]
