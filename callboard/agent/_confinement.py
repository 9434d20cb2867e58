"""What a spec may ask for: workspaces under the operator's roots, model URLs and keys.

A spec comes from whoever spawns the actor; the limits come from the host
(``ctx.settings``, set by ``callboard serve`` or the embedding app), so a
spec can never widen them. The settings read here, each optional:

- ``workspace_roots``: directories a workspace must lie in (``--workspace-root``).
  Absent: anywhere. Either way ``/`` is refused unless it is itself a root,
  and so is a workspace inside the data directory.
- ``model_url``: the configured model URL; the server's own key
  (``$CALLBOARD_API_KEY``, else ``$OPENAI_API_KEY``, or ``$ANTHROPIC_API_KEY``
  for the ``anthropic`` provider) is sent there and nowhere else.
- ``allowed_model_urls``: other URLs a spec may name (``--allow-model-url``).
  Absent: any URL may be named. A URL other than ``model_url`` gets no key
  unless the spec names one by ``api_key_env``:
- ``allowed_key_envs``: environment variables a spec's ``api_key_env`` may
  name (``--allow-key-env``); the key is read from the server's environment.
- ``allowed_ssh_hosts``: hosts a spec's ssh ``executor`` may name
  (``--allow-ssh-host``). Absent: any. An ssh executor runs with the
  server's own ssh keys and configuration, so a caller must not pick where.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import BadRequest, ConfigurationError, SpecRefused
from ..llm import Provider, key_env_vars
from ._executor_spec import check_executor

__all__ = [
    "check_directory",
    "check_executor_host",
    "check_model",
    "check_spawn_workspace",
    "check_workspace",
    "configured_model_url",
    "confined_workspace",
    "host_workspace",
    "model_key",
    "same_url",
]


def _norm(url: str) -> str:
    return url.strip().rstrip("/")


def same_url(one: str, other: str) -> bool:
    """Whether two model URLs name the same server (a trailing ``/`` aside)."""
    return _norm(one) == _norm(other)


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def check_workspace(workspace: str, settings: Mapping[str, Any]) -> None:
    """Refuse ``workspace`` unless it lies under an allowed root (`SpecRefused`)."""
    # realpath follows every link, so a link under a root cannot lead out of it.
    path = Path(os.path.realpath(workspace))
    roots_setting = settings.get("workspace_roots")
    roots = [Path(os.path.realpath(r)) for r in roots_setting or ()]
    shown = ", ".join(repr(str(r)) for r in roots)
    if path == Path("/") and Path("/") not in roots:
        raise SpecRefused(
            "'/' is never a workspace unless the operator names it with --workspace-root /"
            + (f"; the workspace roots are {shown}" if roots else "")
        )
    data = settings.get("data_dir")
    if data and _under(path, Path(os.path.realpath(data))):
        raise SpecRefused(
            f"the workspace {workspace!r} is inside the server's data directory; pick "
            "a directory outside it"
        )
    if roots_setting is not None and not any(_under(path, root) for root in roots):
        raise SpecRefused(
            f"the workspace {workspace!r} is outside every workspace root ({shown or 'none'}); "
            "pick a directory under one, or have the operator add a root with "
            "--workspace-root DIR"
        )


def check_spawn_workspace(
    workspace: str, executor: dict[str, Any] | None, settings: Mapping[str, Any]
) -> None:
    """At spawn: ``workspace`` lies under a root (`check_workspace`) and, when the
    tools run on this machine, is a directory that exists (`BadRequest`): else
    the spawn would succeed and every tool call fail. A workspace on another
    machine (an ssh ``executor``) is that machine's to check."""
    check_workspace(workspace, settings)
    if not executor:
        check_directory(workspace, "the workspace")


def host_workspace(settings: Mapping[str, Any]) -> str | None:
    """The host's own workspace (a task's when its spec names none), or None.

    `builtin_kinds` makes it absolute; one given as a relative path some other
    way (``open_runtime(settings=...)``) would mean wherever the working
    directory is when a tool runs, so it is refused (`ConfigurationError`).
    """
    workspace = settings.get("workspace")
    if not workspace:
        return None
    if not os.path.isabs(workspace):
        raise ConfigurationError(
            f"the host's workspace {str(workspace)!r} is a relative path; give it to "
            "builtin_kinds({'workspace': ...}), which makes it absolute, or make it absolute"
        )
    return str(workspace)


def check_directory(path: str, what: str) -> None:
    """Refuse ``path`` unless it is a directory that exists (`BadRequest`)."""
    if not os.path.exists(path):
        raise BadRequest(
            f"{what} {path!r} does not exist; create the directory first or name one that exists"
        )
    if not os.path.isdir(path):
        raise BadRequest(f"{what} {path!r} is not a directory; name a directory")


def confined_workspace(workspace: str | os.PathLike[str], settings: Mapping[str, Any]) -> Path:
    """``workspace`` resolved, once more checked against the roots (`SpecRefused`):
    for each use, as what was a directory under a root at spawn may be a link now."""
    path = Path(os.path.realpath(workspace))
    check_workspace(str(path), settings)
    return path


def configured_model_url(settings: Mapping[str, Any]) -> str | None:
    """The model URL the host was configured with, if any."""
    return settings.get("model_url") or os.environ.get("CALLBOARD_MODEL_URL") or None


def check_model(base_url: str | None, api_key_env: str | None, settings: Mapping[str, Any]) -> None:
    """Refuse a spec's model URL or key variable that the operator did not allow."""
    configured = configured_model_url(settings)
    allowed = settings.get("allowed_model_urls")
    if (
        base_url
        and allowed is not None
        and (configured is None or _norm(base_url) != _norm(configured))
    ):
        if _norm(base_url) not in {_norm(u) for u in allowed}:
            named = [u for u in (configured, *allowed) if u]
            raise SpecRefused(
                f"the model URL {base_url!r} is not allowed: a spec may name the configured "
                f"--model-url or one allowed with --allow-model-url (now: "
                f"{', '.join(map(repr, named)) or 'none'})"
            )
    if api_key_env is not None:
        envs = settings.get("allowed_key_envs") or ()
        if api_key_env not in envs:
            raise SpecRefused(
                f"'api_key_env' names {api_key_env!r}, which the operator did not allow: "
                f"allow it with --allow-key-env {api_key_env} (now allowed: "
                f"{', '.join(map(repr, envs)) or 'none'})"
            )


def model_key(
    base_url: str | None,
    api_key_env: str | None,
    settings: Mapping[str, Any],
    provider: Provider = "openai",
) -> str | None:
    """The key to send to ``base_url``: the server's own (the one ``provider``
    reads) only for the configured URL, an allowed ``api_key_env``'s value for
    others, else none."""
    if api_key_env is not None:
        if api_key_env in (settings.get("allowed_key_envs") or ()):
            return os.environ.get(api_key_env, "").strip() or None
        return None
    configured = configured_model_url(settings)
    if base_url and configured and _norm(base_url) == _norm(configured):
        for name in key_env_vars(provider):
            value = os.environ.get(name, "").strip()
            if value:
                return value
    return None


def check_executor_host(executor: Mapping[str, Any] | None, settings: Mapping[str, Any]) -> None:
    """Refuse an executor this host will not run: one it cannot build (a host name
    that is not one, an ssh option off the allowlist) with `BadRequest`, and an ssh
    host the operator did not allow with `SpecRefused`.

    A `RunSpec` checks only its executor's shape (the client builds specs too),
    so this is where a task's executor is built once before it is stored.
    """
    try:
        check_executor(None, None, executor)
    except TypeError as exc:
        raise BadRequest(f"the spec's {exc}") from None
    allowed = settings.get("allowed_ssh_hosts")
    if executor is None or allowed is None:
        return
    host = executor.get("ssh", {}).get("host")
    if host not in allowed:
        raise SpecRefused(
            f"the executor's ssh host {host!r} is not allowed: the operator allows hosts "
            f"with --allow-ssh-host HOST (now: {', '.join(map(repr, allowed)) or 'none'})"
        )


def jobs_dir(settings: Mapping[str, Any]) -> Path:
    """Where the job files of this host's agents live: ``jobs_dir``, else
    ``<data_dir>/jobs``."""
    configured = settings.get("jobs_dir")
    path = Path(configured) if configured else Path(settings["data_dir"]) / "jobs"
    if not path.is_absolute():
        # Relative to whatever the working directory is when a tool runs: it
        # would fail at every start, so the actor fails at once (`Permanent`).
        setting = "the setting 'jobs_dir'" if configured else "the runtime's data directory"
        raise ConfigurationError(
            f"the jobs directory {str(path)!r} (from {setting}) is a relative path; give an "
            "absolute one (builtin_kinds and open_runtime make theirs absolute)"
        )
    return path
