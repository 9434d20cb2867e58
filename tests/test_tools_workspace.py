"""Workspace confinement, on real files in ``tmp_path``.

The layout in every test: the workspace is ``tmp_path/ws``; next to it lie
``outside.txt``, a directory ``outside/`` holding ``secret.txt``, and a
sibling ``ws-evil/`` whose name starts with the workspace's. Each escape is
its own test and checks that the file outside is byte-for-byte and
mtime-for-mtime what it was, or that nothing was created.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from callboard.errors import PathEscape, ToolError
from callboard.tools import Workspace, edit_file, list_dir, read_file, write_file

OLD_MTIME_NS = 1_000_000_000 * 10**9  # 2001-09-09: any write would move it


def _plant(path: Path, content: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    os.utime(path, ns=(OLD_MTIME_NS, OLD_MTIME_NS))
    return path


def _state(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    (tmp_path / "ws").mkdir()
    return Workspace.from_path(tmp_path / "ws")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    return _plant(tmp_path / "outside.txt", "outside\n")


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    return _plant(tmp_path / "outside" / "secret.txt", "secret\n")


def _escape(path: str, ws: Workspace, resolved: Path, *, link: bool = False) -> str:
    """The exact refusal, as a regex: it names the path given, the root and the real target."""
    root = str(ws.root)
    if link:
        where = f"leads outside the workspace {root!r} through a symbolic link"
    else:
        where = f"is outside the workspace {root!r}"
    message = (
        f"the path {path!r} {where} (it resolves to {str(resolved)!r}); "
        f"use a path inside the workspace"
    )
    return f"^{re.escape(message)}$"


def test_a_relative_path_resolves_under_the_workspace_root(ws: Workspace) -> None:
    assert ws.resolve("src/main.py") == ws.root / "src" / "main.py"


def test_dot_resolves_to_the_workspace_root(ws: Workspace) -> None:
    assert ws.resolve(".") == ws.root


def test_an_absolute_path_inside_the_workspace_is_allowed(ws: Workspace) -> None:
    assert ws.resolve(str(ws.root / "a.txt")) == ws.root / "a.txt"


def test_dot_dot_that_stays_inside_the_workspace_is_allowed(ws: Workspace) -> None:
    assert ws.resolve("sub/../a.txt") == ws.root / "a.txt"


def test_a_symlink_that_stays_inside_the_workspace_is_followed(ws: Workspace) -> None:
    (ws.root / "real").mkdir()
    (ws.root / "alias").symlink_to("real")
    assert ws.resolve("alias/a.txt") == ws.root / "real" / "a.txt"


def test_a_workspace_built_from_a_symlinked_directory_is_rooted_at_the_real_one(
    tmp_path: Path, ws: Workspace
) -> None:
    (tmp_path / "link-to-ws").symlink_to(ws.root)
    assert Workspace.from_path(tmp_path / "link-to-ws").root == ws.root


def test_a_workspace_root_that_is_not_resolved_is_refused(ws: Workspace) -> None:
    with pytest.raises(ValueError, match=r"^the workspace root must be an absolute path"):
        Workspace(ws.root / "..")


def test_a_workspace_root_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    with pytest.raises(ValueError, match=rf"^the workspace root {re.escape(repr(missing))} is"):
        Workspace.from_path(missing)


def test_an_empty_path_is_refused(ws: Workspace) -> None:
    with pytest.raises(ToolError, match=r"^the path is empty; give a file or directory"):
        ws.resolve("")


def test_a_path_with_a_nul_byte_is_refused(ws: Workspace) -> None:
    with pytest.raises(ToolError, match=r"^the path 'a\\x00b' contains a NUL byte"):
        ws.resolve("a\0b")


def test_the_escape_message_names_the_path_given_and_the_workspace_root(
    ws: Workspace, outside: Path
) -> None:
    with pytest.raises(PathEscape) as caught:
        ws.resolve("../outside.txt")
    assert str(caught.value) == (
        f"the path '../outside.txt' is outside the workspace {str(ws.root)!r} "
        f"(it resolves to {str(outside)!r}); use a path inside the workspace"
    )


def test_a_write_to_dot_dot_outside_is_refused_and_the_outside_file_is_untouched(
    ws: Workspace, outside: Path
) -> None:
    before = _state(outside)
    with pytest.raises(PathEscape, match=_escape("../outside.txt", ws, outside)):
        write_file(ws, "../outside.txt", "pwned")
    assert _state(outside) == before


def test_a_write_to_sub_dot_dot_dot_dot_outside_is_refused_and_the_outside_file_is_untouched(
    ws: Workspace, outside: Path
) -> None:
    before = _state(outside)
    with pytest.raises(PathEscape, match=_escape("sub/../../outside.txt", ws, outside)):
        write_file(ws, "sub/../../outside.txt", "pwned")
    assert _state(outside) == before
    assert not (ws.root / "sub").exists()


def test_a_write_to_an_absolute_path_outside_is_refused_and_the_outside_file_is_untouched(
    ws: Workspace, outside: Path
) -> None:
    assert outside.is_absolute()
    before = _state(outside)
    with pytest.raises(PathEscape, match=_escape(str(outside), ws, outside)):
        write_file(ws, str(outside), "pwned")
    assert _state(outside) == before


def test_a_read_of_dot_dot_outside_is_refused(ws: Workspace, outside: Path) -> None:
    with pytest.raises(PathEscape, match=_escape("../outside.txt", ws, outside)):
        read_file(ws, "../outside.txt")


def test_a_read_of_an_absolute_path_outside_is_refused(ws: Workspace, outside: Path) -> None:
    with pytest.raises(PathEscape, match=_escape(str(outside), ws, outside)):
        read_file(ws, str(outside))


def test_a_write_into_the_sibling_ws_evil_by_absolute_path_is_refused_and_nothing_is_created(
    tmp_path: Path, ws: Workspace
) -> None:
    evil = _plant(tmp_path / "ws-evil" / "keep.txt", "keep\n")
    before = _state(evil)
    target = tmp_path / "ws-evil" / "new.txt"
    with pytest.raises(PathEscape, match=_escape(str(target), ws, target)):
        write_file(ws, str(target), "pwned")
    assert not target.exists()
    assert _state(evil) == before
    assert sorted(os.listdir(tmp_path / "ws-evil")) == ["keep.txt"]


def test_a_write_into_the_sibling_ws_evil_by_dot_dot_is_refused_and_its_file_is_untouched(
    tmp_path: Path, ws: Workspace
) -> None:
    evil = _plant(tmp_path / "ws-evil" / "keep.txt", "keep\n")
    before = _state(evil)
    with pytest.raises(PathEscape, match=_escape("../ws-evil/keep.txt", ws, evil)):
        write_file(ws, "../ws-evil/keep.txt", "pwned")
    assert _state(evil) == before


def test_the_sibling_ws_evil_does_not_count_as_inside_the_workspace(
    tmp_path: Path, ws: Workspace
) -> None:
    assert str(tmp_path / "ws-evil").startswith(str(ws.root))
    assert ws.contains(tmp_path / "ws-evil" / "x") is False
    assert ws.contains(ws.root / "x") is True


def test_a_write_through_a_symlink_to_a_directory_outside_is_refused_and_nothing_is_created(
    ws: Workspace, secret: Path
) -> None:
    (ws.root / "door").symlink_to(secret.parent)
    before = _state(secret)
    resolved = secret.parent / "new.txt"
    with pytest.raises(PathEscape, match=_escape("door/new.txt", ws, resolved, link=True)):
        write_file(ws, "door/new.txt", "pwned")
    assert not resolved.exists()
    assert _state(secret) == before
    assert sorted(os.listdir(secret.parent)) == ["secret.txt"]


def test_a_write_over_a_file_through_a_symlink_to_a_directory_outside_is_refused(
    ws: Workspace, secret: Path
) -> None:
    (ws.root / "door").symlink_to(secret.parent)
    before = _state(secret)
    with pytest.raises(PathEscape, match=_escape("door/secret.txt", ws, secret, link=True)):
        write_file(ws, "door/secret.txt", "pwned")
    assert _state(secret) == before


def test_a_read_through_a_symlink_to_a_directory_outside_is_refused(
    ws: Workspace, secret: Path
) -> None:
    (ws.root / "door").symlink_to(secret.parent)
    with pytest.raises(PathEscape, match=_escape("door/secret.txt", ws, secret, link=True)):
        read_file(ws, "door/secret.txt")


def test_listing_a_symlink_to_a_directory_outside_is_refused(ws: Workspace, secret: Path) -> None:
    (ws.root / "door").symlink_to(secret.parent)
    with pytest.raises(PathEscape, match=_escape("door", ws, secret.parent, link=True)):
        list_dir(ws, "door")


def test_a_write_through_a_symlink_to_a_file_outside_is_refused_and_the_outside_file_is_untouched(
    ws: Workspace, outside: Path
) -> None:
    (ws.root / "link.txt").symlink_to(outside)
    before = _state(outside)
    with pytest.raises(PathEscape, match=_escape("link.txt", ws, outside, link=True)):
        write_file(ws, "link.txt", "pwned")
    assert _state(outside) == before
    assert (ws.root / "link.txt").is_symlink()


def test_a_read_through_a_symlink_to_a_file_outside_is_refused(
    ws: Workspace, outside: Path
) -> None:
    (ws.root / "link.txt").symlink_to(outside)
    with pytest.raises(PathEscape, match=_escape("link.txt", ws, outside, link=True)):
        read_file(ws, "link.txt")


def test_an_edit_through_a_symlink_to_a_file_outside_is_refused_and_the_file_is_untouched(
    ws: Workspace, outside: Path
) -> None:
    (ws.root / "link.txt").symlink_to(outside)
    before = _state(outside)
    with pytest.raises(PathEscape, match=_escape("link.txt", ws, outside, link=True)):
        edit_file(ws, "link.txt", "outside", "pwned")
    assert _state(outside) == before


def test_a_write_through_a_dangling_symlink_pointing_outside_is_refused_and_creates_nothing(
    tmp_path: Path, ws: Workspace
) -> None:
    target = tmp_path / "created-outside.txt"
    (ws.root / "dangling").symlink_to(target)
    with pytest.raises(PathEscape, match=_escape("dangling", ws, target, link=True)):
        write_file(ws, "dangling", "pwned")
    assert not target.exists()
    assert sorted(os.listdir(tmp_path)) == ["ws"]


def test_a_write_through_a_relative_dangling_symlink_pointing_outside_is_refused(
    tmp_path: Path, ws: Workspace
) -> None:
    (ws.root / "dangling").symlink_to("../nowhere/created.txt")
    target = tmp_path / "nowhere" / "created.txt"
    with pytest.raises(PathEscape, match=_escape("dangling", ws, target, link=True)):
        write_file(ws, "dangling", "pwned")
    assert sorted(os.listdir(tmp_path)) == ["ws"]


def test_a_directory_swapped_for_a_symlink_after_the_check_is_not_followed(
    ws: Workspace, secret: Path
) -> None:
    (ws.root / "sub").mkdir()
    target = ws.resolve("sub/secret.txt")
    (ws.root / "sub").rmdir()
    (ws.root / "sub").symlink_to(secret.parent)
    with (
        pytest.raises(PathEscape, match=r"passes through 'sub', which became a symbolic link"),
        ws.directory_fd(target.parent),
    ):
        pass  # pragma: no cover - the walk refuses before yielding


def test_a_missing_directory_is_created_by_the_walk_only_when_asked(ws: Workspace) -> None:
    target = ws.resolve("a/b")
    with pytest.raises(FileNotFoundError):
        with ws.directory_fd(target):
            pass  # pragma: no cover - the walk refuses before yielding
    assert not (ws.root / "a").exists()
    with ws.directory_fd(target, create=True) as fd:
        assert os.listdir(fd) == []
    assert (ws.root / "a" / "b").is_dir()


def test_a_symlink_loop_is_refused_rather_than_followed(ws: Workspace) -> None:
    (ws.root / "loop").symlink_to("loop")
    with pytest.raises(PathEscape, match=r"^could not read 'loop': it is a symbolic link the "):
        read_file(ws, "loop")


# Hidden paths: the data directory (with the server's token) inside the workspace.


@pytest.fixture
def hidden(tmp_path: Path) -> Workspace:
    """A workspace holding ``data/token``, with ``data`` hidden from the file tools."""
    root = tmp_path / "ws"
    root.mkdir()
    _plant(root / "data" / "token", "s3cret-token\n")
    return Workspace.from_path(root, hidden=[root / "data"])


def _hidden(path: str, ws: Workspace, resolved: Path) -> str:
    """The exact refusal of a hidden path, as a regex."""
    message = (
        f"the path {path!r} is inside {str(ws.root / 'data')!r}, which is hidden from the "
        f"agent (it resolves to {str(resolved)!r}); use another path in the workspace"
    )
    return f"^{re.escape(message)}$"


@pytest.mark.parametrize("path", ["data/token", "./data/../data/token", "sub/../data/token"])
def test_reading_a_file_in_a_hidden_directory_is_refused_like_an_escape(
    hidden: Workspace, path: str
) -> None:
    with pytest.raises(PathEscape, match=_hidden(path, hidden, hidden.root / "data" / "token")):
        read_file(hidden, path)


def test_the_hidden_directory_itself_can_be_neither_listed_nor_read_by_absolute_path(
    hidden: Workspace,
) -> None:
    data = hidden.root / "data"
    with pytest.raises(PathEscape, match=_hidden("data", hidden, data)):
        list_dir(hidden, "data")
    with pytest.raises(PathEscape, match=_hidden(str(data / "token"), hidden, data / "token")):
        read_file(hidden, str(data / "token"))


def test_a_symlink_into_a_hidden_directory_is_refused(hidden: Workspace) -> None:
    (hidden.root / "innocent").symlink_to("data")
    target = hidden.root / "data" / "token"
    with pytest.raises(PathEscape, match=_hidden("innocent/token", hidden, target)):
        read_file(hidden, "innocent/token")


def test_writing_or_editing_in_a_hidden_directory_is_refused_and_changes_nothing(
    hidden: Workspace,
) -> None:
    token = hidden.root / "data" / "token"
    before = _state(token)
    with pytest.raises(PathEscape, match=_hidden("data/new", hidden, hidden.root / "data" / "new")):
        write_file(hidden, "data/new", "x")
    with pytest.raises(PathEscape, match=_hidden("data/token", hidden, token)):
        edit_file(hidden, "data/token", "s3cret", "mine")
    with pytest.raises(PathEscape, match=_hidden("data/token", hidden, token)):
        write_file(hidden, "data/token", "overwritten")
    assert _state(token) == before
    assert sorted(p.name for p in token.parent.iterdir()) == ["token"]


def test_a_sibling_whose_name_starts_like_the_hidden_directory_is_not_hidden(
    hidden: Workspace,
) -> None:
    """Components are compared, not prefixes: data-public is not data."""
    write_file(hidden, "data-public/notes.txt", "hello\n")
    assert read_file(hidden, "data-public/notes.txt").endswith("hello\n")


def test_a_hidden_path_given_through_a_symlink_hides_its_real_place(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    _plant(root / "data" / "token", "s3cret-token\n")
    (tmp_path / "data-link").symlink_to(root / "data")
    ws = Workspace.from_path(root, hidden=[tmp_path / "data-link"])
    assert ws.hidden == (root / "data",)
    with pytest.raises(PathEscape, match=r"which is hidden from the agent"):
        read_file(ws, "data/token")


def test_a_relative_hidden_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^a hidden path must be absolute, got 'data'$"):
        Workspace.from_path(tmp_path, hidden=["data"])
