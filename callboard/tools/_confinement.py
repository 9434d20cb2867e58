"""What the operator allows an agent's commands and file tools, read from the host's settings.

A spec comes from the caller, so nothing in it may turn the sandbox off or
widen it: the confinement comes only from the runtime's settings
(``ctx.settings``), which the operator set when starting the server. Every
place that makes an executor or a workspace for an agent reads it here, so
the keys are read in one place:

``sandbox``
    a :class:`Sandbox` that every local command runs in, or absent (None)
    for none. The runtime's ``data_dir`` and ``jobs_dir`` (the token, the
    store, every job's files) are added to its ``hide``.
``secret_env``
    names of more environment variables that no command gets (beyond
    ``SCRUBBED_NAMES`` and ``SCRUBBED_PREFIXES``); ``NAME*`` is a prefix.
``private_paths``
    absolute paths the file tools refuse, like a path outside the
    workspace (the data directory, a token file). The sandbox's ``hide``
    paths are refused too, so one list set in the sandbox is enough.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping
from typing import Any

import attrs

from ._sandbox import SECRET_DIRS, SECRET_FILES, Sandbox

__all__ = ["Confinement"]


def _names(value: object, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise TypeError(f"the setting {key!r} must be a list of strings, got {value!r}")
    for item in value:
        if not isinstance(item, str):
            raise TypeError(f"the setting {key!r} must be a list of strings, got {value!r}")
    return tuple(value)


def _secret_names(value: object) -> tuple[str, ...]:
    return _names(value, "secret_env")


def _paths(value: object) -> tuple[str, ...]:
    paths = _names(value, "private_paths")
    for path in paths:
        if not os.path.isabs(path):
            raise ValueError(f"the setting 'private_paths' must hold absolute paths, got {path!r}")
    return paths


def _sandbox(_instance: object, _attribute: object, value: Any) -> None:
    if value is not None and not isinstance(value, Sandbox):
        raise TypeError(f"the setting 'sandbox' must be a Sandbox or None, got {value!r}")


@attrs.frozen
class Confinement:
    """The host's confinement of an agent: its sandbox, secret names and private paths.

    The default confines nothing beyond what is always done (no command
    gets callboard's own secrets). Build it from the settings with
    :meth:`from_settings`.
    """

    sandbox: Sandbox | None = attrs.field(default=None, validator=_sandbox)
    secret_env: tuple[str, ...] = attrs.field(default=(), converter=_secret_names)
    private_paths: tuple[str, ...] = attrs.field(default=(), converter=_paths)

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Confinement:
        """The confinement the runtime's ``settings`` name (keys in the module docstring).

        Raises:
            TypeError, ValueError: a key holds something of the wrong kind;
                the message names it.
        """
        sandbox: Any = settings.get("sandbox")
        if isinstance(sandbox, Sandbox):
            own = [settings.get(key) for key in ("data_dir", "jobs_dir")]
            # The private paths too (a token file outside the data directory):
            # what the file tools may not read, no command may read either.
            private = settings.get("private_paths") or ()
            paths = [*own, *(private if isinstance(private, list | tuple) else ())]
            extra = [os.path.abspath(path) for path in paths if isinstance(path, str) and path]
            hide = tuple(dict.fromkeys((*sandbox.hide, *extra)))
            sandbox = attrs.evolve(sandbox, hide=hide)
        return cls(
            sandbox=sandbox,
            secret_env=settings.get("secret_env"),
            private_paths=settings.get("private_paths"),
        )

    @property
    def hidden_paths(self) -> tuple[str, ...]:
        """The paths the file tools refuse: ``private_paths``, the sandbox's ``hide``,
        and the machine's secrets that the sandbox masks (with or without one: the
        file tools run as the server, outside any sandbox)."""
        hidden = self.sandbox.hide if self.sandbox is not None else ()
        secrets = [match for pattern in SECRET_FILES for match in sorted(glob.glob(pattern))]
        return tuple(dict.fromkeys((*self.private_paths, *hidden, *secrets, *SECRET_DIRS)))
