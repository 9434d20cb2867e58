"""A real `callboard serve`, attacked as another process on the same host would:
no token, the token in the wrong place, a metrics page asked for by a rebound name."""

from __future__ import annotations

import stat
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
import trio
from serve_helpers import serve_env, serving

CALLBOARD = [sys.executable, "-m", "callboard"]


async def cli(*args: str, cwd, **env: str) -> subprocess.CompletedProcess[bytes]:
    """A CLI command with none of the test's own credentials in its environment."""
    return await trio.run_process(
        [*CALLBOARD, *args], cwd=cwd, env=serve_env(**env),
        capture_stdout=True, capture_stderr=True, check=False,
    )  # fmt: skip


async def test_the_cli_finds_the_servers_token_in_the_data_directory_by_itself(tmp_path):
    data = tmp_path / "callboard-data"  # serve's default, relative to where both run
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with trio.fail_after(40):
        async with serving(data, cwd=tmp_path) as served:
            url = served.url
            here = await cli("send", "counter/a", "add", "--url", url, cwd=tmp_path)
            away = await cli("ls", "--url", url, cwd=elsewhere)
            named = await cli("ls", "--url", url, "--data", str(data), cwd=elsewhere)
            by_file = await cli(
                "ls", "--url", url, "--token-file", str(data / "token"), cwd=elsewhere
            )
            by_env = await cli(
                "ls", "--url", url, cwd=elsewhere, CALLBOARD_TOKEN_FILE=str(data / "token")
            )
    assert stat.S_IMODE((data / "token").stat().st_mode) == 0o600
    assert (here.returncode, here.stdout) == (0, b"sent to counter/a as seq 1\n")
    assert away.returncode == 1
    assert away.stderr.decode().startswith("callboard: wrong or missing token")
    for done in (named, by_file, by_env):
        assert (done.returncode, done.stdout.decode().split()[:2]) == (0, ["ACTOR", "STATUS"])


async def test_a_missing_token_file_named_on_the_command_line_is_an_error_naming_it(tmp_path):
    with trio.fail_after(20):
        done = await cli("ls", "--token-file", str(tmp_path / "nope"), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.decode() == (
        f"callboard: cannot read the token file {str(tmp_path / 'nope')!r} (--token-file): "
        "No such file or directory\n"
    )


def _scrape(url: str, *, host: str | None = None, token: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    if host is not None:
        request.add_unredirected_header("Host", host)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize(
    ("host", "token", "status"),
    [
        (None, "right", 200),
        (None, None, 401),
        (None, "wrong", 401),
        ("evil.example:{port}", "right", 421),
        ("127.0.0.1:1", "right", 421),
        ("localhost:{port}", "right", 200),
    ],
    ids=["token", "no-token", "wrong-token", "rebound-name", "other-port", "localhost"],
)
async def test_metrics_need_the_token_and_a_host_naming_the_server(tmp_path, host, token, status):
    with trio.fail_after(30):
        async with serving(tmp_path / "data", "--metrics-port", "0") as served:
            url = served.line.split("metrics at ")[1]
            port = url.split(":")[2].split("/")[0]
            presented = served.token if token == "right" else token
            got = await trio.to_thread.run_sync(
                lambda: _scrape(url, host=host and host.format(port=port), token=presented)
            )
    assert got == status


async def test_metrics_beyond_loopback_need_a_token_the_operator_chose(tmp_path):
    data = tmp_path / "data"
    with trio.fail_after(20):
        done = await cli("serve", "--data", str(data), "--port", "0", "--metrics-port", "0",
                         "--metrics-host", "0.0.0.0", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2
    assert b"--metrics-host '0.0.0.0' exposes the metrics beyond this machine" in done.stderr
    assert not data.exists()


async def test_serve_started_in_slash_without_workspace_roots_refuses_to_start(tmp_path):
    with trio.fail_after(20):
        done = await cli("serve", "--data", str(tmp_path / "data"), "--port", "0", cwd="/")
    assert done.returncode == 2
    assert done.stderr.decode().startswith("callboard serve: serve was started in /, ")
    assert not (tmp_path / "data").exists()


async def test_a_data_directory_readable_by_others_is_made_owner_only(tmp_path):
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    with trio.fail_after(20):
        async with serving(data):
            pass
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
