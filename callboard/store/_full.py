"""A full disk, logged once an episode however many writes it refuses.

A write that finds the disk full is rolled back and refused (nothing
accepted); a sender may meet thousands of those a second, so the store logs
the first refusal of an episode only. On a disk that is nearly full, a write
that fits in space SQLite's files already hold (a WAL that starts over from
its beginning) still commits between refusals: that does not end the
episode. It ends with a commit once the filesystem has `SPACE_AGAIN` free,
and that is logged once too.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

import attrs

__all__ = ["SPACE_AGAIN", "FullDisk"]

log = logging.getLogger("callboard.store")

SPACE_AGAIN = 1024 * 1024
"""Bytes free on the data directory's filesystem that end an episode of a full disk."""


def _is_full(exc: sqlite3.Error) -> bool:
    return (getattr(exc, "sqlite_errorcode", 0) & 0xFF) == sqlite3.SQLITE_FULL


@attrs.define
class FullDisk:
    """Whether the disk of ``directory`` is full, as the writer has seen it (used by
    the writer alone, one batch at a time)."""

    directory: Path
    full: bool = False

    def refused(self, exc: sqlite3.Error) -> None:
        """A write failed with ``exc`` and was rolled back."""
        if _is_full(exc) and not self.full:
            self.full = True
            log.error(
                "the disk is full (%s): the store refuses writes, accepting nothing, until "
                "space is freed on the filesystem of %s", exc, self.directory,
            )  # fmt: skip

    def committed(self) -> None:
        """A write committed: an episode ends if there is room again."""
        if self.full:
            stat = os.statvfs(self.directory)
            if stat.f_bavail * stat.f_frsize >= SPACE_AGAIN:
                self.full = False
                log.warning("the store has space again in %s: writes go on", self.directory)
