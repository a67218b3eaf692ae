from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from interlock import MemoryStore, SqliteStore, Store


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Every runtime test runs on both embedded stores."""
    s: Store = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "t.db")
    try:
        yield s
    finally:
        await s.close()
