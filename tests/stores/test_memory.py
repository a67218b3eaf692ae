from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from interlock.stores import CheckpointRecord, MemoryStore
from interlock.testing import FakeClock, StoreConformance


class TestMemoryStore(StoreConformance):
    @pytest.fixture
    async def store(self, clock: FakeClock) -> AsyncIterator[MemoryStore]:
        async with MemoryStore(clock=clock) as store:
            yield store


@pytest.mark.anyio
async def test_repr_shows_live_state() -> None:
    store = MemoryStore()
    assert repr(store) == "<MemoryStore 0 threads, 0 checkpoints, 0 pending open>"
    record = CheckpointRecord(
        thread="t",
        id="c1",
        parent_id=None,
        seq=1,
        step=-1,
        base_seq=1,
        created_at=1.0,
        source="input",
        status="ready",
        body=b"",
    )
    await store.append_checkpoint(record, expected_head=None)
    assert repr(store) == "<MemoryStore 1 threads, 1 checkpoints, 0 pending open>"
    await store.close()
    assert repr(store).endswith(" closed>")
