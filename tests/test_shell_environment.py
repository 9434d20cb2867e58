"""A shell command never sees the server's secrets in its environment.

The fake secrets are set in this test process's environment (the server's,
as far as the executor can tell), then real commands print what they got:
``env`` through the real ``/bin/sh`` locally, and the environment of the
real ``ssh`` client as recorded by a wrapper that then execs it.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import attrs
import pytest
import trio
from shell_helpers import JOBS_DIR, marked_processes, no_leaked_job_processes  # noqa: F401
from test_shell_ssh import Server, sshd  # noqa: F401

from callboard.tools import SCRUBBED_NAMES, SCRUBBED_PREFIXES, command_environment
from callboard.tools._executor import Executor, LocalExecutor
from callboard.tools._shell import shell_run

TOKEN = "tok-3f9a1c0b7d2e4a58"
SECRETS = {
    "CALLBOARD_API_KEY": "cb-key-5e1d9a7c3b",
    "CALLBOARD_TOKEN": TOKEN,
    "callboard_lowercase": "lower-7c2b9e1f44",
    "OPENAI_API_KEY": "sk-openai-0a8f6d2e91",
    "ANTHROPIC_API_KEY": "sk-ant-b47c1e9d03",
    "DEPLOY_KEY": "deploy-93be0c5a17",
    "AWS_SECRET_ACCESS_KEY": "aws-2d7f40c1e8b6",
    "TOKEN_COPY": TOKEN,  # an alias: another name for the gateway token's value
}


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's environment holds the fake secrets and one harmless variable."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HARMLESS_SETTING", "visible-to-commands")


def leaked(text: str) -> list[str]:
    """The fake secrets whose name or value appears in ``text``."""
    return sorted(name for name, value in SECRETS.items() if name in text or value in text)


async def env_of_a_command(tmp_path: Path, executor: Executor) -> str:
    result = await shell_run(
        "env", workspace=tmp_path, executor=executor, jobs_root=tmp_path / JOBS_DIR,
        owner="session/s1", timeout=10, output_cap=65536,
    )  # fmt: skip
    assert result.exit_code == 0, result.text
    return result.output


@pytest.mark.usefixtures("secrets")
async def test_a_local_command_sees_none_of_the_servers_secrets(tmp_path: Path) -> None:
    """Ours by name and prefix, the operator's (exact and NAME*), and an alias by value."""
    executor = LocalExecutor(secret_env=("DEPLOY_KEY", "AWS_*"))
    with trio.fail_after(10):
        output = await env_of_a_command(tmp_path, executor)
    assert leaked(output) == []
    assert "HARMLESS_SETTING=visible-to-commands\n" in output
    assert f"PATH={os.environ['PATH']}\n" in output


@pytest.mark.usefixtures("secrets")
async def test_without_secret_env_the_operators_names_are_passed_on(tmp_path: Path) -> None:
    """Only callboard's own names are scrubbed unless the operator names more."""
    with trio.fail_after(10):
        output = await env_of_a_command(tmp_path, LocalExecutor())
    assert leaked(output) == ["AWS_SECRET_ACCESS_KEY", "DEPLOY_KEY"]


@pytest.mark.usefixtures("secrets")
async def test_the_ssh_client_gets_none_of_the_servers_secrets(
    sshd: Server,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ssh process itself is clean, so no SendEnv in an ssh config can pass them on."""
    real_ssh = shutil.which("ssh")
    assert real_ssh is not None
    recorder = tmp_path / "bin"
    recorder.mkdir()
    recorded = tmp_path / "ssh-environment"
    (recorder / "ssh").write_text(f'#!/bin/sh\nenv >> {recorded}\nexec {real_ssh} "$@"\n')
    (recorder / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{recorder}:{os.environ['PATH']}")
    executor = attrs.evolve(sshd.executor, secret_env=("DEPLOY_KEY", "AWS_*"))
    with trio.fail_after(30):
        output = await env_of_a_command(tmp_path, executor)
    seen = recorded.read_text()
    assert "HARMLESS_SETTING=visible-to-commands\n" in seen
    assert leaked(seen) == []
    assert leaked(output) == []


def test_the_always_scrubbed_names_are_callboards_and_the_model_keys() -> None:
    """The documented constants are what command_environment removes with no secret_env."""
    assert SCRUBBED_PREFIXES == ("CALLBOARD_",)
    assert SCRUBBED_NAMES == ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


def test_a_value_equal_to_a_secret_is_scrubbed_under_any_name() -> None:
    base = {
        "CALLBOARD_TOKEN": "abcdefgh12",
        "COPY": "abcdefgh12",
        "OTHER": "abcdefgh123",
        "KEEP": "x",
    }
    assert command_environment(base=base) == {"OTHER": "abcdefgh123", "KEEP": "x"}


def test_a_short_flag_value_does_not_strip_variables_that_merely_share_it() -> None:
    """CALLBOARD_DEBUG=1 is no secret: SHLVL=1 stays."""
    base = {"CALLBOARD_DEBUG": "1", "SHLVL": "1", "OPENAI_API_KEY": ""}
    assert command_environment(base=base) == {"SHLVL": "1"}


def test_secret_env_names_are_exact_or_prefixes_and_any_case() -> None:
    base = {"Deploy_Key": "a", "DEPLOY_KEYS": "b", "AWS_X": "c", "AWSX": "d"}
    assert command_environment(["DEPLOY_KEY", "aws_*"], base=base) == {
        "DEPLOY_KEYS": "b",
        "AWSX": "d",
    }


def test_a_bare_string_is_one_secret_name_not_its_letters() -> None:
    assert command_environment("AB", base={"AB": "1", "A": "2", "B": "3"}) == {"A": "2", "B": "3"}


@pytest.mark.parametrize("name", ["", "*", "A=B"])
def test_a_secret_env_entry_that_is_no_variable_name_is_refused(name: str) -> None:
    expected = rf"^the secret_env entry {re.escape(repr(name))} is not a variable name"
    with pytest.raises(ValueError, match=expected):
        command_environment([name], base={})
