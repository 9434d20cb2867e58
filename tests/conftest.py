"""Shared test set-up: unwrap trio's single-error groups so failures read plainly,
the test gateways' token in the environment, and the directories most agent
tests need."""

from __future__ import annotations

from pathlib import Path

import pytest
from credentials import TEST_TOKEN
from shell_helpers import JOBS_DIR


@pytest.fixture(autouse=True)
def operator_token_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients find the in-process test gateways' token where a user keeps one."""
    monkeypatch.setenv("CALLBOARD_TOKEN", TEST_TOKEN)


def _unwrap(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    try:
        return (yield)
    except BaseExceptionGroup as group:
        inner = _unwrap(group)
        if inner is group:
            raise
        raise inner from None


def pytest_addoption(parser):
    parser.addoption(
        "--longrun",
        action="store_true",
        default=False,
        help="run the crash tests for hundreds of iterations",
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace for an agent's tools."""
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A runtime's data directory (created by the runtime)."""
    return tmp_path / "data"


@pytest.fixture
def settings(tmp_path: Path) -> dict[str, str]:
    """Job files under the test's directory, where the leak guard looks for them."""
    return {"jobs_dir": str(tmp_path / JOBS_DIR)}
