"""Shared test set-up: unwrap trio's single-error groups so failures read plainly,
the test gateways' token in the environment, the directories most agent
tests need, and the stores the core suite runs on (SQLite, and PostgreSQL on
a server the session starts: ``pg_server``)."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from credentials import TEST_TOKEN
from pg_server import PgServer, skip_or_fail_without_postgres
from shell_helpers import JOBS_DIR
from store_backends import Backend, PostgresBackend, SqliteBackend


@pytest.fixture(autouse=True)
def operator_token_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients find the in-process test gateways' token where a user keeps one."""
    monkeypatch.setenv("CALLBOARD_TOKEN", TEST_TOKEN)


@pytest.fixture(autouse=True)
def no_process_outlives_its_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """Kill what a test started in its own directory and left running.

    Shell jobs are detached by design (they outlive their server), so a test
    that fails before it lets its job end would leave the job running for as
    long as the machine is up. Anything whose working directory or command
    line names the test's ``tmp_path`` is that test's, and goes with it.
    """
    if "tmp_path" not in request.fixturenames:
        yield
        return
    tmp = str(request.getfixturevalue("tmp_path"))
    yield
    for group in _process_groups_under(tmp):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)


def _process_groups_under(tmp: str) -> set[int]:
    ours = os.getpgid(0)
    groups = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry.name}/cwd")
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                command = f.read().decode(errors="replace")
            group = os.getpgid(int(entry.name))
        except (OSError, ValueError):
            continue  # gone, or not ours to read
        inside = cwd == tmp or cwd.startswith(tmp + "/") or tmp + "/" in command
        if inside and group != ours:
            groups.add(group)
    return groups


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


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One PostgreSQL server for the session, started here and stopped at its end."""
    skip_or_fail_without_postgres()
    server = PgServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A new empty database of the session's server, dropped after the test
    with every other database the test made."""
    try:
        yield pg_server.new_database()
    finally:
        pg_server.drop_databases()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest) -> str | None:
    """The ``store=`` a test opens its runtime with: None (SQLite in the data
    directory) or the URL of a new PostgreSQL database."""
    if request.param == "sqlite":
        return None
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def store_backend(request: pytest.FixtureRequest, store_url: str | None) -> Backend:
    """The parametrized store, as the store tests drive it (see ``store_backends``)."""
    if store_url is None:
        return SqliteBackend()
    server: PgServer = request.getfixturevalue("pg_server")
    return PostgresBackend(store_url, server.new_database)
