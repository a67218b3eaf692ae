"""History of a long thread is read page by page, never all at once."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest

from interlock import END, START, Graph, MemoryStore
from interlock.runtime._persist import SNAPSHOT_MAX_CHAIN
from interlock.stores import CheckpointRecord

pytestmark = pytest.mark.anyio


class Counter(TypedDict):
    n: int


class CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.rows_read = 0

    async def checkpoint_range(self, thread: str, *, lo: int, hi: int) -> list[CheckpointRecord]:
        rows = await super().checkpoint_range(thread, lo=lo, hi=hi)
        self.rows_read += len(rows)
        return rows


async def test_history_of_a_long_thread_reads_a_bounded_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from interlock.runtime import _persist

    monkeypatch.setattr(_persist, "SNAPSHOT_SMALL_BYTES", 0)  # exercise the chain rules
    store = CountingStore()
    g = Graph(Counter)
    g.add_node("inc", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "inc")
    g.add_conditional_edges("inc", lambda s: "inc" if s["n"] < 3000 else END)
    app = g.compile(store=store, recursion_limit=5000)
    await app.run({"n": 0}, thread="long")
    head = await store.get_thread("long")
    assert head is not None and head.head_seq == 3001

    store.rows_read = 0
    page = await app.history("long", limit=10)
    assert [s.values["n"] for s in page] == list(range(3000, 2990, -1))
    assert store.rows_read <= SNAPSHOT_MAX_CHAIN + 10
    # Deep pages are as cheap as the first.
    before = page[-1].checkpoint_id
    for _ in range(3):
        store.rows_read = 0
        page = await app.history("long", limit=10, before=before)
        before = page[-1].checkpoint_id
        assert store.rows_read <= SNAPSHOT_MAX_CHAIN + 10
    snapshots = [
        r for r in await store.checkpoint_range("long", lo=1, hi=4000) if r.seq == r.base_seq
    ]
    assert len(snapshots) >= 3  # taken by count, since this state never grows


async def test_snapshot_cadence_keeps_state_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    from interlock.runtime import _persist

    monkeypatch.setattr(_persist, "SNAPSHOT_MIN_BYTES", 512)
    monkeypatch.setattr(_persist, "SNAPSHOT_SMALL_BYTES", 0)
    from typing import Annotated

    from interlock import append

    class Log(TypedDict, total=False):
        items: Annotated[list[str], append]
        last: str

    store = MemoryStore()
    g = Graph(Log)
    g.add_node("add", lambda s: {"items": ["x" * 40], "last": str(len(s["items"]))})
    g.add_edge(START, "add")
    app = g.compile(store=store)
    for i in range(60):
        r = await app.run({"items": [f"in{i}"]}, thread="t")
    records = await store.checkpoint_range("t", lo=1, hi=1000)
    assert sum(r.seq == r.base_seq for r in records) >= 3
    expected: list[Any] = []
    for i in range(60):
        expected += [f"in{i}", "x" * 40]
    assert r.values["items"] == expected
    assert (await app.get_state("t")).values["items"] == expected
    for snap in await app.history("t", limit=30):
        n = len(snap.values["items"])
        assert snap.values["items"] == expected[:n]
