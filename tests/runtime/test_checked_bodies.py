"""A store that checks checkpoint rows against digests covering the body says so
(`verifies_checkpoints`); the runtime then skips the body's own CRC-32, and only then."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import msgspec
import pytest

from interlock import END, START, CheckpointCorrupt, Graph, append
from interlock.stores import CheckpointRecord, MemoryStore, SqliteStore

pytestmark = pytest.mark.anyio


class State(TypedDict, total=False):
    log: Annotated[list[str], append]


def graph() -> Graph[State]:
    g = Graph(State)
    g.add_node("say", lambda s: {"log": ["said"]})
    g.add_edge(START, "say").add_edge("say", END)
    return g


def wrong_crc(record: CheckpointRecord) -> CheckpointRecord:
    body = record.body
    return msgspec.structs.replace(
        record, body=body[:4] + bytes(b ^ 0xFF for b in body[4:8]) + body[8:]
    )


class CrcFlippingStore(MemoryStore):
    """Hands out every checkpoint with the CRC-32 in its body's header wrong."""

    async def get_checkpoint(self, thread: str, checkpoint_id: str | None = None) -> Any:
        found = await super().get_checkpoint(thread, checkpoint_id)
        return None if found is None else wrong_crc(found)

    async def checkpoint_range(self, thread: str, *, lo: int, hi: int) -> Any:
        return [wrong_crc(r) for r in await super().checkpoint_range(thread, lo=lo, hi=hi)]


class VerifyingCrcFlippingStore(CrcFlippingStore):
    verifies_checkpoints = True


async def test_only_a_store_that_verifies_bodies_spares_their_crc() -> None:
    for store, spared in ((CrcFlippingStore(), False), (VerifyingCrcFlippingStore(), True)):
        await graph().compile(store=store).run({"log": []}, thread="t")
        fresh = graph().compile(store=store)  # nothing kept: the read decodes the store's bodies
        if spared:
            assert (await fresh.get_state("t")).values == {"log": ["said"]}
        else:
            with pytest.raises(CheckpointCorrupt, match="checksum mismatch"):
                await fresh.get_state("t")


def test_the_sql_stores_verify_checkpoint_bodies() -> None:
    from interlock.stores import PostgresStore

    assert SqliteStore.verifies_checkpoints is True
    assert PostgresStore.verifies_checkpoints is True
    assert getattr(MemoryStore, "verifies_checkpoints", False) is False
