"""The deployment files run what they say: the command lines of the systemd unit
(``deploy/callboard.service``) and of the container (``deploy/Containerfile``),
with their paths moved under a tmp directory and their ports to free ones, start
a real `callboard serve` that is ready, answers its health check and stops
gracefully on the signal the files name."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio
from serve_helpers import read_line, serve_env

DEPLOY = Path(__file__).parent.parent / "deploy"
SERVING = re.compile(
    r"^callboard serving ws://\S+ with data in (\S+?)(?:, console at \S+)?, metrics at (http://\S+)$"
)


def unit_setting(name: str) -> str:
    """The value of ``name=`` in the unit (one line each in ours)."""
    text = (DEPLOY / "callboard.service").read_text()
    (value,) = re.findall(rf"^{name}=(.*)$", text, flags=re.MULTILINE)
    return value


def container_instruction(name: str) -> str:
    text = (DEPLOY / "Containerfile").read_text().replace("\\\n", " ")
    (value,) = re.findall(rf"^{name} (.*)$", text, flags=re.MULTILINE)
    return value


def moved(argv: list[str], old: str, new: Path) -> list[str]:
    """``argv`` run here: ``callboard`` as this Python's module, paths under ``old``
    under ``new``, the metrics on a free port and the gateway too."""
    assert argv[0].endswith("callboard") and argv[1] == "serve", argv
    rest = [arg.replace(old, str(new)) for arg in argv[2:]]
    rest[rest.index("--metrics-port") + 1] = "0"
    return [sys.executable, "-m", "callboard", "serve", *rest, "--port", "0"]


def fetch(url: str, token: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=20) as r:
        return r.status


@asynccontextmanager
async def running(command: list[str], cwd: Path, env: dict[str, str]) -> AsyncIterator[tuple]:
    """The server ``command`` starts, once it has printed its line: (process, data
    directory, metrics base URL); killed at the end if it is still running."""
    process = await trio.lowlevel.open_process(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        assert process.stdout is not None
        line = await read_line(process.stdout)
        match = SERVING.match(line)
        assert match is not None, line
        yield process, Path(match.group(1)), match.group(2).removesuffix("/metrics")
    finally:
        if process.returncode is None:
            process.kill()
        with trio.move_on_after(5, shield=True):
            await process.wait()


async def test_the_systemd_units_command_serves_is_ready_and_stops_on_its_kill_signal(tmp_path):
    state = tmp_path / "var-lib-callboard"
    (state / "workspaces").mkdir(parents=True)  # StateDirectory= makes both
    command = moved(shlex.split(unit_setting("ExecStart")), "/var/lib/callboard", state)
    assert unit_setting("WorkingDirectory") == "/var/lib/callboard"
    kill = getattr(signal, unit_setting("KillSignal"))
    with trio.fail_after(60):
        async with running(command, state, serve_env()) as (process, data, metrics):
            token = (data / "token").read_text().strip()
            answers = [
                await trio.to_thread.run_sync(fetch, metrics + "/readyz"),
                await trio.to_thread.run_sync(fetch, metrics + "/healthz"),
                await trio.to_thread.run_sync(fetch, metrics + "/metrics", token),
            ]
            process.send_signal(kill)
            code = await process.wait()
    assert data == state / "data"
    assert answers == [200, 200, 200]
    assert code == 0


async def test_the_containers_command_serves_its_volume_with_the_secret_token(tmp_path):
    volume, secrets = tmp_path / "data", tmp_path / "run-secrets"
    (volume / "workspaces").mkdir(parents=True)  # made in the image
    secrets.mkdir()
    argv = json.loads(container_instruction("ENTRYPOINT")) + json.loads(
        container_instruction("CMD")
    )
    command = moved(argv, "/data", volume)
    name, _, token_file = container_instruction("ENV").partition("=")
    assert token_file.startswith("/run/secrets/")  # where podman and docker mount secrets
    token_path = secrets / token_file.removeprefix("/run/secrets/")
    token_path.write_text("the-operators-secret\n")
    env = serve_env(**{name: str(token_path)})
    health = json.loads(container_instruction("HEALTHCHECK").split(" CMD ", 1)[1])
    stop = getattr(signal, container_instruction("STOPSIGNAL"))
    with trio.fail_after(60):
        async with running(command, volume, env) as (process, data, metrics):
            port = metrics.rsplit(":", 1)[1]
            check = [arg.replace(":9464/", f":{port}/") for arg in health]
            checked = await trio.run_process(check, check=False, env=env)
            scraped = await trio.to_thread.run_sync(
                fetch, metrics + "/metrics", "the-operators-secret"
            )
            process.send_signal(stop)
            code = await process.wait()
    assert data == volume / "callboard"
    assert (data / "callboard.sqlite3").exists()
    assert not (data / "token").exists()  # the secret is the token; none is made
    assert (checked.returncode, scraped, code) == (0, 200, 0)
    assert os.stat(data).st_mode & 0o077 == 0
