"""Views a caller shares with the server: what `inspect`, `list` and the task
operations take and answer, the same types from an embedded runtime and
over the wire.

- ``_actors``: `ActorInfo`, `ActorView` (``list``, ``inspect``).
- ``_run_spec``: `RunSpec`, how a task is spawned, and the approval words.

Below the store and the runtime in the layers, so `callboard.client` can
import them without loading either.
"""

from ._actors import ActorInfo as ActorInfo
from ._actors import ActorView as ActorView
from ._run_spec import APPROVALS as APPROVALS
from ._run_spec import DEFAULT_TASK_SYSTEM_PROMPT as DEFAULT_TASK_SYSTEM_PROMPT
from ._run_spec import Approval as Approval
from ._run_spec import RunSpec as RunSpec

__all__ = [
    "APPROVALS",
    "DEFAULT_TASK_SYSTEM_PROMPT",
    "ActorInfo",
    "ActorView",
    "Approval",
    "RunSpec",
]
