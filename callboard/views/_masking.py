"""Secrets out of what ``inspect`` shows: a spec with its secret values masked.

A spec names secrets rather than holding them (``api_key_env`` names a
variable), but a person may still put one in: a key named like a secret
(``token``, ``password``, ``api_key``, ...), a URL with a password or a key
in its query. Those values are shown as `MASK`; names of variables
(``*_env``) are not secrets and stay, and nor is a number of model tokens
(``max_tokens``, a budget's limit). Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["MASK", "mask_secrets"]

MASK = "***"
_SECRET_NAME = re.compile(
    r"(secret|token|passw(or)?d|passphrase|api[_-]?key|private[_-]?key|credential|auth)",
    re.IGNORECASE,
)


def _is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name)) and not name.lower().endswith("_env")


def _counts_tokens(name: str, value: Any) -> bool:
    """A count of model tokens (``max_tokens``, ``prompt_tokens``): a number, no secret."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return number and name.lower().endswith("_tokens")


def mask_secrets(value: Any) -> Any:
    """``value`` (JSON) with every secret value replaced by `MASK`."""
    if isinstance(value, dict):
        return {
            k: MASK
            if isinstance(k, str) and _is_secret_name(k) and v and not _counts_tokens(k, v)
            else mask_secrets(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [mask_secrets(v) for v in value]
    if isinstance(value, str) and "://" in value:
        return _mask_url(value)
    return value


def _mask_url(text: str) -> str:
    try:
        parts = urlsplit(text)
        password = parts.password
    except ValueError:
        return text
    netloc = parts.netloc
    if password is not None:
        netloc = f"{parts.username or ''}:{MASK}@{netloc.rpartition('@')[2]}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(_is_secret_name(k) for k, _ in pairs):
            query = urlencode([(k, MASK if _is_secret_name(k) else v) for k, v in pairs])
    if (netloc, query) == (parts.netloc, parts.query):
        return text
    return urlunsplit(parts._replace(netloc=netloc, query=query))
