"""Connections of the PostgreSQL store: the URL, said without its password, and connecting.

A URL may carry a password (``postgresql://user:secret@host/db``). It is
needed to connect, again after a lost connection, and nowhere else: every
message, log line and repr names the URL through `redact`, and an error
from the driver is turned into one of ours with the password taken out and
without the driver's error chained (its text could quote the URL).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import StoreUnavailable

if TYPE_CHECKING:
    import psycopg

__all__ = ["SecretUrl", "connect", "redact", "scrub"]

# Every statement is bounded: a writer that waits on a lock it cannot get
# fails its batch (nothing accepted) rather than hold every sender forever.
# A retention step deletes a few thousand rows at most, well inside it.
STATEMENT_TIMEOUT_MS = 30_000
_CONNECT_TIMEOUT_S = 10


class SecretUrl:
    """A URL that may hold a password: shown (`str`, `repr`, a traceback's
    locals) only redacted; ``secret`` is for connecting and scrubbing."""

    __slots__ = ("secret",)

    def __init__(self, url: str) -> None:
        self.secret = url

    def __str__(self) -> str:
        return redact(self.secret)

    def __repr__(self) -> str:
        return f"SecretUrl({redact(self.secret)!r})"


def redact(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``; anything that does
    not parse as a URL is named only by its scheme."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises on a malformed port: the netloc is not to be trusted
    except ValueError:
        return url.split("://", 1)[0] + "://***"
    if parts.password is None:
        netloc = parts.netloc
    else:
        user = parts.username or ""
        host = parts.netloc.rsplit("@", 1)[1]
        netloc = f"{user}:***@{host}"
    # A password may also be given as a query parameter.
    query = "&".join(
        "password=***" if item.lower().startswith("password=") else item
        for item in parts.query.split("&")
        if item
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _secrets(url: str) -> list[str]:
    found: list[str] = []
    try:
        parts = urlsplit(url)
    except ValueError:
        return [url]
    if parts.password:
        found.append(parts.password)
    for item in parts.query.split("&"):
        if item.lower().startswith("password=") and len(item) > len("password="):
            found.append(item.split("=", 1)[1])
    return found


def scrub(text: str, url: str) -> str:
    """``text`` with every password of ``url`` in it replaced by ``***``."""
    for secret in _secrets(url):
        text = text.replace(secret, "***")
    return text


def connect(url: str, *, autocommit: bool, **options: Any) -> psycopg.Connection[Any]:
    """A connection to ``url``; `StoreUnavailable` naming the redacted URL if none.

    Every connection commits synchronously (``synchronous_commit=on``: a
    COMMIT returns once its WAL is flushed, so an acknowledged write is
    durable, whatever the server's default) and bounds its statements.
    """
    # Imported here: `redact` serves the CLI, which needs no driver for SQLite.
    import psycopg

    try:
        return psycopg.connect(
            url,
            autocommit=autocommit,
            connect_timeout=_CONNECT_TIMEOUT_S,
            application_name="callboard",
            options=f"-c synchronous_commit=on -c statement_timeout={STATEMENT_TIMEOUT_MS}",
            **options,
        )
    except psycopg.Error as exc:
        reason = scrub(str(exc).strip(), url) or type(exc).__name__
        raise StoreUnavailable(
            f"cannot reach the PostgreSQL store at {redact(url)}: {reason}"
        ) from None
