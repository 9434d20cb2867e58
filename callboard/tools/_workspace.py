"""The workspace: the one directory the agent's file tools may touch.

Confinement is done twice, on purpose:

1. ``Workspace.resolve`` follows every symbolic link (``os.path.realpath``, which
   also follows a dangling link to where it would lead) and compares the result
   with the root *component by component*, so ``/ws-evil`` is not inside ``/ws``.
   It gives the model a clear refusal naming the path it sent.
2. ``Workspace.directory_fd`` then opens the resolved path one component at a
   time from a descriptor of the root, with ``O_NOFOLLOW``, and the file tools
   open the final component relative to that descriptor with ``O_NOFOLLOW``
   too. A directory swapped for a symbolic link between the check and the use
   (the TOCTOU race) is therefore refused rather than followed out.

A hard link inside the workspace to a file outside it cannot be told apart
from any other file by its path; creating one needs the shell, which has its
own approval.

A workspace may also have ``hidden`` paths (the operator's private paths and
the sandbox's ``hide``: the data directory, a token file). The file tools run
in the server, outside any sandbox, so they refuse those the same way as a
path outside the workspace, even when the data directory lies inside it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

import attrs

from callboard.errors import PathEscape, ToolError

__all__ = ["Workspace"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _check_root(instance: Workspace, attribute: attrs.Attribute[Path], root: Path) -> None:
    if not root.is_absolute() or Path(os.path.realpath(root)) != root:
        raise ValueError(
            f"the workspace root must be an absolute path with no symbolic links or '..' "
            f"(got {str(root)!r}); build it with Workspace.from_path({str(root)!r})"
        )
    if not root.is_dir():
        raise ValueError(f"the workspace root {str(root)!r} is not an existing directory")


def _check_hidden(
    instance: Workspace, attribute: attrs.Attribute[tuple[Path, ...]], hidden: tuple[Path, ...]
) -> None:
    for path in hidden:
        if not path.is_absolute() or Path(os.path.realpath(path)) != path:
            raise ValueError(
                f"a hidden path must be absolute with no symbolic links or '..' (got "
                f"{str(path)!r}); build the workspace with Workspace.from_path(root, hidden=...)"
            )


def _path_tuple(paths: Iterable[Path]) -> tuple[Path, ...]:
    return tuple(paths)


@attrs.frozen
class Workspace:
    """A directory that confines every path a file tool is given.

    ``root`` must already be absolute and resolved, so that the comparison in
    ``resolve`` is exact; ``Workspace.from_path`` does the resolving. No path
    at or below one of the ``hidden`` paths (resolved too) is ever handed out.
    """

    root: Path = attrs.field(validator=_check_root)
    hidden: tuple[Path, ...] = attrs.field(
        default=(),
        kw_only=True,
        converter=_path_tuple,
        validator=_check_hidden,
    )

    @classmethod
    def from_path(
        cls, path: str | os.PathLike[str], *, hidden: Iterable[str | os.PathLike[str]] = ()
    ) -> Workspace:
        """Build a workspace rooted at ``path`` after resolving it, and its ``hidden`` paths.

        Raises:
            ValueError: ``path`` is not an existing directory, or a hidden
                path is not absolute.
        """
        resolved = []
        for hide in hidden:
            if not os.path.isabs(hide):
                raise ValueError(f"a hidden path must be absolute, got {os.fspath(hide)!r}")
            resolved.append(Path(os.path.realpath(os.fspath(hide))))
        return cls(Path(os.path.realpath(os.fspath(path))), hidden=tuple(resolved))

    def resolve(self, path: str) -> Path:
        """Return the real, absolute path that ``path`` names inside the workspace.

        A relative ``path`` is taken from the root; an absolute one must already
        lie inside it. Every symbolic link is followed, including the final
        component and a dangling one, so a file that does not exist yet is
        confined by where writing it would really land.

        Raises:
            ToolError: ``path`` is empty, not a string or holds a NUL byte.
            PathEscape: ``path`` leads outside the workspace, whether through
                ``..``, an absolute path or a symbolic link, or into a hidden
                path.
        """
        if not isinstance(path, str):
            raise ToolError(f"a path must be a string, got {path!r} ({type(path).__name__})")
        if not path:
            raise ToolError("the path is empty; give a file or directory inside the workspace")
        if "\0" in path:
            raise ToolError(f"the path {path!r} contains a NUL byte, which no file name can hold")
        joined = self.root / path  # an absolute ``path`` replaces the root here
        real = Path(os.path.realpath(joined))
        if self.contains(real):
            self._refuse_hidden(real, path)
            return real
        root = str(self.root)
        if self.contains(Path(os.path.normpath(joined))):
            where = f"leads outside the workspace {root!r} through a symbolic link"
        else:
            where = f"is outside the workspace {root!r}"
        raise PathEscape(
            f"the path {path!r} {where} (it resolves to {str(real)!r}); "
            f"use a path inside the workspace"
        )

    def contains(self, path: Path) -> bool:
        """Say whether the absolute ``path`` is the root or below it.

        Components are compared, never string prefixes: ``/ws-evil`` is not
        inside ``/ws``. ``path`` is taken as it is; ``resolve`` it first.
        """
        return path.parts[: len(self.root.parts)] == self.root.parts

    def hides(self, path: Path) -> Path | None:
        """The hidden path that the absolute ``path`` is at or below, or None.

        Components are compared, like ``contains``; ``resolve`` ``path`` first.
        """
        for hidden in self.hidden:
            if path.parts[: len(hidden.parts)] == hidden.parts:
                return hidden
        return None

    def _refuse_hidden(self, real: Path, path: str) -> None:
        hidden = self.hides(real)
        if hidden is not None:
            raise PathEscape(
                f"the path {path!r} is inside {str(hidden)!r}, which is hidden from the "
                f"agent (it resolves to {str(real)!r}); use another path in the workspace"
            )

    @contextlib.contextmanager
    def directory_fd(self, target: Path, *, create: bool = False) -> Iterator[int]:
        """Open the directory ``target`` without following any symbolic link.

        ``target`` comes from ``resolve``. The walk starts at the root and opens
        each component with ``O_NOFOLLOW``, so a component that became a link
        after ``resolve`` checked it is refused instead of followed. With
        ``create``, missing directories are made (and made durable by syncing
        their parent) on the way. The descriptor is closed on exit.

        Raises:
            PathEscape: ``target`` is outside the root or hidden, or a
                component of it is now a symbolic link.
            FileNotFoundError: a component is missing and ``create`` is false.
            NotADirectoryError: a component is a file.
        """
        if not self.contains(target):
            raise PathEscape(
                f"the path {str(target)!r} is outside the workspace {str(self.root)!r}"
            )
        self._refuse_hidden(target, str(target))
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            for part in target.parts[len(self.root.parts) :]:
                child = self._open_child_dir(fd, part, target, create=create)
                os.close(fd)
                fd = child
            yield fd
        finally:
            os.close(fd)

    def _open_child_dir(self, fd: int, part: str, target: Path, *, create: bool) -> int:
        try:
            return os.open(part, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                raise
        except OSError as exc:
            # O_DIRECTORY | O_NOFOLLOW on a link fails with ENOTDIR on Linux and
            # ELOOP elsewhere; only lstat can tell a link from a plain file.
            if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                raise
            if stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode):
                raise PathEscape(
                    f"the path {str(target)!r} in the workspace {str(self.root)!r} passes "
                    f"through {part!r}, which became a symbolic link after the path was "
                    f"checked; it is not followed"
                ) from None
            raise
        with contextlib.suppress(FileExistsError):  # another writer made it first
            os.mkdir(part, 0o777, dir_fd=fd)
        os.fsync(fd)
        return self._open_child_dir(fd, part, target, create=False)
