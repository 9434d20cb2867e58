"""The agent's kinds, offered to the runtime: `builtin_kinds`.

The runtime registers only the kinds it is given; this is where the agent
layer hands over its own (``session``, ``task``, and the ``job`` kind their
shell tools start), bound to the settings they read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..actors import Actor
from ..jobs import Job
from ._outage import check_settings
from ._session import Session
from ._task import Task

__all__ = ["builtin_kinds"]


def builtin_kinds(settings: Mapping[str, Any] | None = None) -> tuple[type[Actor], ...]:
    """``session``, ``task`` and ``job``, each bound to ``settings`` (its actors
    see them in ``ctx.settings``). Pass the result as `open_runtime`'s ``kinds``
    (with your own kinds, if any).

    The settings read, each optional: ``workspace`` (where a task without one
    works; made absolute here), ``model_url`` and ``model`` (the model new
    sessions and tasks use), ``context_window`` (the tokens a request to that
    model may reach before the conversation is compacted), ``jobs_dir``
    (default ``<data_dir>/jobs``; made absolute here), ``job_output_cap`` and
    ``job_output_interval`` (how much of a job's output is kept, 1 MiB, and how
    often it is copied while the job runs, 0.5 s), ``prices`` (per-token prices
    of models for specs' ``max_cost``: ``{"MODEL": {"input": P, "output": P}}``),
    ``outage_retry_limit``, ``outage_retry_for``, ``outage_backoff_initial``,
    ``outage_backoff_max`` and ``model_call_attempts`` (how a turn waits for a
    model server that is down, ``_outage``; a value that cannot work raises
    `ConfigurationError` here), and
    the confinement the operator allows: ``workspace_roots``,
    ``allowed_model_urls``, ``allowed_key_envs``, ``allowed_ssh_hosts``,
    ``secret_env``, ``private_paths``, ``sandbox`` (see ``callboard serve``).
    """
    bound = dict(settings or {})
    window = bound.get("context_window")
    if window is not None and (type(window) is not int or window <= 0):
        raise ValueError(
            f"the setting 'context_window' must be a positive number of tokens, got {window!r}"
        )
    for key in ("workspace", "jobs_dir"):
        if bound.get(key) is not None:
            # Once, at start-up, before any actor runs: against the directory
            # the app started in, not the one a tool happens to run in.
            bound[key] = str(Path(os.fspath(bound[key])).resolve())
    check_settings(bound)  # here, not at the first turn of every session
    return tuple(cls.with_settings(bound) for cls in (Session, Task, Job))
