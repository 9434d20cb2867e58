"""A session or task whose spec names an SSH executor runs its shell through the real sshd.

The server is the loopback ``sshd`` of ``test_shell_ssh`` (its fixture is
imported, not copied). The far side is this machine, so the test proves the
command ran over ssh by what only an ssh login has: ``$SSH_CONNECTION``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from scripted_model import ScriptedModel, text, tool_call
from session_helpers import ADDRESS, KINDS, NAME, Watch, spec
from shell_helpers import JOBS_DIR, marked_processes, no_leaked_job_processes  # noqa: F401
from task_helpers import kinds_in
from task_helpers import spec as task_spec
from test_shell_ssh import Server, sshd  # noqa: F401

import callboard
from callboard.agent import Settled, Succeeded, Tasks
from callboard.errors import BadRequest


def ssh_executor(server: Server) -> dict[str, Any]:
    """The spec's ``executor`` for the test's sshd, as JSON."""
    executor = server.executor
    return {
        "ssh": {
            "host": executor.host,
            "port": executor.port,
            "user": executor.user,
            "identity_file": str(executor.identity_file),
            "options": list(executor.options),
        }
    }


async def test_a_session_with_an_ssh_executor_runs_shell_run_on_the_ssh_host(
    sshd: Server,  # noqa: F811
    tmp_path: Path,
    workspace: Path,
) -> None:
    command = 'echo "$SSH_CONNECTION" > where.txt; echo remote-ok'
    script = [tool_call("shell_run", {"command": command}), text("ran it")]
    settings = {"jobs_dir": str(tmp_path / JOBS_DIR)}
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(tmp_path / "data", kinds=KINDS, settings=settings) as rt:
            await rt.spawn(
                "session", spec(model, workspace, executor=ssh_executor(sshd)), name=NAME
            )
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "run it over there")
                await watch.until("turn.completed")
    [finished] = watch.of("tool.finished")
    assert (finished["status"], finished["result"]) == ("ok", "remote-ok\n")
    client_ip, _client_port, server_ip, server_port = (workspace / "where.txt").read_text().split()
    assert (client_ip, server_ip, int(server_port)) == ("127.0.0.1", "127.0.0.1", sshd.port)
    assert len(model.requests) == 2


async def test_a_task_with_an_ssh_executor_runs_a_background_job_on_the_ssh_host(
    sshd: Server,  # noqa: F811
    tmp_path: Path,
    workspace: Path,
) -> None:
    command = 'echo "$SSH_CONNECTION" > where.txt; echo remote-job'
    script = [
        tool_call("shell_run", {"command": command, "background": True}),
        text("it runs over there"),
        text("it printed remote-job"),
    ]
    settings = {"jobs_dir": str(tmp_path / JOBS_DIR)}
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(
            tmp_path / "data", kinds=kinds_in(workspace), settings=settings
        ) as rt:
            tasks = Tasks(rt)
            handle = await tasks.spawn(task_spec(model, executor=ssh_executor(sshd)))
            outcome = await tasks.wait(handle, timeout=20)
            view = await rt.inspect(handle)
            [job_id] = view.state["jobs"]
            job = await rt.inspect(f"job/{job_id}")
    assert isinstance(outcome, Settled)
    assert outcome.record.terminal == Succeeded("it printed remote-job")
    assert job.state["executor"] == ssh_executor(sshd)
    assert job.status == "exited"
    event = model.requests[2]["messages"][-1]["content"]
    assert event.startswith(f"[machine event] background job {job_id} finished (exited 0)")
    assert "remote-job\n" in event
    client_ip, _client_port, server_ip, server_port = (workspace / "where.txt").read_text().split()
    assert (client_ip, server_ip, int(server_port)) == ("127.0.0.1", "127.0.0.1", sshd.port)
    assert len(model.requests) == 3


async def test_a_session_spec_with_a_malformed_executor_is_refused(tmp_path: Path) -> None:
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path / "data", kinds=KINDS) as rt:
            with pytest.raises(BadRequest) as raised:
                await rt.spawn(
                    "session", {"workspace": str(tmp_path), "executor": {"ssh": {}}}, name=NAME
                )
    assert str(raised.value) == (
        f"the spec for '{ADDRESS}' is not a valid SessionSpec: invalid type ('executor': a job "
        "executor is None or {'ssh': {'host': ...}}, got {'ssh': {}}) @ $"
    )


async def test_a_session_spec_whose_ssh_options_would_run_a_command_here_is_refused(
    tmp_path: Path,
) -> None:
    """The spec comes from the caller: ProxyCommand would be a shell on the server."""
    pwned = tmp_path / "pwned"
    executor = {"ssh": {"host": "127.0.0.1", "options": [f"ProxyCommand=touch {pwned}"]}}
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path / "data", kinds=KINDS) as rt:
            with pytest.raises(BadRequest, match=r"ssh option 'ProxyCommand' is not allowed"):
                await rt.spawn(
                    "session", {"workspace": str(tmp_path), "executor": executor}, name=NAME
                )
    assert not pwned.exists()
