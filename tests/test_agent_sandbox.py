"""An agent's commands and file tools are confined by the host's settings, never by its spec.

A real runtime, a scripted model, the real ``bwrap`` and ``/bin/sh``. The
data directory lies inside the workspace (as ``callboard serve`` run in a
project with ``--data ./data`` has it), with a token file planted in it;
the tests check what the tools answered the model.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio
from scripted_model import ScriptedModel, text, tool_call
from session_helpers import ADDRESS, KINDS, NAME, Watch, spec
from shell_helpers import JOBS_DIR, marked_processes, no_leaked_job_processes  # noqa: F401

import callboard
from callboard.errors import BadRequest
from callboard.tools import Confinement, Sandbox
from callboard.tools._sandbox import SECRET_DIRS, SECRET_FILES

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None and not os.environ.get("CI"),
    reason="needs bwrap (Debian package bubblewrap); CI installs it",
)
TOKEN = "s3cret-gateway-token"


@pytest.fixture
def data(workspace: Path) -> Path:
    """The data directory, inside the workspace, with the server's token in it."""
    path = workspace / "data"
    path.mkdir()
    (path / "token").write_text(TOKEN + "\n")
    return path


async def tool_results(
    data: Path, workspace: Path, settings: dict[str, Any], *calls: Any
) -> list[tuple[str, str]]:
    """Run one prompt whose turn makes ``calls``; (status, result) of each, in order."""
    script = [*calls, text("done")]
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS, settings=settings) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "look around")
                await watch.until("turn.completed")
    return [(e["status"], e["result"]) for e in watch.of("tool.finished")]


@needs_bwrap
async def test_a_sessions_commands_run_in_the_hosts_sandbox_which_hides_the_data_directory(
    data: Path, workspace: Path, tmp_path: Path
) -> None:
    settings = {"jobs_dir": str(tmp_path / JOBS_DIR), "sandbox": Sandbox()}
    command = "ls -A data; grep -rs s3cret . /etc/shadow; echo x > /etc/x; echo end"
    [(status, result)] = await tool_results(
        data, workspace, settings, tool_call("shell_run", {"command": command})
    )
    assert TOKEN not in result
    assert (status, result.splitlines()[-1]) == ("ok", "end")
    assert "Read-only file system" in result
    assert not re.search(r"^(store|token)", result, re.MULTILINE), result


@needs_bwrap
async def test_under_the_sandbox_the_file_tools_refuse_the_data_directory_too(
    data: Path, workspace: Path, tmp_path: Path
) -> None:
    settings = {"jobs_dir": str(tmp_path / JOBS_DIR), "sandbox": Sandbox()}
    [(status, result)] = await tool_results(
        data, workspace, settings, tool_call("read_file", {"path": "data/token"})
    )
    assert status == "error"
    assert result == (
        f"error: the path 'data/token' is inside {str(data)!r}, which is hidden from the agent "
        f"(it resolves to {str(data / 'token')!r}); use another path in the workspace"
    )


async def test_private_paths_are_refused_by_the_file_tools_without_a_sandbox(
    data: Path, workspace: Path, tmp_path: Path
) -> None:
    secret = workspace / "secrets"
    secret.mkdir()
    (secret / "key").write_text("k\n")
    settings = {"jobs_dir": str(tmp_path / JOBS_DIR), "private_paths": (str(secret),)}
    calls = [
        tool_call("read_file", {"path": "secrets/key"}),
        tool_call("write_file", {"path": "secrets/new", "content": "x"}),
        tool_call("read_file", {"path": "data/token"}),
    ]
    results = await tool_results(data, workspace, settings, *calls)
    assert [status for status, _ in results] == ["error", "error", "ok"]
    assert results[0][1].startswith(f"error: the path 'secrets/key' is inside {str(secret)!r}")
    assert results[1][1].startswith(f"error: the path 'secrets/new' is inside {str(secret)!r}")
    assert sorted(p.name for p in secret.iterdir()) == ["key"]


async def test_a_spec_cannot_give_its_ssh_executor_a_secret_env_of_its_own(tmp_path: Path) -> None:
    """secret_env is the host's to set; a spec that names it is refused, not obeyed."""
    executor = {"ssh": {"host": "127.0.0.1", "secret_env": []}}
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path / "data", kinds=KINDS) as rt:
            with pytest.raises(BadRequest, match=r"an ssh executor takes host, .*not 'secret_env'"):
                await rt.spawn(
                    "session", {"workspace": str(tmp_path), "executor": executor}, name=NAME
                )


def test_the_confinement_adds_the_data_and_jobs_directories_to_the_sandboxs_hide() -> None:
    settings = {
        "data_dir": "/srv/cb",
        "jobs_dir": "/srv/cb/jobs",
        "sandbox": Sandbox(hide=("/etc/cb-token",)),
        "secret_env": ["DEPLOY_KEY"],
        "private_paths": ("/srv/private",),
    }
    confinement = Confinement.from_settings(settings)
    # The private paths too: what the file tools may not read, no command may either.
    assert confinement.sandbox == Sandbox(
        hide=("/etc/cb-token", "/srv/cb", "/srv/cb/jobs", "/srv/private")
    )
    assert confinement.secret_env == ("DEPLOY_KEY",)
    own = ("/srv/private", "/etc/cb-token", "/srv/cb", "/srv/cb/jobs")
    assert confinement.hidden_paths == (*own, *_machine_secrets())


def _machine_secrets() -> tuple[str, ...]:
    """What the file tools refuse on any host: the secrets the sandbox masks."""
    files = [match for pattern in SECRET_FILES for match in sorted(glob.glob(pattern))]
    return (*files, *SECRET_DIRS)


def test_without_those_settings_nothing_is_sandboxed_or_hidden() -> None:
    confinement = Confinement.from_settings({"data_dir": "/srv/cb", "jobs_dir": "/srv/cb/jobs"})
    assert confinement == Confinement()
    assert confinement.hidden_paths == _machine_secrets()
    assert "/etc/shadow" in confinement.hidden_paths  # the tests run where it exists


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"sandbox": True}, r"^the setting 'sandbox' must be a Sandbox or None, got True$"),
        ({"secret_env": "KEY"}, r"^the setting 'secret_env' must be a list of strings, got 'KEY'$"),
        ({"private_paths": ["rel"]}, r"^the setting 'private_paths' must hold absolute paths"),
    ],
)
def test_a_setting_of_the_wrong_kind_is_refused_by_name(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        Confinement.from_settings(settings)


async def test_the_file_tools_refuse_the_machines_secrets_even_in_a_workspace_of_slash(
    tmp_path: Path,
) -> None:
    settings = {"jobs_dir": str(tmp_path / JOBS_DIR), "workspace_roots": ["/"]}
    calls = [tool_call("read_file", {"path": "etc/shadow"})]
    results = await tool_results(tmp_path / "data", Path("/"), settings, *calls)
    assert results[0][0] == "error"
    assert "root:" not in results[0][1]


async def test_a_workspace_swapped_for_a_link_out_of_the_roots_after_spawn_is_refused(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    sub = root / "sub"
    sub.mkdir(parents=True)
    settings = {"jobs_dir": str(tmp_path / JOBS_DIR), "workspace_roots": [str(root)]}

    def swap(body: dict[str, Any]) -> Any:
        # Between spawn and the tool call, as another session's shell could.
        sub.rmdir()
        sub.symlink_to(tmp_path)
        return tool_call("read_file", {"path": "secret.txt"})

    (tmp_path / "secret.txt").write_text("outside the roots")
    results = await tool_results(tmp_path / "data", sub, settings, swap)
    assert results[0][0] == "error"
    assert "is outside every workspace root" in results[0][1]
    assert "outside the roots" not in results[0][1]
