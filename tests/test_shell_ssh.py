"""SshExecutor against a real OpenSSH server on 127.0.0.1, started by each test.

The server is Debian's ``openssh-server`` (``/usr/sbin/sshd``), run in the
foreground with a host key, a client key, ``authorized_keys`` and a config
all in ``tmp_path``, on a free high port. The client is the system ``ssh``
with ``BatchMode``. The far side is this machine, so the tests can look at
the job's processes in ``/proc`` directly as well as through ssh.
"""

from __future__ import annotations

import os
import pwd
import shlex
import signal
import socket
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest
import trio
from shell_helpers import (  # noqa: F401
    JOBS_DIR,
    MARKER,
    MARKER_NAME,
    marked_processes,
    no_leaked_job_processes,
)

from callboard.errors import ToolError
from callboard.tools import Executor, SshExecutor
from callboard.tools._procs import group_alive, is_same_process
from callboard.tools._shell import JobOutput, ShellResult, read_job_output, shell_run
from callboard.tools._wrapper import owner_dir

SSHD = Path("/usr/sbin/sshd")
OWNER = "task/t1"


@attrs.frozen
class Server:
    executor: SshExecutor
    port: int
    tmp_path: Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def keygen(path: Path) -> str:
    await trio.run_process(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)])
    return (await trio.Path(f"{path}.pub").read_text()).strip()


@pytest.fixture
async def sshd(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Server]:
    """A real sshd on 127.0.0.1 that lets us (root, in CI) in with a key made for this test."""
    if not await trio.Path(SSHD).exists():
        pytest.skip("needs /usr/sbin/sshd (Debian package openssh-server)")
    keys = tmp_path / "ssh"
    keys.mkdir()
    host_public = await keygen(keys / "host_ed25519")
    client_public = await keygen(keys / "client_ed25519")
    (keys / "authorized_keys").write_text(client_public + "\n")
    port = free_port()
    (keys / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_public}\n")
    config = keys / "sshd_config"
    config.write_text(
        f"Port {port}\n"
        "ListenAddress 127.0.0.1\n"
        f"HostKey {keys / 'host_ed25519'}\n"
        f"AuthorizedKeysFile {keys / 'authorized_keys'}\n"
        f"PidFile {keys / 'sshd.pid'}\n"
        "StrictModes no\n"
        "UsePAM no\n"
        "PermitRootLogin yes\n"
        "PasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\n"
        f"AcceptEnv {MARKER_NAME}\n"
        "PrintMotd no\n"
        "LogLevel INFO\n"
    )
    # sshd insists on its privilege separation directory, which only the
    # service unit would otherwise create.
    await trio.Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    server = await trio.lowlevel.open_process(
        [str(SSHD), "-D", "-e", "-f", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    listening = trio.Event()
    log: list[str] = []

    async def read_log() -> None:
        assert server.stderr is not None
        buffer = b""
        async for chunk in server.stderr:
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                log.append(line.decode("utf-8", "replace"))
                if b"Server listening on 127.0.0.1 port" in line:
                    listening.set()
        listening.set()  # the log ended: sshd exited

    nursery.start_soon(read_log)
    try:
        with trio.fail_after(10):
            await listening.wait()
        assert server.poll() is None, "sshd exited:\n" + "\n".join(log)
        executor = SshExecutor(
            "127.0.0.1",
            port=port,
            user=pwd.getpwuid(os.getuid()).pw_name,
            identity_file=keys / "client_ed25519",
            options=(
                f"UserKnownHostsFile={keys / 'known_hosts'}",
                "GlobalKnownHostsFile=/dev/null",
                "StrictHostKeyChecking=yes",
                "IdentitiesOnly=yes",
                "LogLevel=ERROR",
                f"SetEnv={MARKER_NAME}={MARKER}",
            ),
        )
        yield Server(executor=executor, port=port, tmp_path=tmp_path)
    finally:
        with trio.move_on_after(5, shield=True):
            server.terminate()
            await server.wait()


async def run(server: Server, command: str, **options: object) -> ShellResult:
    settings: dict[str, object] = {"timeout": 10.0, "output_cap": 4096}
    settings.update(options)
    return await shell_run(
        command,
        workspace=server.tmp_path,
        executor=server.executor,
        jobs_root=server.tmp_path / JOBS_DIR,
        owner=OWNER,
        **settings,  # type: ignore[arg-type]
    )


def left_behind(server: Server) -> list[str]:
    return sorted(path.name for path in owner_dir(server.tmp_path / JOBS_DIR, OWNER).iterdir())


async def test_a_command_over_ssh_keeps_its_quotes_and_reports_its_exit_status(
    sshd: Server,
) -> None:
    """Quotes, $VAR and backticks arrive intact; exit 3 is 3; no file is left behind."""
    command = "X=ok; printf '%s|' \"$X\" '$HOME' `echo tick` \"it's\"; exit 3"
    with trio.fail_after(30):
        result = await run(sshd, command)
    assert result.output == "ok|$HOME|tick|it's|"
    assert result.exit_code == 3
    assert result.text.endswith("[the command exited 3]")
    assert left_behind(sshd) == []


async def test_a_slow_command_over_ssh_becomes_a_job_that_is_read_and_then_stopped(
    sshd: Server,
) -> None:
    """Backgrounded on timeout, it runs on; ssh reads it and stops its whole group."""
    executor = sshd.executor
    with trio.fail_after(30):
        result = await run(sshd, "echo first; sleep 30 & sleep 30", timeout=0.5)
        job = result.job
        assert job is not None and job.start_time is not None
        try:
            assert is_same_process(job.pid, job.start_time)
            assert await executor.is_alive(job.pid, job.start_time)
            assert await executor.start_time(job.pid) == job.start_time
            first = await read_job_output(executor, job.files, 0, 1000)
            assert first == JobOutput("first\n", 6, running=True, exit_code=None, truncated=False)

            assert await executor.stop_group(job.pid, 1.0)
            assert not group_alive(job.pid)
            assert await executor.wait_exit(job.files, job.pid, start_time=job.start_time)
            done = await read_job_output(executor, job.files, first.next_offset, 1000)
            exit_code = 128 + signal.SIGTERM
            assert done == JobOutput("", 6, running=False, exit_code=exit_code, truncated=False)
            assert not await executor.is_alive(job.pid, job.start_time)
        finally:
            with trio.move_on_after(15, shield=True):
                await executor.stop_group(job.pid, 0.5)
                await executor.remove(job.files.every_file)
    assert left_behind(sshd) == []


async def test_with_background_on_timeout_off_nothing_is_left_running_over_ssh(
    sshd: Server,
) -> None:
    """The timed-out command's group is stopped through ssh and its files removed."""
    pid_file = sshd.tmp_path / "pid"
    command = f"echo $$ > {shlex.quote(str(pid_file))}; sleep 30"
    with trio.fail_after(30):
        result = await run(sshd, command, timeout=1, background_on_timeout=False)
    assert result.killed and result.job is None
    assert result.exit_code == 128 + signal.SIGTERM
    assert not group_alive(int(pid_file.read_text()))
    assert left_behind(sshd) == []


async def test_the_file_operations_over_ssh_read_what_is_on_disk(sshd: Server) -> None:
    """read_text, read_bytes, size, exists and remove see the same file as the local disk."""
    executor = sshd.executor
    path = sshd.tmp_path / "a file with 'quotes' and spaces"
    path.write_bytes(b"0123456789")
    missing = sshd.tmp_path / "missing"
    with trio.fail_after(30):
        assert await executor.read_text(path) == "0123456789"
        assert await executor.read_bytes(path, 3, 4) == b"3456"
        assert await executor.read_bytes(path, 8, 100) == b"89"
        assert await executor.size(path) == 10
        assert await executor.exists(path)
        assert await executor.read_text(missing) is None
        assert await executor.size(missing) is None
        assert not await executor.exists(missing)
        with pytest.raises(FileNotFoundError):
            await executor.read_bytes(missing, 0, 10)
        await executor.remove([path, missing])
        assert not path.exists()
        assert await executor.start_time(2**22 + 1) is None


async def test_a_client_key_the_server_does_not_know_is_a_tool_error(sshd: Server) -> None:
    """BatchMode turns a refused login into an error at once, not a password prompt."""
    stranger = sshd.tmp_path / "stranger"
    await keygen(stranger)
    executor = attrs.evolve(sshd.executor, identity_file=stranger)
    with trio.fail_after(30), pytest.raises(ToolError, match=r"ssh to 127\.0\.0\.1:\d+ failed"):
        await executor.exists(sshd.tmp_path)


def test_an_ssh_host_that_looks_like_an_option_is_refused() -> None:
    """'-oProxyCommand=...' as a host would run a command on this machine."""
    with pytest.raises(ToolError, match="not a host name"):
        SshExecutor("-oProxyCommand=touch /tmp/x")
    with pytest.raises(ToolError, match="Key=Value"):
        SshExecutor("example.org", options=("-F/dev/null",))


def test_the_ssh_command_line_is_batch_mode_and_ends_with_the_host() -> None:
    """Options come first, '--' ends them, and the remote side runs /bin/sh -s."""
    argv = SshExecutor(
        "box", port=2222, user="ci", identity_file=Path("/k"), options=("Compression=yes",)
    ).argv()
    assert argv[:4] == ["ssh", "-T", "-o", "BatchMode=yes"]
    assert argv[-3:] == ["--", "box", "/bin/sh -s"]
    joined = " ".join(argv)
    assert "-p 2222" in joined and "-i /k" in joined and "-l ci" in joined
    assert "-o Compression=yes" in joined
    assert os.path.basename(argv[0]) == "ssh"


@pytest.mark.parametrize(
    "option",
    [
        "ProxyCommand=sh -c 'touch /tmp/pwned'",
        "proxycommand=touch /tmp/pwned",
        "ProxyJump=evil.example",
        "LocalCommand=touch /tmp/pwned",
        "PermitLocalCommand=yes",
        "KnownHostsCommand=/bin/touch /tmp/pwned",
        "Match=exec touch /tmp/pwned",
        "Include=/tmp/evil_config",
        "PKCS11Provider=/tmp/evil.so",
        "SendEnv=CALLBOARD_*",
        "RemoteForward=9000 127.0.0.1:8000",
        "IdentityFile=/root/.ssh/id_ed25519",
        "UpdateHostKeys=yes",
    ],
)
def test_an_ssh_option_that_could_run_or_reach_something_here_is_refused(option: str) -> None:
    """Only options that tune the connection pass; the refusal lists the ones that do."""
    key = option.split("=", 1)[0]
    expected = (
        rf"^ssh option '{key}' is not allowed: it could run commands or reach files on this "
        rf"machine\. The allowed options are AddressFamily, CheckHostIP, .*, VerifyHostKeyDNS$"
    )
    with pytest.raises(ToolError, match=expected):
        SshExecutor("example.org", options=("LogLevel=ERROR", option))


@pytest.mark.parametrize("value", ["no", "off", "accept-new"])
def test_an_ssh_option_that_turns_off_host_key_checking_is_refused(value: str) -> None:
    """accept-new would also append the host's key to a known-hosts file the spec names."""
    with pytest.raises(ToolError, match=r"StrictHostKeyChecking must stay yes"):
        SshExecutor("example.org", options=(f"StrictHostKeyChecking={value}",))


def test_an_ssh_option_with_a_control_character_is_refused() -> None:
    with pytest.raises(ToolError, match=r"contains control characters$"):
        SshExecutor("example.org", options=("LogLevel=ERROR\nProxyCommand=touch /tmp/x",))


def test_the_allowed_ssh_options_pass_in_any_case() -> None:
    options = ("stricthostkeychecking=yes", "ServerAliveInterval=5", "SetEnv=A=b")
    assert SshExecutor("example.org", options=options).options == options


def test_the_ssh_executor_satisfies_the_executor_protocol() -> None:
    """shell_run and the job actor can take it wherever they take an Executor."""
    assert isinstance(SshExecutor("box"), Executor)
