"""A throwaway PostgreSQL server for the tests, started and stopped by the test session.

`pg_server` starts a fresh cluster (``initdb`` + ``pg_ctl start``) in a temporary directory on
127.0.0.1 and a free port, as the unprivileged ``postgres`` user when the tests run as root
(PostgreSQL refuses to run as root). Set ``INTERLOCK_TEST_POSTGRES_DSN`` to use a server of
your own instead. When neither works the tests fail, saying what to install: a missing server
must never turn into silently skipped tests.

The tests' server runs with ``fsync=off`` (``pg_server(fsync=False)``), as PostgreSQL's
documentation suggests for a cluster that can be thrown away; the benchmarks, which count and
wait on the disk's flushes, keep it on. The tests kill processes (clients, the server), never
the machine, so what a commit hands to the kernel survives every crash they cause, and nothing
they check depends on the disk's flushes. With ``fsync`` on, each of the hundreds of schemas
the suite creates and drops left files for the next checkpoint to sync, one by one: a restart
in the middle of the suite spent ~30 s syncing ~10,000 files, and creating and migrating a
schema took three times as long.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

__all__ = ["PgServer", "pg_server"]

DSN_VARIABLE = "INTERLOCK_TEST_POSTGRES_DSN"
_VERSION = "15"
_START_TIMEOUT = 60.0
_INSTALL_HINT = (
    f"install PostgreSQL {_VERSION} (`apt-get install postgresql-{_VERSION}`) so that initdb and "
    f"pg_ctl are in /usr/lib/postgresql/{_VERSION}/bin or on PATH, or set {DSN_VARIABLE} to the "
    "DSN of a server the tests may create schemas in"
)


class PgServerError(RuntimeError):
    """Raised when no test server can be started."""


class PgServer:
    """A PostgreSQL server for tests: its DSN, and (when we own it) control over its process."""

    def __init__(
        self,
        dsn: str,
        *,
        data_dir: Path | None = None,
        bin_dir: Path | None = None,
        options: str = "",
    ):
        self.dsn = dsn
        self._data_dir = data_dir
        self._bin_dir = bin_dir
        self._options = options
        """The server's options (its port...), given again when it is started again."""

    @property
    def owned(self) -> bool:
        """True when the tests started this server (and may restart it)."""
        return self._data_dir is not None

    @contextlib.contextmanager
    def schema_dsn(self) -> Iterator[str]:
        """Yield a DSN whose tables land in a new, empty schema; drop the schema afterwards."""
        schema = f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        try:
            yield make_conninfo(self.dsn, options=f"-csearch_path={schema}")
        finally:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))

    def restart(self) -> None:
        """Restart the server; every open connection to it breaks.

        A server we do not own is not restarted; its other connections are terminated instead,
        which looks the same to a client.
        """
        if self._data_dir is None:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            return
        self._pg_ctl("restart", "-m", "fast")
        _wait_until_ready(self.dsn)

    @contextlib.contextmanager
    def down(self) -> Iterator[None]:
        """The server stopped for the block (fast: open connections break), then started again.

        Only for a server we own (`owned`).
        """
        assert self._data_dir is not None, "only a server the tests started can be stopped"
        self._pg_ctl("stop", "-m", "fast")
        try:
            yield
        finally:
            self._pg_ctl("-o", self._options, "start")
            _wait_until_ready(self.dsn)

    def stop(self) -> None:
        """Stop the server and delete its files (a no-op for a server we do not own)."""
        if self._data_dir is None:
            return
        try:
            self._pg_ctl("stop", "-m", "fast")
        finally:
            shutil.rmtree(self._data_dir.parent, ignore_errors=True)
            self._data_dir = None

    def _pg_ctl(self, *args: str) -> None:
        assert self._data_dir is not None and self._bin_dir is not None
        data = str(self._data_dir)
        log = str(self._data_dir.parent / "server.log")
        cmd = [str(self._bin_dir / "pg_ctl"), "-D", data, "-l", log, "-w", "-t", "60", *args]
        _run([*_as_unprivileged(), *cmd])


@contextlib.contextmanager
def pg_server(*, fsync: bool = True) -> Iterator[PgServer]:
    """Start a throwaway server (or use ``$INTERLOCK_TEST_POSTGRES_DSN``); stop it on exit.

    ``fsync`` is the server's setting: the benchmarks keep it on (they count and wait on the
    disk's flushes); the tests turn it off (see the module's docstring).

    Raises:
        PgServerError: No server could be started, with what to install.
    """
    dsn = os.environ.get(DSN_VARIABLE)
    if dsn:
        try:
            _wait_until_ready(dsn, timeout=10.0)
        except PgServerError as exc:
            raise PgServerError(f"{DSN_VARIABLE} is set but {exc}") from exc
        yield PgServer(dsn)
        return
    server = _start(fsync=fsync)
    try:
        yield server
    finally:
        server.stop()


def _start(*, fsync: bool) -> PgServer:
    bin_dir = _find_bin_dir()
    root = Path(tempfile.mkdtemp(prefix="interlock-pg-"))
    try:
        data = root / "data"
        if os.geteuid() == 0:
            # PostgreSQL refuses to run as root: the postgres user owns the cluster.
            shutil.chown(root, user="postgres", group="postgres")
        prefix = _as_unprivileged()
        _run([*prefix, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres",
              "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync"])  # fmt: skip
        port = _free_port()
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={port} -c fsync={'on' if fsync else 'off'} "
            f"-c unix_socket_directories='{root}' -c max_connections=200"
        )
        log = str(root / "server.log")
        _run([*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-l", log, "-w", "-t",
              str(int(_START_TIMEOUT)), "-o", options, "start"])  # fmt: skip
        admin = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
        _wait_until_ready(admin)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE DATABASE interlock_test")
        dsn = f"host=127.0.0.1 port={port} user=postgres dbname=interlock_test"
        return PgServer(dsn, data_dir=data, bin_dir=bin_dir, options=options)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def _find_bin_dir() -> Path:
    candidates = [Path(f"/usr/lib/postgresql/{_VERSION}/bin")]
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    for bin_dir in candidates:
        if (bin_dir / "initdb").is_file() and (bin_dir / "pg_ctl").is_file():
            return bin_dir
    raise PgServerError(f"no PostgreSQL server binaries found; {_INSTALL_HINT}")


def _as_unprivileged() -> list[str]:
    """The command prefix that runs a server binary as the postgres user when we are root."""
    if os.geteuid() != 0:
        return []
    if shutil.which("runuser"):
        return ["runuser", "-u", "postgres", "--"]
    if shutil.which("setpriv"):
        return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"]
    raise PgServerError(
        "running as root, and neither runuser nor setpriv is available to start PostgreSQL as "
        f"the postgres user; run the tests as another user or {_INSTALL_HINT}"
    )


def _run(cmd: list[str]) -> None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PgServerError(f"{cmd[0]} failed: {exc}; {_INSTALL_HINT}") from exc
    if done.returncode != 0:
        raise PgServerError(
            f"`{' '.join(cmd)}` exited with {done.returncode}:\n{done.stdout}\n{done.stderr}"
        )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_until_ready(dsn: str, *, timeout: float = _START_TIMEOUT) -> None:
    """Connect until the server answers or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(dsn, connect_timeout=5) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError as exc:
            if time.monotonic() > deadline:
                raise PgServerError(f"PostgreSQL at {dsn!r} did not answer: {exc}") from exc
        time.sleep(0.05)  # polling an external process: there is no event to wait on
