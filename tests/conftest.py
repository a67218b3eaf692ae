from __future__ import annotations

from collections.abc import Iterator

import pytest

from _pgserver import PgServer, PgServerError, pg_server


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def server() -> Iterator[PgServer]:
    """A throwaway PostgreSQL 15 server for the session (started on first use)."""
    try:
        with pg_server() as started:
            yield started
    except PgServerError as exc:
        pytest.fail(f"the PostgreSQL tests need a server: {exc}", pytrace=False)


@pytest.fixture
def dsn(server: PgServer) -> Iterator[str]:
    """A DSN whose tables land in a fresh schema of the test server."""
    with server.schema_dsn() as fresh:
        yield fresh
