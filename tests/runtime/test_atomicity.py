"""A step's writes, interrupts and checkpoint commit together or not at all."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import pytest

from interlock import START, Graph, MemoryStore, StoreError, append, interrupt
from interlock.stores import CheckpointRecord

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    log: Annotated[list[str], append]


class FailingStore(MemoryStore):
    """Fails the n-th append, as a disk or a lost connection would."""

    def __init__(self, fail_at: int) -> None:
        super().__init__()
        self.calls = 0
        self.fail_at = fail_at

    async def append_checkpoint(
        self, record: CheckpointRecord, *, expected_head: str | None, **kwargs: Any
    ) -> int | None:
        self.calls += 1
        if self.calls == self.fail_at:
            raise StoreError("disk full")
        return await super().append_checkpoint(record, expected_head=expected_head, **kwargs)


def graph() -> Graph[S]:
    g = Graph(S)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b", lambda s: {"log": [interrupt("b?", key="b")]})
    g.add_edge(START, "a").add_edge("a", "b")
    return g


async def test_failed_interrupt_commit_leaves_no_orphan_interrupt() -> None:
    store = FailingStore(fail_at=3)  # input, step a, then the interrupted step b
    app = graph().compile(store=store)
    with pytest.raises(StoreError, match="disk full"):
        await app.run({}, thread="t")
    assert await store.pending() == []
    state = await app.get_state("t")
    assert state.values == {"log": ["a"]} and state.next == ("b",) and not state.interrupts
    # The thread continues from the last committed step as if the failure never happened.
    r = await app.resume("t")
    assert r.status == "interrupted" and [i.key for i in await store.pending()] == ["b"]


async def test_failed_decision_commit_leaves_interrupt_pending() -> None:
    store = FailingStore(fail_at=4)
    app = graph().compile(store=store)
    r = await app.run({}, thread="t")
    iid = r.interrupt().id
    with pytest.raises(StoreError):
        await app.resume("t", {iid: "x"})
    (still,) = await store.pending()
    assert still.id == iid
    done = await app.resume("t", {iid: "y"})
    assert done.values["log"] == ["a", "y"]
