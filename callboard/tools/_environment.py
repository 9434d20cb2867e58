"""The environment a shell command gets: the server's, minus every secret of ours.

The model writes the commands, so whatever a command can read, the model can
read (``env``, ``cat /proc/self/environ``) and send anywhere. The server's
own credentials must therefore never reach one: its model key, its gateway
token, anything it was given as ``CALLBOARD_*``. Everything else (``PATH``,
``HOME``, ``LANG``, proxies...) is passed on, because commands need it.

Pure: no trio. :func:`command_environment` reads ``os.environ`` only when no
``base`` is given.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

__all__ = ["ALIAS_MIN_LENGTH", "SCRUBBED_NAMES", "SCRUBBED_PREFIXES", "command_environment"]

#: Variables no command ever gets, whatever the operator configured: the
#: model keys the LLM client reads (``callboard.llm``).
SCRUBBED_NAMES: tuple[str, ...] = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")

#: Every variable whose name starts with one of these is removed:
#: ``CALLBOARD_API_KEY``, ``CALLBOARD_TOKEN``, ``CALLBOARD_URL`` and any
#: setting of ours added later, secret or not (scrubbing a harmless one costs
#: nothing; forgetting a secret one leaks it).
SCRUBBED_PREFIXES: tuple[str, ...] = ("CALLBOARD_",)

#: A secret's value this long or longer also removes every other variable
#: that holds the same value (``MY_KEY=$OPENAI_API_KEY`` in a profile).
#: Shorter values are flags, not secrets (``CALLBOARD_DEBUG=1``), and
#: matching on them would strip unrelated variables such as ``SHLVL=1``.
ALIAS_MIN_LENGTH = 8


def command_environment(
    secret_env: Iterable[str] = (), base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``base`` (default ``os.environ``) without the secrets, for a command's process.

    Removed: the names in :data:`SCRUBBED_NAMES`, those starting with one of
    :data:`SCRUBBED_PREFIXES`, the operator's ``secret_env`` (exact names, or
    prefixes written ``NAME*``), and any variable whose value equals the
    value of one of those (if it is at least :data:`ALIAS_MIN_LENGTH`
    characters). Names are compared without regard to case, so
    ``callboard_token`` goes too.

    Raises:
        TypeError: an entry of ``secret_env`` is not a string (a bare string
            for ``secret_env`` counts as one name, not as its letters).
        ValueError: an entry is empty, a lone ``*`` or holds ``=``.
    """
    if isinstance(secret_env, str):
        secret_env = (secret_env,)
    names = {name.upper() for name in SCRUBBED_NAMES}
    prefixes = [prefix.upper() for prefix in SCRUBBED_PREFIXES]
    for name in secret_env:
        if not isinstance(name, str):
            raise TypeError(f"a secret_env entry must be a variable name, got {name!r}")
        if not name.rstrip("*") or "=" in name:
            raise ValueError(
                f"the secret_env entry {name!r} is not a variable name (or NAME* for a prefix)"
            )
        if name.endswith("*"):
            prefixes.append(name[:-1].upper())
        else:
            names.add(name.upper())
    environment = dict(os.environ if base is None else base)

    def is_secret(name: str) -> bool:
        upper = name.upper()
        return upper in names or any(upper.startswith(prefix) for prefix in prefixes)

    secrets = {value for name, value in environment.items() if is_secret(name)}
    aliases = {value for value in secrets if len(value) >= ALIAS_MIN_LENGTH}
    return {
        name: value
        for name, value in environment.items()
        if not is_secret(name) and value not in aliases
    }
