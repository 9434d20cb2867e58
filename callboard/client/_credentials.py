"""Where a client finds its token when it is not given one: `find_token`.

The order, first found wins:

1. ``token=`` (``--token``): explicit, but visible in ``/proc`` when it is
   a command-line argument, so prefer the next two;
2. ``token_file=`` (``--token-file``), then ``$CALLBOARD_TOKEN``, then
   ``$CALLBOARD_TOKEN_FILE``;
3. for a loopback URL only, the server's own token file,
   ``<data>/token``, where ``data`` is ``data=`` (``--data``), else
   ``$CALLBOARD_DATA``, else ``./callboard-data`` (``callboard serve``'s
   default). Only a loopback server can be the one that wrote it: a token
   found lying in a directory is never sent to another host.

The file is readable by its owner only (mode 0600), so this finds a token
exactly for the user who runs the server.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from .._local import TOKEN_FILE, is_loopback, read_token

__all__ = ["DEFAULT_DATA", "TOKEN_FILE", "find_token"]

DEFAULT_DATA = "./callboard-data"


def find_token(
    url: str,
    token: str | None = None,
    *,
    token_file: str | os.PathLike[str] | None = None,
    data: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """The token to present to ``url``, or None when none is found.

    Raises:
        CallboardError: a token file that was named explicitly cannot be read.
    """
    env = os.environ if environ is None else environ
    if token:
        return token
    if token_file is not None:
        return read_token(token_file, "--token-file")
    if env.get("CALLBOARD_TOKEN"):
        return env["CALLBOARD_TOKEN"]
    if env.get("CALLBOARD_TOKEN_FILE"):
        return read_token(env["CALLBOARD_TOKEN_FILE"], "$CALLBOARD_TOKEN_FILE")
    if not is_loopback(urlsplit(url).hostname or ""):
        return None
    directory = data if data is not None else env.get("CALLBOARD_DATA") or DEFAULT_DATA
    path = Path(directory) / TOKEN_FILE
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None  # not this user's server, or none here: the server will say so
