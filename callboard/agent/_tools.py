"""Running one tool call of a turn: the file tools, ``shell_run`` and the job tools.

Every refusal (unknown tool, bad arguments, a path outside the workspace, a
command that failed to start, a job that is not the caller's) is an answer
for the model, which corrects itself from it, never a failure of the turn.
Cancelling a call stops it: the file tools finish their one atomic step
first (they run in a thread that is not abandoned), ``shell_run`` stops the
command's whole process group unless it was handed over as a job.

Background jobs need an owner that keeps them: a session or task passes its
`JobTools` (``_job_tools``) as ``jobs``, and ``shell_run`` then runs through
the owner's executor and puts a command in the background when asked, or
when it outlives its timeout (unless the owner turned that off). Without an
owner, ``shell_run`` runs on this machine, waits for its command and stops
it at its timeout, and the job tools answer that there are no jobs.

Either way the host's `Confinement` applies: a command without an owner
runs in the same sandbox, and the file tools refuse its hidden paths.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import trio

from ..errors import ToolError
from ..jobs import executor_from
from ..tools import (
    FILE_TOOL_NAMES,
    Confinement,
    Workspace,
    parse_arguments,
    run_file_tool,
    shell_run,
)
from ._job_tools import JOB_TOOL_NAMES, JobTools

__all__ = [
    "SESSION_TOOLS",
    "SHELL_OUTPUT_CAP",
    "SHELL_TIMEOUT",
    "SHELL_TIMEOUT_MAX",
    "run_tool",
]

SESSION_TOOLS: tuple[str, ...] = (*FILE_TOOL_NAMES, "shell_run", *JOB_TOOL_NAMES)
"""The tools a session offers the model."""

SHELL_TIMEOUT = 120.0
"""Seconds a command runs when the model gives no timeout."""

SHELL_TIMEOUT_MAX = 600.0
"""The longest timeout the model may ask for."""

SHELL_OUTPUT_CAP = 32 * 1024
"""Bytes of a command's output the model reads; the middle of longer output is cut."""

ToolStatus = Literal["ok", "error"]


async def run_tool(
    name: str,
    arguments: str,
    *,
    workspace: Path,
    offered: tuple[str, ...],
    owner: str,
    jobs_root: Path,
    confinement: Confinement,
    jobs: JobTools | None = None,
) -> tuple[str, ToolStatus]:
    """Run the call ``name(arguments)``; return what the model reads and ``ok`` or ``error``.

    ``confinement`` is the host's (``Confinement.from_settings``); ``jobs``
    are the owner's job tools (None: no background jobs here), whose
    executor is confined by it already.
    Not cancel-atomic: cancelled, a file tool completes and a command is
    stopped, and nothing is returned.
    """
    try:
        if name not in offered:
            raise ToolError(
                f"there is no tool named {name!r} here; the tools are {', '.join(offered)}"
            )
        args = parse_arguments(name, arguments)
        if name in JOB_TOOL_NAMES:
            if jobs is None:
                raise ToolError(f"{name}: there are no background jobs here")
            return await jobs.run(name, args), "ok"
        ws = Workspace.from_path(workspace, hidden=confinement.hidden_paths)
        if name == "shell_run":
            return await _shell(args, ws, owner, jobs_root, confinement, jobs)
        # The file tools never wait, but they fsync: keep that off the event loop.
        result = await trio.to_thread.run_sync(run_file_tool, ws, name, args)
    except (ToolError, ValueError, OSError) as exc:
        return f"error: {exc}", "error"
    return result, "ok"


async def _shell(
    args: dict[str, object],
    ws: Workspace,
    owner: str,
    jobs_root: Path,
    confinement: Confinement,
    jobs: JobTools | None,
) -> tuple[str, ToolStatus]:
    background = bool(args.get("background"))
    if background and jobs is None:
        raise ToolError(
            "background jobs are not available here; run the command in the foreground "
            "(without background) with a timeout long enough for it"
        )
    executor = jobs.executor if jobs is not None else executor_from(None, confinement=confinement)
    timeout = args.get("timeout", SHELL_TIMEOUT)
    assert isinstance(timeout, int | float)
    result = await shell_run(
        str(args["command"]),
        workspace=ws.root,
        executor=executor,
        jobs_root=jobs.jobs_root if jobs is not None else jobs_root,
        owner=owner,
        timeout=min(float(timeout), SHELL_TIMEOUT_MAX),
        background=background,
        background_on_timeout=jobs is not None and jobs.background_on_timeout,
        output_cap=SHELL_OUTPUT_CAP,
    )
    if result.job is not None:
        assert jobs is not None  # only an owner's shell_run hands a job back
        jobs.adopt(result.job)
        return result.text, "ok"
    return result.text, "ok" if result.exit_code == 0 else "error"
