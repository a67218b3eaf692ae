from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from _pgserver import PgServer, PgServerError, pg_server
from interlock import MemoryStore, SqliteStore, Store

BACKENDS = ("asyncio", "trio")
"""The event loops every anyio test runs on; the library has a code path for each."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "asyncio_only(reason): an anyio test that cannot run on trio, and why; its trio run is "
        "skipped with that reason",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        only = item.get_closest_marker("asyncio_only")
        if only is None:
            continue
        reason = only.kwargs.get("reason")
        if not reason:
            raise pytest.UsageError(f"{item.nodeid}: asyncio_only needs reason='why not trio'")
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("anyio_backend") == "trio":
            item.add_marker(pytest.mark.skip(reason=f"asyncio only: {reason}"))


@pytest.fixture(scope="module", params=BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Each anyio test runs on every backend; an `asyncio_only` test's trio run is skipped."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A test that takes ``store`` runs on both embedded stores."""
    s: Store = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "t.db")
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def sqlite_files() -> AsyncIterator[Callable[[Path | str], SqliteStore]]:
    """Open SQLite stores (``sqlite_files(path)``), each closed when the test ends: Python
    3.13 warns of a connection left to the garbage collector, in whichever test it runs."""
    opened: list[SqliteStore] = []

    def open_file(path: Path | str) -> SqliteStore:
        store = SqliteStore(path)
        opened.append(store)
        return store

    try:
        yield open_file
    finally:
        for store in opened:
            await store.close()


@pytest.fixture(scope="session")
def server() -> Iterator[PgServer]:
    """A throwaway PostgreSQL 15 server for the session (started on first use)."""
    try:
        # fsync off: nothing the tests check depends on the disk's flushes (tests/_pgserver.py).
        with pg_server(fsync=False) as started:
            yield started
    except PgServerError as exc:
        pytest.fail(f"the PostgreSQL tests need a server: {exc}", pytrace=False)


@pytest.fixture
def dsn(server: PgServer) -> Iterator[str]:
    """A DSN whose tables land in a fresh schema of the test server."""
    with server.schema_dsn() as fresh:
        yield fresh
