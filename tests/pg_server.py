"""A throwaway PostgreSQL server for the tests, and a fresh database per test.

`PgServer.start` runs ``initdb`` and ``pg_ctl`` as the unprivileged
``postgres`` user when the tests run as root (``initdb`` refuses root), in
a temporary directory it owns, listening on loopback on a free port and a
socket in that directory; `stop` ends it and removes the directory. Each
test gets a database copied from an empty template (`new_database`),
which is quick, so no test sees another's rows.

Without the binaries the PostgreSQL tests are skipped, naming what is
missing, unless ``CI`` is set: there they must run (``.ci/run`` installs them).
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

_BIN_DIRS = (
    "/usr/lib/postgresql/15/bin",
    "/usr/lib/postgresql/16/bin",
    "/usr/lib/postgresql/17/bin",
)
_USER = "callboard"
_TEMPLATE = "callboard_template"


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    # Debian keeps them off PATH, one directory per major version: the newest.
    versions = sorted(
        Path("/usr/lib/postgresql").glob(f"*/bin/{name}"),
        key=lambda path: int(path.parts[-3]) if path.parts[-3].isdigit() else 0,
    )
    return str(versions[-1]) if versions else None


def missing() -> str | None:
    """Why no PostgreSQL server can be started here, or None."""
    for name in ("initdb", "pg_ctl"):
        if _binary(name) is None:
            return f"PostgreSQL's {name} is not installed (apt-get install postgresql)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'psycopg[binary]')"
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root, and there is no postgres user to run initdb as"
    return None


def skip_or_fail_without_postgres() -> None:
    reason = missing()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the PostgreSQL tests: {reason}")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    def __init__(self) -> None:
        self._root = Path(tempfile.mkdtemp(prefix="callboard-pg-"))
        self.data = self._root / "db"
        self.port = _free_port()
        self._as_postgres = os.geteuid() == 0
        self._names = itertools.count(1)
        self._made: list[str] = []

    def _run(self, *argv: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if self._as_postgres else []
        subprocess.run(
            [*prefix, *argv], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )

    def start(self) -> None:
        if self._as_postgres:
            shutil.chown(self._root, "postgres", "postgres")
        self._root.chmod(0o700)
        initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
        assert initdb is not None and pg_ctl is not None
        self._run(initdb, "-D", str(self.data), "-A", "trust", "-U", _USER, "-E", "UTF8")
        # fsync stays on: the store's durability is what the suite checks.
        # Autovacuum is off: the databases live for one test each, and its
        # workers visiting hundreds of them would take CPU from later tests.
        options = f"-k {self._root} -c listen_addresses=127.0.0.1 -p {self.port} -c autovacuum=off"
        self._pg_ctl = pg_ctl
        self._run(pg_ctl, "-D", str(self.data), "-o", options, "-l", str(self._root / "log"),
                  "-w", "start")  # fmt: skip
        self._admin(f"CREATE DATABASE {_TEMPLATE}")

    def stop(self) -> None:
        try:
            self._run(self._pg_ctl, "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self._root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{_USER}@127.0.0.1:{self.port}/{database}"

    def _admin(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(statement)

    def new_database(self) -> str:
        """The URL of a new empty database of this server (`drop_databases` ends it)."""
        name = f"t{os.getpid()}_{next(self._names)}"
        self._admin(f"CREATE DATABASE {name} TEMPLATE {_TEMPLATE}")
        self._made.append(name)
        return self.url(name)

    def drop_databases(self) -> None:
        """Drop the databases made since the last call (a test's), and any
        connection still open to them (a killed child's, say)."""
        while self._made:
            self._admin(f"DROP DATABASE IF EXISTS {self._made.pop()} WITH (FORCE)")
