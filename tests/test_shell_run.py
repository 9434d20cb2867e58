"""shell_run, jobs and process control against the real ``/bin/sh`` on this machine.

No mocks: every test starts real detached processes through the wrapper and
looks at them in ``/proc``. Order comes from conditions (a FIFO the job
blocks on, the job's own exit), never from sleeping. The session guard in
``shell_helpers`` fails the run if any test leaves a process behind.
"""

from __future__ import annotations

import functools
import os
import shlex
import signal
import subprocess
from pathlib import Path

import pytest
import trio
from shell_helpers import JOBS_DIR, marked_processes, no_leaked_job_processes  # noqa: F401

from callboard.errors import ToolError
from callboard.tools._executor import Executor, LocalExecutor
from callboard.tools._procs import (
    group_alive,
    is_same_process,
    parse_stat,
    process_start_time,
    stop_group,
)
from callboard.tools._shell import JobHandle, JobOutput, ShellResult, read_job_output, shell_run
from callboard.tools._wrapper import JobFiles, owner_dir

OWNER = "session/s1"
EXECUTOR = LocalExecutor()


async def run(tmp_path: Path, command: str, **options: object) -> ShellResult:
    settings: dict[str, object] = {"timeout": 10.0, "output_cap": 4096}
    settings.update(options)
    return await shell_run(
        command,
        workspace=tmp_path,
        executor=EXECUTOR,
        jobs_root=tmp_path / JOBS_DIR,
        owner=OWNER,
        **settings,  # type: ignore[arg-type]
    )


def job_dir(tmp_path: Path) -> Path:
    return owner_dir(tmp_path / JOBS_DIR, OWNER)


def left_behind(tmp_path: Path) -> list[str]:
    return sorted(path.name for path in job_dir(tmp_path).iterdir())


async def discard(job: JobHandle) -> None:
    """Stop a job a test handed itself, and remove its files."""
    with trio.move_on_after(10, shield=True):
        await EXECUTOR.stop_group(job.pid, 0.5)
        await EXECUTOR.wait_exit(job.files, job.pid, start_time=job.start_time)
        await EXECUTOR.remove(job.files.every_file)


def fifo(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    os.mkfifo(path)
    return path


async def open_for_writing(path: Path) -> int:
    """Open a FIFO for writing: returns once the job has opened it for reading."""
    return await trio.to_thread.run_sync(os.open, path, os.O_WRONLY, abandon_on_cancel=True)


async def read_all(path: Path) -> str:
    """Read a FIFO to its end: returns once the job has written and closed it."""
    return await trio.to_thread.run_sync(path.read_text, abandon_on_cancel=True)


async def test_a_command_with_quotes_variables_backticks_and_newlines_runs_exactly_as_written(
    tmp_path: Path,
) -> None:
    """Nothing in the command is touched by the wrapper's own quoting."""
    command = r"""X='it'"'"'s'
printf '%s|' "$X" '$HOME stays' "double \"quoted\"" `echo tick` \
  'two
lines'
"""
    with trio.fail_after(10):
        result = await run(tmp_path, command)
    assert result.output == 'it\'s|$HOME stays|double "quoted"|tick|two\nlines|'
    assert result.exit_code == 0


async def test_a_fast_command_is_answered_like_a_foreground_one(tmp_path: Path) -> None:
    """Output and exit status come back in the result; it never becomes a job."""
    with trio.fail_after(10):
        result = await run(tmp_path, "echo hello; echo oops >&2")
    assert result == ShellResult(
        text="hello\noops\n", exit_code=0, output="hello\noops\n", dropped=0
    )


async def test_the_command_runs_in_the_workspace(tmp_path: Path) -> None:
    """The working directory is the workspace, not the runtime's."""
    with trio.fail_after(10):
        result = await run(tmp_path, "pwd")
    assert result.output == f"{tmp_path}\n"


async def test_a_nonzero_exit_is_read_from_the_exit_file(tmp_path: Path) -> None:
    """exit 3 is reported as 3, and the text says so."""
    with trio.fail_after(10):
        result = await run(tmp_path, "echo before; exit 3")
        nested = await run(tmp_path, "sh -c 'exit 4'")
    assert result.exit_code == 3
    assert result.text == "before\n[the command exited 3]"
    assert nested.exit_code == 4
    assert "exited 4" in nested.text


async def test_a_fast_command_leaves_no_file_behind(tmp_path: Path) -> None:
    """pid, out, exit and cmd files are all gone; the owner directory is empty."""
    with trio.fail_after(10):
        await run(tmp_path, "echo hello")
        await run(tmp_path, "exit 7")
    assert left_behind(tmp_path) == []


async def test_output_over_the_cap_is_cut_in_the_middle_and_says_how_much(tmp_path: Path) -> None:
    """The head and the tail stay, and the text names the exact number of bytes dropped."""
    with trio.fail_after(10):
        result = await run(tmp_path, "seq 1 20000", output_cap=1000)
    size = len("".join(f"{n}\n" for n in range(1, 20001)).encode())
    assert result.dropped == size - 1000
    assert result.output.startswith("1\n2\n3\n")
    assert result.output.endswith("19999\n20000\n")
    assert f"[... {size - 1000} bytes of output cut here ...]" in result.text


async def test_a_cut_never_splits_a_utf8_character(tmp_path: Path) -> None:
    """Cutting at a byte count may land inside 'é'; the partial bytes are dropped too."""
    with trio.fail_after(10):
        result = await run(tmp_path, "printf 'é%.0s' $(seq 1 100)", output_cap=33)
    assert "\ufffd" not in result.output
    head, _, tail = result.output.partition("\n[...")
    assert set(head) == {"é"}
    assert result.dropped == 200 - 2 * len(head) - 2 * tail.count("é")


async def test_a_slow_command_becomes_a_background_job_whose_output_is_read_incrementally(
    tmp_path: Path,
) -> None:
    """Timed out, it keeps running as the same process; its output is read piece by piece."""
    gate = fifo(tmp_path, "gate")
    command = f'echo first; read line < {shlex.quote(str(gate))}; echo "second $line"'
    with trio.fail_after(10):
        result = await run(tmp_path, command, timeout=0.2)
        job = result.job
        assert job is not None
        try:
            assert result.timed_out and not result.killed
            assert "in the background as job" in result.text
            assert job.start_time is not None
            assert is_same_process(job.pid, job.start_time)

            writer = await open_for_writing(gate)  # the job has written "first"
            first = await read_job_output(EXECUTOR, job.files, 0, 1000)
            assert first == JobOutput("first\n", 6, running=True, exit_code=None, truncated=False)

            os.write(writer, b"go\n")
            os.close(writer)
            assert await EXECUTOR.wait_exit(job.files, job.pid, start_time=job.start_time)
            rest = await read_job_output(EXECUTOR, job.files, first.next_offset, 1000)
            assert rest == JobOutput("second go\n", 16, running=False, exit_code=0, truncated=False)
            assert not is_same_process(job.pid, job.start_time)
        finally:
            await discard(job)


async def test_a_read_stops_at_its_cap_and_says_more_is_there(tmp_path: Path) -> None:
    """A capped read marks itself truncated; the next read goes on from next_offset."""
    with trio.fail_after(10):
        result = await run(tmp_path, "printf 'abcdef'", background=True)
        job = result.job
        assert job is not None
        try:
            assert await EXECUTOR.wait_exit(job.files, job.pid, start_time=job.start_time)
            head = await read_job_output(EXECUTOR, job.files, 0, 4)
            tail = await read_job_output(EXECUTOR, job.files, head.next_offset, 4)
        finally:
            await discard(job)
    assert head == JobOutput("abcd", 4, running=False, exit_code=0, truncated=True)
    assert tail == JobOutput("ef", 6, running=False, exit_code=0, truncated=False)


async def test_reading_a_job_with_no_output_file_is_a_tool_error(tmp_path: Path) -> None:
    """A removed job is reported by id, not as empty output."""
    files = JobFiles.for_job(job_dir(tmp_path), "gone123")
    with trio.fail_after(10), pytest.raises(ToolError, match="job gone123 has no output file"):
        await read_job_output(EXECUTOR, files, 0, 100)


async def test_with_background_on_timeout_off_the_slow_commands_group_is_gone_after_the_call(
    tmp_path: Path,
) -> None:
    """Timed out and not allowed to go on, the whole group is stopped and its files removed."""
    pid_pipe = fifo(tmp_path, "pid")
    command = f"echo $$ > {shlex.quote(str(pid_pipe))}; sleep 30 & sleep 30"
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            results: list[ShellResult] = []

            async def call() -> None:
                results.append(await run(tmp_path, command, timeout=1, background_on_timeout=False))

            nursery.start_soon(call)
            pid = int(await read_all(pid_pipe))
    [result] = results
    assert result.killed and result.timed_out and result.job is None
    assert result.exit_code == 128 + signal.SIGTERM
    assert result.text.startswith("The command was stopped after 1s")
    assert not group_alive(pid)
    assert left_behind(tmp_path) == []


async def test_background_true_returns_at_once_with_a_job(tmp_path: Path) -> None:
    """It does not wait for the timeout, or for the command."""
    with trio.fail_after(5):
        result = await run(tmp_path, "sleep 30", timeout=60, background=True)
        job = result.job
        assert job is not None
        try:
            assert result.text.startswith(f"Started job {job.job_id} in the background")
            assert job.command == "sleep 30"
            assert job.start_time is not None
            assert await EXECUTOR.is_alive(job.pid, job.start_time)
        finally:
            await discard(job)
    assert left_behind(tmp_path) == []


async def test_a_job_leads_its_own_session_and_process_group(tmp_path: Path) -> None:
    """setsid makes pid = process group = session, apart from the runtime's."""
    with trio.fail_after(5):
        result = await run(tmp_path, "sleep 30", background=True)
        job = result.job
        assert job is not None
        try:
            assert os.getpgid(job.pid) == job.pid
            assert os.getsid(job.pid) == job.pid
            assert os.getsid(job.pid) != os.getsid(0)
        finally:
            await discard(job)


async def test_cancelling_shell_run_stops_the_jobs_process_group(tmp_path: Path) -> None:
    """A job not yet handed over dies with the call that started it, and leaves no file."""
    pid_pipe = fifo(tmp_path, "pid")
    command = f"echo $$ > {shlex.quote(str(pid_pipe))}; sleep 30"
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, tmp_path, command)
            pid = int(await read_all(pid_pipe))
            nursery.cancel_scope.cancel()
    assert not group_alive(pid)
    assert left_behind(tmp_path) == []


async def test_a_workspace_that_does_not_exist_fails_to_start_with_a_reason(
    tmp_path: Path,
) -> None:
    """The launcher cannot cd, so nothing starts and the error says why."""
    with trio.fail_after(10), pytest.raises(ToolError, match=r"did not start: .*can't cd"):
        await shell_run(
            "echo hi",
            workspace=tmp_path / "missing",
            executor=EXECUTOR,
            jobs_root=tmp_path / JOBS_DIR,
            owner=OWNER,
            timeout=5,
            output_cap=100,
        )
    assert not job_dir(tmp_path).exists()


async def test_an_empty_command_is_refused(tmp_path: Path) -> None:
    """There is nothing to run, and the error says so."""
    with trio.fail_after(5), pytest.raises(ToolError, match="the command is empty"):
        await run(tmp_path, "  \n")


def test_a_reused_pid_is_not_the_same_process() -> None:
    """The same pid with another start time is some other process."""
    start_time = process_start_time(os.getpid())
    assert start_time is not None
    assert is_same_process(os.getpid(), start_time)
    assert not is_same_process(os.getpid(), start_time + 1)


def test_a_dead_pid_has_no_start_time() -> None:
    """A process that was reaped is gone from /proc and from every check."""
    done = subprocess.run(["/bin/sh", "-c", "echo $$"], capture_output=True, text=True)
    pid = int(done.stdout)
    assert process_start_time(pid) is None
    assert not is_same_process(pid, 0)


def test_the_start_time_is_field_22_even_when_the_name_has_spaces_and_parentheses() -> None:
    """Fields are counted from the last ')', so a name like 'a) (b c' cannot shift them."""
    fields = " ".join(str(n) for n in range(3, 53))
    stat = parse_stat(f"4242 (a) (b c) S {fields.split(' ', 1)[1]}")
    assert stat is not None
    assert (stat.pid, stat.state, stat.ppid, stat.pgrp, stat.start_time) == (4242, "S", 4, 5, 22)
    assert parse_stat("garbage") is None


async def test_a_real_process_with_a_strange_name_is_found_by_its_start_time(
    tmp_path: Path,
) -> None:
    """/proc/PID/stat of a command named 'x) (y z' still gives its start time."""
    strange = tmp_path / "x) (y z"
    strange.symlink_to("/bin/sh")
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            command = [str(strange), "-c", "read line"]
            process = await nursery.start(
                functools.partial(trio.run_process, command, stdin=subprocess.PIPE)
            )
            start_time = process_start_time(process.pid)
            assert start_time is not None
            assert start_time >= (process_start_time(os.getpid()) or 0)
            assert is_same_process(process.pid, start_time)
            assert process.stdin is not None
            await process.stdin.send_all(b"\n")


async def test_stop_group_ends_a_group_that_ignores_sigterm_with_sigkill_after_the_grace() -> None:
    """trap '' TERM buys the group the grace period, then SIGKILL ends it."""
    script = "trap '' TERM; sleep 30 & echo ready; wait"
    with trio.fail_after(10):
        process = await trio.lowlevel.open_process(
            ["/bin/sh", "-c", script], stdout=subprocess.PIPE, start_new_session=True
        )
        try:
            assert process.stdout is not None
            assert await process.stdout.receive_some() == b"ready\n"
            started = trio.current_time()
            assert await stop_group(process.pid, grace=0.3)
            assert trio.current_time() - started >= 0.3
            assert await process.wait() == -signal.SIGKILL
            assert not group_alive(process.pid)
        finally:
            with trio.move_on_after(5, shield=True):
                process.kill()
                await process.wait()


async def test_stop_group_ends_a_group_that_obeys_sigterm_without_waiting_for_the_grace() -> None:
    """A group that goes at once is not kept waiting for the whole grace period."""
    with trio.fail_after(10):
        process = await trio.lowlevel.open_process(
            ["/bin/sh", "-c", "echo ready; exec sleep 30"],
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        assert process.stdout is not None
        assert await process.stdout.receive_some() == b"ready\n"
        with trio.fail_after(5):
            assert await stop_group(process.pid, grace=30)
        assert await process.wait() == -signal.SIGTERM


async def test_stop_group_refuses_the_runtimes_own_group_and_init() -> None:
    """Signalling those would hit far more than one job."""
    for pgid in (os.getpgrp(), 0, 1, -1):
        with trio.fail_after(5), pytest.raises(ToolError, match="refusing to signal"):
            await stop_group(pgid, grace=0.1)


def test_the_local_executor_satisfies_the_executor_protocol() -> None:
    """shell_run and the job actor can take it wherever they take an Executor."""
    assert isinstance(EXECUTOR, Executor)
