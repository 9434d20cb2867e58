"""Bytes cut at a limit, made whole again as text."""

from __future__ import annotations

__all__ = ["complete_utf8_prefix"]


def complete_utf8_prefix(data: bytes) -> int:
    """The length of ``data`` without a UTF-8 sequence cut off at its end
    (what a byte limit leaves of a character it cut through)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: look further back for its lead
        need = 1 if byte < 0xC0 else 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
        return len(data) - back if need > back else len(data)
    return len(data)
