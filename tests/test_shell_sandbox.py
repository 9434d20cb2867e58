"""Commands in the bubblewrap sandbox, against the real ``bwrap`` and ``/bin/sh``.

The layout in every test: the workspace is ``tmp_path/ws``, and the data
directory (a token file and the job files in it) lies *inside* it, the
nasty case where binding the workspace would show it again. Each test runs
real commands through ``shell_run`` and checks what they printed and what
is on disk afterwards. The tests that run bwrap skip only where it is not
installed and this is not CI (CI installs it, and there a missing bwrap
must fail loudly).
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
from pathlib import Path

import attrs
import pytest
import trio
from child import Child
from job_kinds import Inbox
from shell_helpers import JOBS_DIR, marked_processes, no_leaked_job_processes  # noqa: F401

import callboard
from callboard.errors import ToolError
from callboard.jobs import Job
from callboard.tools import Sandbox, probe_sandbox
from callboard.tools._executor import LocalExecutor
from callboard.tools._procs import group_alive, is_same_process, read_stat
from callboard.tools._sandbox import SCRIPT_PATH
from callboard.tools._shell import JobHandle, ShellResult, shell_run
from callboard.tools._wrapper import parse_exit_status

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None and not os.environ.get("CI"),
    reason="needs bwrap (Debian package bubblewrap); CI installs it",
)
TOKEN = "token-" + secrets.token_hex(8)


@attrs.frozen
class Box:
    workspace: Path
    data: Path
    executor: LocalExecutor


@pytest.fixture
def box(tmp_path: Path) -> Box:
    """A workspace holding a data directory with a token in it, which the sandbox hides."""
    workspace = tmp_path / "ws"
    data = workspace / "data"
    data.mkdir(parents=True)
    (data / "token").write_text(TOKEN + "\n")
    executor = LocalExecutor(sandbox=Sandbox(hide=(str(data),)))
    return Box(workspace, data, executor)


def secret_lines() -> list[str]:
    """The non-empty lines of the secret files this test process can read."""
    lines = []
    for path in ["/etc/shadow", *glob.glob("/etc/ssh/ssh_host_*_key")]:
        if os.access(path, os.R_OK):
            lines += [line for line in Path(path).read_text().splitlines() if line.strip()]
    return lines


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


async def run(box: Box, command: str, **options: object) -> ShellResult:
    settings: dict[str, object] = {"timeout": 10.0, "output_cap": 65536}
    settings.update(options)
    return await shell_run(
        command,
        workspace=box.workspace,
        executor=box.executor,
        jobs_root=box.data / JOBS_DIR,
        owner="session/s1",
        **settings,  # type: ignore[arg-type]
    )


@needs_bwrap
async def test_etc_shadow_and_the_host_keys_read_as_nothing_in_the_sandbox(box: Box) -> None:
    with trio.fail_after(10):
        result = await run(box, "cat /etc/shadow /etc/ssh/ssh_host_*_key; id -u")
    assert result.output.endswith(f"{os.getuid()}\n"), "the uid is the server's"
    assert "root:" not in result.output
    assert "PRIVATE KEY" not in result.output
    for line in secret_lines():
        assert line not in result.output


@needs_bwrap
async def test_writing_outside_the_workspace_fails_and_writing_in_it_works(box: Box) -> None:
    """/var/tmp is writable by anyone on the host; in the sandbox it is read-only."""
    outside = Path("/var/tmp") / f"callboard-sandbox-{secrets.token_hex(6)}"
    command = f'echo no > {outside}; echo "outside $?"; echo yes > inside.txt; echo "inside $?"'
    try:
        with trio.fail_after(10):
            result = await run(box, command)
        assert not outside.exists()
    finally:
        outside.unlink(missing_ok=True)
    assert "Read-only file system" in result.output
    assert result.output.endswith("outside 2\ninside 0\n")
    assert (box.workspace / "inside.txt").read_text() == "yes\n"


@needs_bwrap
async def test_a_hidden_data_directory_inside_the_workspace_is_empty_and_cannot_be_moved(
    box: Box,
) -> None:
    command = "ls -A data; cat data/token; grep -rs token- .; mv data moved; echo end"
    with trio.fail_after(10):
        result = await run(box, command)
    assert TOKEN not in result.output
    assert result.output == (
        "cat: data/token: No such file or directory\n"
        "mv: cannot move 'data' to 'moved': Device or resource busy\n"
        "end\n"
    )
    assert (box.data / "token").read_text() == TOKEN + "\n"


@needs_bwrap
async def test_a_directory_that_holds_the_hidden_one_cannot_be_renamed_to_carry_it_away(
    tmp_path: Path,
) -> None:
    """Renaming ws/app would move ws/app/data, out from under its hide path, for good."""
    workspace = tmp_path / "ws"
    data = workspace / "app" / "state" / "data"
    data.mkdir(parents=True)
    (data / "token").write_text(TOKEN + "\n")
    nested = Box(workspace, data, LocalExecutor(sandbox=Sandbox(hide=(str(data),))))
    command = "mv app gone; mv app/state app/gone; ls -A app/state/data; echo end"
    with trio.fail_after(10):
        result = await run(nested, command)
    assert result.output == (
        "mv: cannot move 'app' to 'gone': Device or resource busy\n"
        "mv: cannot move 'app/state' to 'app/gone': Device or resource busy\n"
        "end\n"
    )
    assert (data / "token").read_text() == TOKEN + "\n"


@needs_bwrap
async def test_a_sandboxed_command_sees_none_of_the_servers_secrets(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CALLBOARD_TOKEN", TOKEN)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-" + TOKEN)
    monkeypatch.setenv("TOKEN_ALIAS", TOKEN)
    monkeypatch.setenv("DEPLOY_KEY", "deploy-" + TOKEN)
    executor = attrs.evolve(box.executor, secret_env=("DEPLOY_KEY",))
    with trio.fail_after(10):
        result = await run(attrs.evolve(box, executor=executor), "env")
    assert TOKEN not in result.output
    for name in ("CALLBOARD_TOKEN", "OPENAI_API_KEY", "TOKEN_ALIAS", "DEPLOY_KEY"):
        assert f"{name}=" not in result.output
    assert f"PATH={os.environ['PATH']}\n" in result.output


@needs_bwrap
async def test_a_sandboxed_command_cannot_see_the_jobs_of_other_owners(box: Box) -> None:
    """The jobs root is hidden even where it lies outside every hidden path."""
    jobs_root = box.workspace / "jobs-elsewhere"
    waiting = await shell_run(
        "echo other-owners-output; sleep 300", workspace=box.workspace, executor=box.executor,
        jobs_root=jobs_root, owner="session/other", timeout=10, background=True, output_cap=4096,
    )  # fmt: skip
    assert waiting.job is not None
    try:
        with trio.fail_after(10):
            looking = await shell_run(
                "ls -A jobs-elsewhere; grep -rs other-owners-output jobs-elsewhere; echo end",
                workspace=box.workspace, executor=box.executor, jobs_root=jobs_root,
                owner="session/s1", timeout=10, output_cap=4096,
            )  # fmt: skip
    finally:
        with trio.move_on_after(10, shield=True):
            await box.executor.stop_group(waiting.job.pid, 0.5)
            await box.executor.wait_exit(waiting.job.files, waiting.job.pid)
            await box.executor.remove(waiting.job.files.every_file)
    assert looking.output == "end\n"


@needs_bwrap
async def test_a_sandboxed_command_exits_with_its_own_status(box: Box) -> None:
    with trio.fail_after(10):
        result = await run(box, "echo bye; exit 7")
    assert (result.exit_code, result.output) == (7, "bye\n")


async def started(box: Box, command: str) -> JobHandle:
    """Start ``command`` as a sandboxed background job; return once it wrote up to ``ready``."""
    ready = box.workspace / "ready"
    os.mkfifo(ready)
    result = await run(box, command, background=True)
    assert result.job is not None and result.job.start_time is not None
    assert await trio.to_thread.run_sync(ready.read_text, abandon_on_cancel=True) == "up\n"
    return result.job


async def stopped(box: Box, job: JobHandle) -> tuple[int | None, str]:
    """Stop the job's group as job_stop does; its exit status and output. Removes its files."""
    assert await box.executor.stop_group(job.pid, 10.0)
    assert await box.executor.wait_exit(job.files, job.pid, start_time=job.start_time)
    status = parse_exit_status(await box.executor.read_text(job.files.exit))
    output = await box.executor.read_text(job.files.out)
    await box.executor.remove(job.files.every_file)
    return status, output or ""


@needs_bwrap
async def test_a_sandboxed_background_job_is_bwrap_leading_its_own_group_and_stop_ends_it(
    box: Box,
) -> None:
    with trio.fail_after(20):
        job = await started(box, "echo up > ready; sleep 300 & sleep 300; echo never")
        stat = read_stat(job.pid)
        assert stat is not None
        assert (stat.pgrp, stat.session) == (job.pid, job.pid), "detached: its own session"
        assert stat.ppid != os.getpid()
        argv = cmdline(job.pid)
        assert argv[0] == "bwrap" and argv[-2:] == ["/bin/sh", SCRIPT_PATH]
        status, output = await stopped(box, job)
    assert (status, output) == (143, "")
    assert not group_alive(job.pid)
    assert job.start_time is not None and not is_same_process(job.pid, job.start_time)
    assert sorted(p.name for p in job.files.directory.iterdir()) == []


@needs_bwrap
async def test_a_stopped_sandboxed_command_gets_sigterm_and_its_grace_before_any_sigkill(
    box: Box,
) -> None:
    """bwrap outlives the SIGTERM, so the command's trap runs and its status comes through."""
    with trio.fail_after(20):
        trapping = "trap 'echo got-term; exit 3' TERM; echo up > ready; sleep 300 & wait"
        job = await started(box, trapping)
        status, output = await stopped(box, job)
    assert (status, output) == (3, "got-term\n")
    assert not group_alive(job.pid)


async def start_job_in_a_child_runtime(tmp_path: Path, command: str) -> tuple[str, int, int]:
    """A runtime in a child process starts a sandboxed job, then is killed with SIGKILL."""
    script = Path(__file__).parent / "job_child.py"
    child = await Child.start([str(tmp_path / "data"), str(tmp_path), command, "sandbox"],
                              script=script)  # fmt: skip
    try:
        line = await child.readline()
    finally:
        await child.kill()
    assert line is not None and line.startswith("started "), child.lines
    _, job_id, pid, start_time = line.split()
    return job_id, int(pid), int(start_time)


async def owner_got(rt: callboard.Runtime) -> dict:
    async with rt.subscribe("inbox/o", after=0) as events:
        async for event in events:
            if event.type == "got":
                break
    [got] = (await rt.inspect("inbox/o")).state["got"]
    return got


@needs_bwrap
async def test_a_sandboxed_job_outlives_a_killed_runtime_and_its_exit_is_read_after_restart(
    tmp_path: Path,
) -> None:
    """The data directory is inside the workspace (tmp_path) and the job cannot see it."""
    command = "ls -A data; while [ ! -e go ]; do sleep 0.02; done; echo finished; exit 5"
    with trio.fail_after(60):
        job_id, pid, start_time = await start_job_in_a_child_runtime(tmp_path, command)
        assert is_same_process(pid, start_time), "the job outlived its runtime"
        assert cmdline(pid)[0] == "bwrap"
        (tmp_path / "go").touch()
        settings = {"sandbox": Sandbox()}
        async with callboard.open_runtime(
            tmp_path / "data", kinds=[Job, Inbox], settings=settings
        ) as rt:
            got = await owner_got(rt)
            view = await rt.inspect(f"job/{job_id}")
    body = got["body"]
    assert (body["status"], body["exit_code"], body["tail"]) == ("exited", 5, "finished\n")
    assert view.status == "exited"


@needs_bwrap
async def test_a_sandboxed_job_readopted_after_a_restart_is_stopped_with_its_whole_group(
    tmp_path: Path,
) -> None:
    """Stopped by a stop message, the job ends as SIGTERM ends it: exit 143."""
    command = "sleep 300 & sleep 300"
    with trio.fail_after(60):
        job_id, pid, start_time = await start_job_in_a_child_runtime(tmp_path, command)
        settings = {"sandbox": Sandbox()}
        async with callboard.open_runtime(
            tmp_path / "data", kinds=[Job, Inbox], settings=settings
        ) as rt:
            assert is_same_process(pid, start_time)
            await rt.send(f"job/{job_id}", "stop")
            got = await owner_got(rt)
    body = got["body"]
    assert (body["status"], body["exit_code"]) == ("exited", 143)
    assert not group_alive(pid)


@needs_bwrap
async def test_the_probe_says_the_sandbox_works_here() -> None:
    with trio.fail_after(10):
        assert await probe_sandbox() is None


async def test_the_probe_says_why_when_bwrap_is_missing() -> None:
    with trio.fail_after(10):
        reason = await probe_sandbox(Sandbox(bwrap="/nonexistent/bwrap"))
    assert reason == "/nonexistent/bwrap is not installed (Debian package bubblewrap)"


def test_the_workspace_is_bound_before_the_hidden_paths_are_covered(box: Box) -> None:
    """Covered after the bind, a hidden path inside the workspace stays covered."""
    argv = box.executor.sandbox.argv(box.workspace, ["/bin/true"])  # type: ignore[union-attr]
    ws, data = str(box.workspace), str(box.data)
    bind = argv.index("--bind")
    assert argv[bind : bind + 3] == ["--bind", ws, ws]
    assert argv.index(data) > bind and argv[argv.index(data) - 1] == "--tmpfs"
    assert argv.index("--tmpfs") < bind, "/tmp and the rest are emptied first"
    assert argv[:4] == ["bwrap", "--ro-bind", "/", "/"]
    assert argv[-10:] == [
        "--chdir", ws, "--cap-drop", "ALL", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
        "--die-with-parent", "--", "/bin/true",
    ]  # fmt: skip
    assert "--new-session" not in argv, "a job is stopped by its process group"
    assert "--unshare-net" not in argv


def test_without_network_the_command_gets_a_network_of_its_own(box: Box) -> None:
    argv = Sandbox(network=False).argv(box.workspace, ["/bin/true"])
    assert "--unshare-net" in argv


def test_a_workspace_inside_a_hidden_path_is_refused(box: Box) -> None:
    sandbox = Sandbox(hide=(str(box.workspace.parent),))
    with pytest.raises(ToolError, match=r"lies inside .*, which the sandbox hides"):
        sandbox.argv(box.workspace, ["/bin/true"])


def test_a_hidden_path_must_be_absolute() -> None:
    with pytest.raises(ValueError, match=r"^'hide' must hold absolute paths, got 'data'$"):
        Sandbox(hide=("data",))
