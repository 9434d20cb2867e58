"""The schema version of a data directory: written when it is made, read on every
open, and a version this callboard does not know refused with nothing changed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import trio

import callboard
from callboard.store._schema import SCHEMA_VERSION


def stored_version(data: Path) -> str:
    with sqlite3.connect(data / "callboard.sqlite3") as conn:
        return conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0]


def mark_version(data: Path, version: str) -> None:
    with sqlite3.connect(data / "callboard.sqlite3") as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (version,))


async def test_a_new_data_directory_records_the_schema_version_it_was_made_with(data):
    with trio.fail_after(10):
        async with callboard.open_runtime(data, builtin_kinds=False):
            pass
    assert stored_version(data) == str(SCHEMA_VERSION)


async def test_a_data_directory_of_a_newer_schema_version_is_refused_and_left_as_it_was(data):
    newer = str(SCHEMA_VERSION + 1)
    refusals = []
    with trio.fail_after(10):
        async with callboard.open_runtime(data, builtin_kinds=False):
            pass
        mark_version(data, newer)
        # Twice: the first refusal let go of the directory's lock.
        for _ in range(2):
            with pytest.raises(callboard.DataDirectoryIncompatible) as refused:
                async with callboard.open_runtime(data, builtin_kinds=False):
                    pass
            refusals.append(str(refused.value))
    assert (
        refusals
        == [
            f"the data directory {str(data)!r} has schema version {newer}, newer than version "
            f"{SCHEMA_VERSION} that this callboard supports; open it with the newer callboard "
            "that wrote it, or use another directory"
        ]
        * 2
    )
    assert stored_version(data) == newer


async def test_a_schema_version_that_no_callboard_writes_is_refused(data):
    with trio.fail_after(10):
        async with callboard.open_runtime(data, builtin_kinds=False):
            pass
        mark_version(data, "1.5-beta")
        with pytest.raises(callboard.DataDirectoryIncompatible) as refused:
            async with callboard.open_runtime(data, builtin_kinds=False):
                pass
    assert str(refused.value) == (
        f"the data directory {str(data)!r} has schema version '1.5-beta', which no callboard "
        f"writes (this one supports versions 1 to {SCHEMA_VERSION}); restore it from a backup "
        "or use another directory"
    )
