"""The file tools and their dispatch, on real files in ``tmp_path``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import trio

from callboard.errors import ToolError
from callboard.tools import (
    MAX_READ_BYTES,
    Workspace,
    edit_file,
    list_dir,
    read_file,
    run_file_tool,
    write_file,
)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    (tmp_path / "ws").mkdir()
    return Workspace.from_path(tmp_path / "ws")


def test_reading_a_small_file_returns_its_exact_text(ws: Workspace) -> None:
    (ws.root / "a.txt").write_bytes(b"one\ntwo\r\n")
    assert read_file(ws, "a.txt") == "one\ntwo\r\n"


def test_reading_a_big_file_is_cut_and_says_where_to_read_on(ws: Workspace) -> None:
    (ws.root / "big.txt").write_bytes(b"x" * 200_000)
    assert MAX_READ_BYTES == 65536
    assert read_file(ws, "big.txt") == "x" * 65536 + (
        "\n[cut: showing bytes 0-65536 of 200000; read again with offset=65536]"
    )


def test_reading_on_from_the_offset_the_cut_gave_returns_the_rest_without_a_note(
    ws: Workspace,
) -> None:
    (ws.root / "big.txt").write_bytes(b"a" * 65536 + b"b" * 10)
    assert read_file(ws, "big.txt", offset=65536) == "b" * 10


def test_a_limit_above_the_cap_is_held_to_the_cap(ws: Workspace) -> None:
    (ws.root / "big.txt").write_bytes(b"x" * 70_000)
    text = read_file(ws, "big.txt", limit=1_000_000)
    assert text.endswith("\n[cut: showing bytes 0-65536 of 70000; read again with offset=65536]")


def test_a_cut_never_splits_a_utf8_character(ws: Workspace) -> None:
    (ws.root / "euro.txt").write_text("ab€cd", encoding="utf-8")  # € is 3 bytes
    assert read_file(ws, "euro.txt", limit=3) == (
        "ab\n[cut: showing bytes 0-2 of 7; read again with offset=2]"
    )
    assert read_file(ws, "euro.txt", offset=2, limit=3) == (
        "€\n[cut: showing bytes 2-5 of 7; read again with offset=5]"
    )


def test_bytes_that_are_not_utf8_read_as_replacement_characters(ws: Workspace) -> None:
    (ws.root / "bin").write_bytes(b"a\xffb")
    assert read_file(ws, "bin") == "a\ufffdb"


def test_reading_an_empty_file_says_it_is_empty(ws: Workspace) -> None:
    (ws.root / "empty").write_bytes(b"")
    assert read_file(ws, "empty") == "['empty' is empty]"


def test_reading_past_the_end_is_refused_with_the_size(ws: Workspace) -> None:
    (ws.root / "a.txt").write_bytes(b"12345")
    with pytest.raises(ToolError, match=r"^could not read 'a.txt': offset 6 is past its end \(5 "):
        read_file(ws, "a.txt", offset=6)


def test_reading_a_missing_file_is_refused_naming_it(ws: Workspace) -> None:
    with pytest.raises(ToolError, match=r"^could not read 'nope.txt': it does not exist; use "):
        read_file(ws, "nope.txt")


def test_reading_a_directory_is_refused_pointing_at_list_dir(ws: Workspace) -> None:
    (ws.root / "d").mkdir()
    with pytest.raises(ToolError, match=r"^could not read 'd': it is a directory; use list_dir$"):
        read_file(ws, "d")


def test_a_negative_offset_is_refused(ws: Workspace) -> None:
    (ws.root / "a.txt").write_bytes(b"1")
    with pytest.raises(ToolError, match=r"^offset must be a whole number of at least 0, got -1$"):
        read_file(ws, "a.txt", offset=-1)


async def test_reading_a_fifo_is_refused_at_once_instead_of_waiting_for_a_writer(
    ws: Workspace,
) -> None:
    fifo = ws.root / "pipe"
    os.mkfifo(fifo)
    try:
        with trio.fail_after(5):
            with pytest.raises(ToolError, match=r"^could not read 'pipe': it is not a regular"):
                await trio.to_thread.run_sync(read_file, ws, "pipe", abandon_on_cancel=True)
    finally:
        # Should the open ever block, a writer end releases the abandoned thread.
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass  # no reader is waiting: nothing to release


def test_a_write_creates_the_file_and_its_parent_directories(ws: Workspace) -> None:
    assert write_file(ws, "a/b/c.txt", "héllo\n") == "created 'a/b/c.txt': 7 bytes"
    assert (ws.root / "a" / "b" / "c.txt").read_bytes() == "héllo\n".encode()


def test_a_write_replaces_the_whole_content_and_keeps_the_permissions(ws: Workspace) -> None:
    script = ws.root / "run.sh"
    script.write_text("old content that is longer\n")
    script.chmod(0o751)
    assert write_file(ws, "run.sh", "new\n") == "replaced 'run.sh': 4 bytes"
    assert script.read_text() == "new\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o751


def test_a_write_is_atomic_and_leaves_no_temporary_file(ws: Workspace) -> None:
    (ws.root / "a.txt").write_text("before")
    inode_before = (ws.root / "a.txt").stat().st_ino
    write_file(ws, "a.txt", "after")
    assert os.listdir(ws.root) == ["a.txt"]
    assert (ws.root / "a.txt").stat().st_ino != inode_before  # renamed into place
    assert (ws.root / "a.txt").read_text() == "after"


def test_a_write_over_a_directory_is_refused_and_leaves_no_temporary_file(
    ws: Workspace,
) -> None:
    (ws.root / "d").mkdir()
    with pytest.raises(ToolError, match=r"^could not write 'd': it is a directory$"):
        write_file(ws, "d", "x")
    assert os.listdir(ws.root) == ["d"]
    assert os.listdir(ws.root / "d") == []


def test_a_write_of_text_that_utf8_cannot_hold_is_refused_and_writes_nothing(
    ws: Workspace,
) -> None:
    with pytest.raises(ToolError, match=r"^could not write 'a.txt': content holds '\\ud800' at "):
        write_file(ws, "a.txt", "ok\ud800")
    assert os.listdir(ws.root) == []


def test_an_edit_replaces_the_one_occurrence(ws: Workspace) -> None:
    (ws.root / "a.py").write_text("x = 1\ny = 2\n")
    assert edit_file(ws, "a.py", "y = 2", "y = 3") == "edited 'a.py': replaced 1 occurrence"
    assert (ws.root / "a.py").read_text() == "x = 1\ny = 3\n"
    assert os.listdir(ws.root) == ["a.py"]


def test_an_edit_whose_text_appears_0_times_is_refused_with_the_count(ws: Workspace) -> None:
    (ws.root / "a.py").write_text("x = 1\n")
    with pytest.raises(
        ToolError, match=r"^could not edit 'a.py': the text to replace appears 0 times in it; "
    ):
        edit_file(ws, "a.py", "y = 1", "y = 2")
    assert (ws.root / "a.py").read_text() == "x = 1\n"


def test_an_edit_whose_text_appears_2_times_is_refused_with_the_count(ws: Workspace) -> None:
    (ws.root / "a.py").write_text("x = 1\nx = 1\n")
    with pytest.raises(
        ToolError,
        match=r"^could not edit 'a.py': the text to replace appears 2 times in it; .* "
        r"or set replace_all to replace all 2$",
    ):
        edit_file(ws, "a.py", "x = 1", "x = 2")
    assert (ws.root / "a.py").read_text() == "x = 1\nx = 1\n"


def test_an_edit_with_replace_all_replaces_every_occurrence_and_counts_them(
    ws: Workspace,
) -> None:
    (ws.root / "a.py").write_text("x = 1\nx = 1\nx = 1\n")
    result = edit_file(ws, "a.py", "x = 1", "x = 2", replace_all=True)
    assert result == "edited 'a.py': replaced 3 occurrences"
    assert (ws.root / "a.py").read_text() == "x = 2\nx = 2\nx = 2\n"


def test_an_edit_with_empty_old_text_is_refused(ws: Workspace) -> None:
    (ws.root / "a.py").write_text("x\n")
    with pytest.raises(ToolError, match=r"^could not edit 'a.py': the text to replace is empty"):
        edit_file(ws, "a.py", "", "y")


def test_an_edit_of_a_file_that_is_not_utf8_is_refused_and_leaves_it_alone(
    ws: Workspace,
) -> None:
    (ws.root / "bin").write_bytes(b"a\xffb")
    with pytest.raises(ToolError, match=r"^could not edit 'bin': it is not UTF-8 text$"):
        edit_file(ws, "bin", "a", "c")
    assert (ws.root / "bin").read_bytes() == b"a\xffb"


def test_a_listing_is_sorted_with_directories_marked_and_links_shown(ws: Workspace) -> None:
    (ws.root / "b.txt").write_text("")
    (ws.root / "a_dir").mkdir()
    (ws.root / ".hidden").write_text("")
    (ws.root / "link").symlink_to("b.txt")
    assert list_dir(ws) == ".hidden\na_dir/\nb.txt\nlink -> b.txt"


def test_a_listing_past_the_limit_is_cut_and_says_how_many_there_are(ws: Workspace) -> None:
    for i in range(5):
        (ws.root / f"f{i}").write_text("")
    assert list_dir(ws, ".", limit=3) == "f0\nf1\nf2\n[cut: showing 3 of 5 entries]"


def test_listing_an_empty_directory_says_it_is_empty(ws: Workspace) -> None:
    (ws.root / "d").mkdir()
    assert list_dir(ws, "d") == "['d' is empty]"


def test_listing_a_file_is_refused_pointing_at_read_file(ws: Workspace) -> None:
    (ws.root / "a.txt").write_text("")
    with pytest.raises(
        ToolError, match=r"^could not list 'a.txt': it is a file, not a directory; use read_file$"
    ):
        list_dir(ws, "a.txt")


def test_listing_a_missing_directory_is_refused_naming_it(ws: Workspace) -> None:
    with pytest.raises(ToolError, match=r"^could not list 'gone': it does not exist; use "):
        list_dir(ws, "gone")


def test_run_file_tool_dispatches_each_file_tool(ws: Workspace) -> None:
    assert run_file_tool(ws, "write_file", {"path": "n.txt", "content": "a a"}) == (
        "created 'n.txt': 3 bytes"
    )
    assert run_file_tool(
        ws, "edit_file", {"path": "n.txt", "old": "a", "new": "b", "replace_all": True}
    ) == ("edited 'n.txt': replaced 2 occurrences")
    assert run_file_tool(ws, "read_file", {"path": "n.txt", "offset": 2}) == "b"
    assert run_file_tool(ws, "list_dir", {}) == "n.txt"


def test_run_file_tool_refuses_a_shell_tool(ws: Workspace) -> None:
    with pytest.raises(ToolError, match=r"^'shell_run' is not a file tool; run_file_tool runs "):
        run_file_tool(ws, "shell_run", {"command": "true"})


def test_a_write_through_a_symlink_inside_the_workspace_changes_its_target(
    ws: Workspace,
) -> None:
    (ws.root / "real.txt").write_text("old")
    (ws.root / "alias.txt").symlink_to("real.txt")
    assert write_file(ws, "alias.txt", "new") == "replaced 'alias.txt': 3 bytes"
    assert (ws.root / "real.txt").read_text() == "new"
    assert (ws.root / "alias.txt").is_symlink()
