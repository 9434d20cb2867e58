"""The file tools: read, write, edit and list inside a workspace.

They are sync functions because they never wait: they touch local files only,
and a FIFO or device, which could block an open or a read forever, is refused
rather than opened for reading. Each result is a string the model reads; each
refusal is a ``ToolError`` (``PathEscape`` for a path that leads out) whose
message names the path as the model sent it, so the model can correct itself.

Every file is opened relative to a descriptor of its directory with
``O_NOFOLLOW`` (see ``Workspace.directory_fd``), so a symbolic link swapped in
after the path was checked is refused, not followed. Writes go to a temporary
file in the same directory, are synced, then renamed over the target with
``os.replace``: a reader sees the old content or the new, never half of it.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from callboard.errors import PathEscape, ToolError

from ._workspace import Workspace

__all__ = [
    "MAX_EDIT_BYTES",
    "MAX_LIST_ENTRIES",
    "MAX_READ_BYTES",
    "edit_file",
    "list_dir",
    "read_file",
    "write_file",
]

MAX_READ_BYTES = 64 * 1024
"""The most one ``read_file`` returns: enough to be useful, small enough for a context."""

MAX_EDIT_BYTES = 8 * 1024 * 1024
"""The largest file ``edit_file`` loads whole; bigger ones are rewritten with ``write_file``."""

MAX_LIST_ENTRIES = 1000
"""The most entries one ``list_dir`` returns."""

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def read_file(ws: Workspace, path: str, *, offset: int = 0, limit: int = MAX_READ_BYTES) -> str:
    """Return the text of ``path`` from byte ``offset``, at most ``limit`` bytes of it.

    ``limit`` is capped at ``MAX_READ_BYTES``. When the file goes on past what
    is shown, a last line says which bytes were shown and which ``offset`` reads
    on, so the model never mistakes part of a file for all of it. A cut never
    splits a UTF-8 character; bytes that are not UTF-8 read as U+FFFD.

    Raises:
        ToolError: the file is missing, is not a regular file, or ``offset`` is
            past its end.
        PathEscape: ``path`` leads outside the workspace.
    """
    _require_int("offset", offset, minimum=0)
    _require_int("limit", limit, minimum=1)
    limit = min(limit, MAX_READ_BYTES)
    target = ws.resolve(path)
    with _open_regular(ws, target, path, verb="read") as (fd, size):
        if offset > size:
            raise ToolError(
                f"could not read {path!r}: offset {offset} is past its end ({size} bytes)"
            )
        data = _pread(fd, limit, offset)
    if not data:
        return f"[{path!r} is empty]" if size == 0 else f"[{path!r} has no bytes after {offset}]"
    if offset + len(data) >= size:
        return data.decode("utf-8", "replace")
    text, used = _decode_whole_characters(data)
    end = offset + used
    return f"{text}\n[cut: showing bytes {offset}-{end} of {size}; read again with offset={end}]"


def write_file(ws: Workspace, path: str, content: str) -> str:
    """Make ``path`` hold exactly ``content`` (UTF-8), creating missing directories.

    The write is atomic and durable: temporary file, ``fsync``, ``os.replace``,
    then ``fsync`` of the directory. A replaced file keeps its permissions.

    Raises:
        ToolError: ``path`` is a directory or not a regular file, or
            ``content`` cannot be encoded.
        PathEscape: ``path`` leads outside the workspace.
    """
    data = _encode(path, "content", content)
    target = ws.resolve(path)
    if target == ws.root:
        raise ToolError(f"could not write {path!r}: it is the workspace root, a directory")
    try:
        with ws.directory_fd(target.parent, create=True) as dir_fd:
            created = _replace_atomically(dir_fd, target.name, data)
    except OSError as exc:
        raise _refusal(ws, exc, path, verb="write") from exc
    return f"{'created' if created else 'replaced'} {path!r}: {len(data)} bytes"


def edit_file(ws: Workspace, path: str, old: str, new: str, *, replace_all: bool = False) -> str:
    """Replace the exact text ``old`` with ``new`` in ``path``.

    ``old`` must appear exactly once unless ``replace_all`` is set: replacing
    the wrong one of several look-alike lines is the mistake this guards
    against. The refusal says how many times ``old`` appears.

    Raises:
        ToolError: ``old`` is empty, equals ``new``, appears zero times, or
            several times without ``replace_all``; the file is missing, too
            large, or not UTF-8 text.
        PathEscape: ``path`` leads outside the workspace.
    """
    if not isinstance(old, str) or not isinstance(new, str):
        raise ToolError(f"could not edit {path!r}: old and new must both be strings")
    if not old:
        raise ToolError(
            f"could not edit {path!r}: the text to replace is empty; "
            f"to write a whole file use write_file"
        )
    if old == new:
        raise ToolError(f"could not edit {path!r}: the text to replace equals its replacement")
    target = ws.resolve(path)
    with _open_regular(ws, target, path, verb="edit") as (fd, size):
        if size > MAX_EDIT_BYTES:
            raise ToolError(
                f"could not edit {path!r}: it has {size} bytes, more than the "
                f"{MAX_EDIT_BYTES} edit_file loads; rewrite it with write_file instead"
            )
        data = _pread(fd, MAX_EDIT_BYTES + 1, 0)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"could not edit {path!r}: it is not UTF-8 text") from None
    count = text.count(old)
    if count == 0:
        raise ToolError(
            f"could not edit {path!r}: the text to replace appears 0 times in it; "
            f"read the file and copy the text exactly, whitespace included"
        )
    if count > 1 and not replace_all:
        raise ToolError(
            f"could not edit {path!r}: the text to replace appears {count} times in it; "
            f"include more of the surrounding text to make it unique, "
            f"or set replace_all to replace all {count}"
        )
    edited = _encode(path, "new", text.replace(old, new))
    try:
        with ws.directory_fd(target.parent) as dir_fd:
            _replace_atomically(dir_fd, target.name, edited)
    except OSError as exc:
        raise _refusal(ws, exc, path, verb="edit") from exc
    return f"edited {path!r}: replaced {count} occurrence{'' if count == 1 else 's'}"


def list_dir(ws: Workspace, path: str = ".", *, limit: int = MAX_LIST_ENTRIES) -> str:
    """List the entries of the directory ``path``, one a line, sorted by name.

    A directory ends in ``/``; a symbolic link reads ``name -> target`` (it is
    shown, not followed). Past ``limit`` entries a last line says how many were
    left out.

    Raises:
        ToolError: ``path`` is missing or is not a directory.
        PathEscape: ``path`` leads outside the workspace.
    """
    _require_int("limit", limit, minimum=1)
    target = ws.resolve(path)
    try:
        with ws.directory_fd(target) as dir_fd, os.scandir(dir_fd) as scan:
            entries = sorted(_describe(entry, dir_fd) for entry in scan)
    except NotADirectoryError as exc:
        if target.is_file():
            raise ToolError(
                f"could not list {path!r}: it is a file, not a directory; use read_file"
            ) from exc
        raise _refusal(ws, exc, path, verb="list") from exc
    except OSError as exc:
        raise _refusal(ws, exc, path, verb="list") from exc
    if not entries:
        return f"[{path!r} is empty]"
    shown = "\n".join(entries[:limit])
    if len(entries) <= limit:
        return shown
    return f"{shown}\n[cut: showing {limit} of {len(entries)} entries]"


@contextlib.contextmanager
def _open_regular(
    ws: Workspace, target: Path, given: str, *, verb: str
) -> Iterator[tuple[int, int]]:
    """Open the regular file ``target`` for reading; yield its descriptor and size.

    ``O_NONBLOCK`` keeps the open of a FIFO from waiting for a writer; the
    ``fstat`` after it refuses anything that is not a regular file.
    """
    if target == ws.root:
        raise ToolError(
            f"could not {verb} {given!r}: it is the workspace root, a directory; "
            f"use list_dir to see what it holds"
        )
    try:
        with ws.directory_fd(target.parent) as dir_fd:
            fd = os.open(target.name, _OPEN_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise _refusal(ws, exc, given, verb=verb) from exc
    try:
        info = os.fstat(fd)
        mode = info.st_mode
        if stat.S_ISDIR(mode):
            raise ToolError(f"could not {verb} {given!r}: it is a directory; use list_dir")
        if not stat.S_ISREG(mode):
            raise ToolError(
                f"could not {verb} {given!r}: it is not a regular file "
                f"(a FIFO, socket or device), which the file tools do not open"
            )
        yield fd, info.st_size
    finally:
        os.close(fd)


def _replace_atomically(dir_fd: int, name: str, data: bytes) -> bool:
    """Put ``data`` at ``name`` in ``dir_fd`` atomically; say whether it was created.

    ``os.replace`` swaps the directory entry itself: if ``name`` became a
    symbolic link meanwhile, the link is replaced and its target left alone.
    """
    try:
        old: os.stat_result | None = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    if old is not None and stat.S_ISDIR(old.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", name)
    if old is not None and not stat.S_ISREG(old.st_mode) and not stat.S_ISLNK(old.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", name)
    temp = f".{name[:32]}.{secrets.token_hex(6)}.callboard-tmp"
    fd = os.open(temp, _CREATE_FLAGS, 0o666, dir_fd=dir_fd)
    try:
        try:
            if old is not None and stat.S_ISREG(old.st_mode):
                os.fchmod(fd, stat.S_IMODE(old.st_mode))
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise
    os.fsync(dir_fd)  # makes the rename itself durable
    return old is None


def _pread(fd: int, limit: int, offset: int) -> bytes:
    """Read up to ``limit`` bytes at ``offset``; ``os.pread`` may return fewer."""
    chunks: list[bytes] = []
    while limit > 0:
        chunk = os.pread(fd, limit, offset)
        if not chunk:
            break
        chunks.append(chunk)
        limit -= len(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _decode_whole_characters(data: bytes) -> tuple[str, int]:
    """Decode ``data`` but leave out a character cut in half at its end.

    Returns the text and how many bytes it used, which is where the next read
    starts. If no whole character fits (a tiny ``limit``), everything is used
    so a reader always makes progress.
    """
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    text = decoder.decode(data, final=False)
    pending = len(decoder.getstate()[0])
    if pending == len(data):
        return data.decode("utf-8", "replace"), len(data)
    return text, len(data) - pending


def _describe(entry: os.DirEntry[str], dir_fd: int) -> str:
    if entry.is_symlink():
        try:
            return f"{entry.name} -> {os.readlink(entry.name, dir_fd=dir_fd)}"
        except OSError:
            return f"{entry.name} -> ?"
    return f"{entry.name}/" if entry.is_dir(follow_symlinks=False) else entry.name


def _encode(path: str, field: str, text: object) -> bytes:
    if not isinstance(text, str):
        raise ToolError(f"could not write {path!r}: {field} must be a string")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError(
            f"could not write {path!r}: {field} holds {text[exc.start : exc.end]!r} "
            f"at character {exc.start}, which is not valid in UTF-8"
        ) from None


def _require_int(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ToolError(f"{name} must be a whole number of at least {minimum}, got {value!r}")


def _refusal(ws: Workspace, exc: OSError, given: str, *, verb: str) -> ToolError:
    """Translate an ``OSError`` into a sentence naming the path the model gave."""
    if exc.errno == errno.ELOOP:
        return PathEscape(
            f"could not {verb} {given!r}: it is a symbolic link the workspace "
            f"{str(ws.root)!r} does not follow (a loop, or a link made after the path "
            f"was checked)"
        )
    reasons = {
        errno.ENOENT: "it does not exist; use list_dir to see what is there",
        errno.ENOTDIR: "a part of the path is a file, not a directory",
        errno.EISDIR: "it is a directory",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
        errno.EINVAL: "it is not a regular file",
        errno.ENOSPC: "the disk is full",
    }
    reason = reasons.get(exc.errno or 0, exc.strerror or str(exc))
    return ToolError(f"could not {verb} {given!r}: {reason}")
