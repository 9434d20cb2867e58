"""Tokens kept in the data directory: the operator's, and scoped ones for clients.

Two files, both created with mode 0600 so that only the user who owns the
data directory can read them (that is what makes the CLI's "no extra step"
safe: a process that cannot read the file cannot connect):

- ``<data>/token``: the operator token, one line of random text, made on the
  first start. `ensure_operator_token` writes it to a temporary file, fsyncs
  it and links it into place, so a crash never leaves a half-written token
  and two servers starting at once agree on one.
- ``<data>/tokens.json``: client tokens, each with a name, an access level
  (``read`` or ``write``) and the actors it reaches. Only a SHA-256 of each
  token is stored: the token itself is shown once, when it is made.

`TokenFile` is what the gateway reads; it notices a changed ``tokens.json``
(by its size and modification time) at the next authentication, so
``callboard token add`` takes effect without a restart.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import attrs

from .._local import TOKEN_FILE, read_token
from ..errors import BadRequest, CallboardError
from ._grants import Grant, check_patterns

__all__ = [
    "CLIENT_TOKENS_FILE",
    "OPERATOR_TOKEN_FILE",
    "ClientToken",
    "TokenFile",
    "add_client_token",
    "ensure_operator_token",
    "list_client_tokens",
    "read_token",
    "remove_client_token",
]

OPERATOR_TOKEN_FILE = TOKEN_FILE
CLIENT_TOKENS_FILE = "tokens.json"

log = logging.getLogger("callboard.gateway")

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _write_private(path: Path, text: str, *, replace: bool) -> bool:
    """Write ``text`` to ``path`` with mode 0600, durably; False if it existed and
    ``replace`` is false (then the file is left as it was)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)  # unlike rename, never replaces a token already there
            except FileExistsError:
                return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)  # the new name survives a power loss too
    finally:
        os.close(dir_fd)
    return True


def ensure_operator_token(data: str | os.PathLike[str]) -> Path:
    """The path of ``<data>/token``, made with a new random token if there is none.

    The data directory is created (mode 0700) if missing. An empty token file
    (a crash of an old version while writing it) is replaced.
    """
    directory = Path(data)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / OPERATOR_TOKEN_FILE
    try:
        if path.read_text(encoding="utf-8").strip():
            return path
        replace = True
    except FileNotFoundError:
        replace = False
    _write_private(path, secrets.token_urlsafe(32) + "\n", replace=replace)
    return path


@attrs.frozen
class ClientToken:
    """A scoped token as stored (its SHA-256, never the token)."""

    name: str
    sha256: str = attrs.field(repr=False)
    access: Literal["read", "write"]
    actors: tuple[str, ...]

    def grant(self) -> Grant:
        return Grant(self.name, self.access, self.actors)


def _load(path: Path) -> list[ClientToken]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise CallboardError(f"cannot read the client tokens in {str(path)!r}: {exc}") from None
    tokens = []
    for item in raw.get("tokens", []) if isinstance(raw, dict) else []:
        try:
            tokens.append(
                ClientToken(
                    str(item["name"]), str(item["sha256"]), item["access"], tuple(item["actors"])
                )
            )
        except (KeyError, TypeError) as exc:
            raise CallboardError(f"a client token in {str(path)!r} is malformed: {exc}") from None
    return tokens


def _save(path: Path, tokens: list[ClientToken]) -> None:
    items: list[dict[str, Any]] = [
        {"name": t.name, "sha256": t.sha256, "access": t.access, "actors": list(t.actors)}
        for t in tokens
    ]
    _write_private(path, json.dumps({"version": 1, "tokens": items}, indent=2) + "\n", replace=True)


@contextlib.contextmanager
def _editing(path: Path) -> Iterator[None]:
    """One edit of ``tokens.json`` at a time (read, change, write), across processes:
    two ``callboard token`` commands at once must not undo each other's change."""
    fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def list_client_tokens(data: str | os.PathLike[str]) -> list[ClientToken]:
    """The client tokens of the data directory, in the order they were added."""
    return _load(Path(data) / CLIENT_TOKENS_FILE)


def add_client_token(
    data: str | os.PathLike[str],
    name: str,
    *,
    access: Literal["read", "write"],
    actors: tuple[str, ...] | list[str],
) -> str:
    """Make a client token named ``name``; returns the token (it is stored only hashed).

    ``actors`` are address patterns: ``KIND/NAME``, ``KIND/*`` (or just
    ``KIND``) for a whole kind, ``*`` for every actor.

    Raises:
        BadRequest: a bad name, access or pattern, or a name already in use.
    """
    if name == "operator":
        raise BadRequest("'operator' names the operator token; pick another name")
    if not name or len(name) > 64 or not set(name) <= _NAME_CHARS:
        raise BadRequest(f"a token name is 1-64 letters, digits, '-', '_' or '.', got {name!r}")
    if access not in ("read", "write"):
        raise BadRequest(f"a token's access is 'read' or 'write', got {access!r}")
    patterns = check_patterns(tuple(actors))
    path = Path(data) / CLIENT_TOKENS_FILE
    Path(data).mkdir(mode=0o700, parents=True, exist_ok=True)
    with _editing(path):
        tokens = _load(path)
        if any(t.name == name for t in tokens):
            raise BadRequest(
                f"a client token named {name!r} exists; remove it first "
                f"(callboard token remove {name})"
            )
        token = f"cbt_{secrets.token_urlsafe(32)}"
        _save(path, [*tokens, ClientToken(name, _digest(token), access, patterns)])
    return token


def remove_client_token(data: str | os.PathLike[str], name: str) -> None:
    """Remove the client token ``name``; its connections are refused from their next hello.

    Raises:
        BadRequest: there is no token of that name.
    """
    path = Path(data) / CLIENT_TOKENS_FILE
    with _editing(path):
        tokens = _load(path)
        kept = [t for t in tokens if t.name != name]
        if len(kept) == len(tokens):
            raise BadRequest(f"there is no client token named {name!r}")
        _save(path, kept)


class TokenFile:
    """Who a presented token is: the operator, a client token, or nobody.

    ``operator`` is the operator token itself; ``clients`` the path of
    ``tokens.json`` (None for none), read again whenever it changes.
    """

    def __init__(self, operator: str, clients: Path | None) -> None:
        self._operator = operator.encode()
        self._path = clients
        self._seen: tuple[int, int] | None = None
        self._by_digest: dict[str, Grant] = {}

    def authenticate(self, presented: str) -> Grant | None:
        if secrets.compare_digest(presented.encode(), self._operator):
            return Grant.operator()
        self._refresh()
        # A lookup by digest: timing tells nothing about the token itself.
        return self._by_digest.get(_digest(presented))

    def _refresh(self) -> None:
        if self._path is None:
            return
        try:
            st = os.stat(self._path)
            seen = (st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            seen = None
        if seen == self._seen:
            return
        try:
            tokens = _load(self._path) if seen is not None else []
        except CallboardError as exc:
            # Keep the tokens read last: a half-edited file must not lock everyone out.
            log.error("%s; the client tokens read before stay in force", exc)
            self._seen = seen
            return
        self._by_digest = {t.sha256: t.grant() for t in tokens}
        self._seen = seen
