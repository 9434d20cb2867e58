"""Where an agent's shell runs: the ``executor`` option of a session's or task's spec.

None runs commands on this machine. ``{"ssh": {"host": ..., "port": ...,
"user": ..., "identity_file": ..., "options": [...]}}`` runs them on another
through the system ``ssh`` (`callboard.tools.SshExecutor`); the workspace and
the jobs directory are then paths on that machine. The description itself
is stored (in the spec, and in each ``job`` actor's ``watch``), and the
executor is made from it where it is used (`callboard.jobs.executor_from`).

`RunSpec` (in `callboard.views`, which the client shares) checks only the
description's shape; ``check_executor`` builds it, as the host does, and the
``task`` kind calls it at spawn (``_confinement.check_executor_host``).
"""

from __future__ import annotations

from typing import Any

from ..errors import ToolError
from ..jobs import executor_from
from ..tools import Confinement
from ..views import check_key_env

# ``check_key_env`` is pure and lives with `RunSpec` in `callboard.views`; it is
# named here too, next to ``check_executor``, for the specs of this layer.

__all__ = ["check_executor", "check_key_env"]


def check_executor(instance: Any, attribute: Any, description: object) -> None:
    """An attrs validator: raise TypeError unless ``description`` is an executor.

    TypeError, not ValueError: the store's structure errors keep a TypeError's
    message (see the note in ``_session_spec``).
    """
    if description is None:
        return
    if not isinstance(description, dict):
        expected = "null or {'ssh': {'host': ...}}"
        raise TypeError(f"'executor' must be {expected}, got {description!r}")
    try:
        executor_from(description, confinement=Confinement())  # only checks the description
    except (ToolError, ValueError, TypeError) as exc:
        raise TypeError(f"'executor': {exc}") from None
