"""Stores named by URL (`interlock.stores._url.open_store`), as --store takes them."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from interlock import SqliteStore
from interlock.stores import PostgresStore
from interlock.stores._url import open_store


def test_sqlite_relative_and_absolute(tmp_path: Path) -> None:
    relative = open_store("sqlite:///data/app.db")
    assert isinstance(relative, SqliteStore) and relative.path == "data/app.db"
    absolute = open_store(f"sqlite:///{tmp_path}/app.db")
    assert isinstance(absolute, SqliteStore) and absolute.path == f"{tmp_path}/app.db"
    spaced = open_store("sqlite:///my%20approvals.db")
    assert isinstance(spaced, SqliteStore) and spaced.path == "my approvals.db"


def test_a_sqlite_url_opens_a_working_store(tmp_path: Path) -> None:
    async def roundtrip() -> bool:
        store = open_store(f"sqlite:///{tmp_path}/new.db")
        try:
            return await store.get_thread("t") is None
        finally:
            await store.close()

    assert anyio.run(roundtrip)
    assert (tmp_path / "new.db").exists()


@pytest.mark.parametrize(
    "url", ["postgresql://ada@db.example:5433/approvals", "postgres://db/x", "postgresql://"]
)
def test_postgres_urls(url: str) -> None:
    store = open_store(url)
    assert isinstance(store, PostgresStore)
    anyio.run(store.close)  # never opened: nothing to connect to


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("mysql://db/x", "unsupported store URL 'mysql://db/x': use sqlite:///relative/path.db"),
        ("app.db", "unsupported store URL 'app.db'"),
        ("sqlite://", "names no file"),
        ("sqlite:///", "names no file"),
        ("sqlite://host/app.db", "no host between the slashes"),
        ("sqlite:///app.db?mode=ro", "takes none"),
        ("postgresql://ada:secret@db/x?nonsense=1", 'invalid URI query parameter: "nonsense"'),
        ("postgresql://ada:secret@[::1/x", "postgresql://ada:***@[::1/x"),
    ],
)
def test_bad_urls_name_the_accepted_forms(url: str, said: str) -> None:
    with pytest.raises(ValueError, match="store URL") as caught:
        open_store(url)
    assert said in str(caught.value)
    assert "secret" not in str(caught.value)  # a password never reaches a message
