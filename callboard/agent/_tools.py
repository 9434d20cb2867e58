"""Running one tool call of a turn: the file tools and foreground ``shell_run``.

Every refusal (unknown tool, bad arguments, a path outside the workspace, a
command that failed to start) is an answer for the model, which corrects
itself from it, never a failure of the turn. Cancelling a call stops it:
the file tools finish their one atomic step first (they run in a thread that
is not abandoned), ``shell_run`` stops the command's whole process group.

Background jobs are not offered yet (they need the job actor): ``shell_run``
here waits for its command, and stops it at its timeout.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Literal

import trio

from ..errors import ToolError
from ..tools import FILE_TOOL_NAMES, Workspace, parse_arguments, run_file_tool
from ..tools._executor import LocalExecutor
from ..tools._shell import shell_run

__all__ = [
    "SESSION_TOOLS",
    "SHELL_OUTPUT_CAP",
    "SHELL_TIMEOUT",
    "SHELL_TIMEOUT_MAX",
    "default_jobs_root",
    "run_tool",
]

SESSION_TOOLS: tuple[str, ...] = (*FILE_TOOL_NAMES, "shell_run")
"""The tools a session offers the model."""

SHELL_TIMEOUT = 120.0
"""Seconds a command runs when the model gives no timeout."""

SHELL_TIMEOUT_MAX = 600.0
"""The longest timeout the model may ask for."""

SHELL_OUTPUT_CAP = 32 * 1024
"""Bytes of a command's output the model reads; the middle of longer output is cut."""

ToolStatus = Literal["ok", "error"]


def default_jobs_root() -> Path:
    """Where job files go: ``$CALLBOARD_JOBS_DIR``, else a per-user temporary directory."""
    configured = os.environ.get("CALLBOARD_JOBS_DIR")
    if configured:
        return Path(configured).absolute()
    return Path(tempfile.gettempdir()) / f"callboard-jobs-{os.getuid()}"


async def run_tool(
    name: str,
    arguments: str,
    *,
    workspace: Path,
    offered: tuple[str, ...],
    owner: str,
    jobs_root: Path,
) -> tuple[str, ToolStatus]:
    """Run the call ``name(arguments)``; return what the model reads and ``ok`` or ``error``.

    Not cancel-atomic: cancelled, a file tool completes and a command is
    stopped, and nothing is returned.
    """
    try:
        if name not in offered:
            raise ToolError(
                f"there is no tool named {name!r} here; the tools are {', '.join(offered)}"
            )
        args = parse_arguments(name, arguments)
        ws = Workspace.from_path(workspace)
        if name == "shell_run":
            return await _shell(args, ws, owner, jobs_root)
        # The file tools never wait, but they fsync: keep that off the event loop.
        result = await trio.to_thread.run_sync(run_file_tool, ws, name, args)
    except (ToolError, ValueError, OSError) as exc:
        return f"error: {exc}", "error"
    return result, "ok"


async def _shell(
    args: dict[str, object], ws: Workspace, owner: str, jobs_root: Path
) -> tuple[str, ToolStatus]:
    if args.get("background"):
        raise ToolError(
            "background jobs are not available in this session yet; run the command in the "
            "foreground (without background) with a timeout long enough for it"
        )
    timeout = args.get("timeout", SHELL_TIMEOUT)
    assert isinstance(timeout, int | float)
    result = await shell_run(
        str(args["command"]),
        workspace=ws.root,
        executor=LocalExecutor(),
        jobs_root=jobs_root,
        owner=owner,
        timeout=min(float(timeout), SHELL_TIMEOUT_MAX),
        background_on_timeout=False,
        output_cap=SHELL_OUTPUT_CAP,
    )
    return result.text, "ok" if result.exit_code == 0 else "error"
