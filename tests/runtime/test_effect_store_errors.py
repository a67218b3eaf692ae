"""A store that fails while an effect is recorded: the run stops with that error, resumable."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any, Literal, TypedDict

import pytest

from interlock import (
    START,
    Graph,
    NodeError,
    SqliteStore,
    Store,
    StoreError,
    append,
    effect,
)
from interlock.stores import EffectRecord

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    log: Annotated[list[str], append]


class FailingEffects:
    """A real store whose effect records fail on demand (a disk error); the rest is the store's."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.fail: Literal["begin", "finish"] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def begin_effect(self, thread: str, key: str, **kw: Any) -> tuple[bool, EffectRecord]:
        if self.fail == "begin":
            raise StoreError("disk I/O error while recording the effect")
        return await self.inner.begin_effect(thread, key, **kw)

    async def finish_effect(self, thread: str, key: str, **kw: Any) -> None:
        if self.fail == "finish":
            raise StoreError("disk I/O error while recording the effect")
        await self.inner.finish_effect(thread, key, **kw)


def pay_graph(calls: Counter[str], how: Literal["node", "call"]) -> Graph[S]:
    def send() -> str:
        calls["pay"] += 1
        return "receipt"

    g = Graph(S)
    if how == "node":
        g.add_node("pay", lambda s: {"log": [send()]}, dangerous=True)
    else:

        async def pay(s: S) -> dict[str, Any]:
            return {"log": [await effect("charge", send)]}

        g.add_node("pay", pay)
    g.add_node("after", lambda s: {"log": ["after"]})
    g.add_edge(START, "pay").add_edge("pay", "after")
    return g


async def statuses(store: Store, thread: str) -> list[str]:
    return [c.status for c in reversed(await store.list_checkpoints(thread))]


@pytest.mark.parametrize("how", ["node", "call"])
async def test_a_failed_begin_surfaces_as_store_error_and_the_thread_resumes(
    store: Store, how: Literal["node", "call"]
) -> None:
    calls: Counter[str] = Counter()
    failing = FailingEffects(store)
    app = pay_graph(calls, how).compile(store=failing)  # type: ignore[arg-type]
    failing.fail = "begin"
    with pytest.raises(StoreError, match="disk I/O") as caught:
        await app.run({}, thread="t")
    assert not isinstance(caught.value, NodeError)
    assert calls["pay"] == 0  # nothing was recorded, so nothing was called
    assert "failed" not in await statuses(store, "t")
    assert (await app.get_state("t")).next == ("pay",)

    failing.fail = None
    done = await app.resume("t")  # resumable at once: the lease was let go
    assert done.status == "done" and done.values["log"] == ["receipt", "after"]
    assert calls["pay"] == 1


@pytest.mark.parametrize("how", ["node", "call"])
async def test_a_failed_finish_surfaces_as_store_error_and_asks_to_reconcile(
    store: Store, how: Literal["node", "call"]
) -> None:
    calls: Counter[str] = Counter()
    failing = FailingEffects(store)
    app = pay_graph(calls, how).compile(store=failing)  # type: ignore[arg-type]
    failing.fail = "finish"
    with pytest.raises(StoreError, match="disk I/O") as caught:
        await app.run({}, thread="t")
    assert not isinstance(caught.value, NodeError)
    assert calls["pay"] == 1
    assert "failed" not in await statuses(store, "t")

    failing.fail = None
    # The call happened but its outcome was never recorded: a person decides, no silent retry.
    paused = await app.resume("t")
    (i,) = paused.interrupts
    assert paused.status == "interrupted" and i.kind == "reconcile"
    # A dangerous node's recorded result is its return value; an effect() call's is the call's.
    result: Any = {"log": ["receipt"]} if how == "node" else "receipt"
    done = await app.resume("t", {i.id: {"result": result}})
    assert done.values["log"] == ["receipt", "after"]
    assert calls["pay"] == 1


async def test_a_store_closed_under_a_running_effect(tmp_path: Any) -> None:
    calls: Counter[str] = Counter()
    store = SqliteStore(tmp_path / "t.db")
    g = Graph(S)

    async def pay(s: S) -> dict[str, Any]:
        await store.close()  # the database goes away while the node runs

        def send() -> str:
            calls["pay"] += 1
            return "receipt"

        return {"log": [await effect("charge", send)]}

    g.add_node("pay", pay).add_edge(START, "pay")
    with pytest.raises(StoreError, match="closed") as caught:
        await g.compile(store=store).run({}, thread="t")
    assert not isinstance(caught.value, NodeError) and calls["pay"] == 0
    async with SqliteStore(tmp_path / "t.db") as again:
        assert await statuses(again, "t") == ["ready"]  # the input, not a failed checkpoint
        assert [e.kind for e in await again.audit_log(thread="t")] == []
