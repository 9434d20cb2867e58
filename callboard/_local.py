"""This machine: which hosts are it, and the token file only its owner reads.

Shared by the gateway (what it may bind without a chosen token; where it
keeps its token) and the client (where it may send a token found on disk).
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from .errors import CallboardError

__all__ = ["TOKEN_FILE", "is_loopback", "read_token"]

TOKEN_FILE = "token"
"""The operator token's file in the data directory."""


def is_loopback(host: str) -> bool:
    """True when ``host`` only accepts connections from this machine.

    A host name other than ``localhost`` may resolve anywhere, so it is not
    loopback; neither are the wildcards ``""``, ``0.0.0.0`` and ``::``.
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_token(path: str | os.PathLike[str], source: str | None = None) -> str:
    """The token in a token file (surrounding white space removed); ``source``
    says in the error where the path came from (``--token-file``).

    Raises:
        CallboardError: the file is missing, unreadable or empty (the message
            names the file).
    """
    named = f"{str(path)!r}" + (f" ({source})" if source else "")
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise CallboardError(f"cannot read the token file {named}: {exc.strerror}") from None
    if not text:
        raise CallboardError(f"the token file {named} is empty")
    return text
