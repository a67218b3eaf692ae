"""Reducers and channels: how the writes of a step's tasks are folded into the state."""

from __future__ import annotations

from typing import Any

import pytest

from _graphs import S, chain
from interlock import START, Graph, InvalidUpdate, Store

pytestmark = pytest.mark.anyio


async def test_chain_runs_in_order_and_reducers_apply(store: Store) -> None:
    app = chain("a", "b", "c").compile(store=store)
    result = await app.run({"log": ["start"]}, thread="t1")
    assert result.status == "done"
    assert result.values["log"] == ["start", "a", "b", "c"]
    assert result.values["last"] == "c"
    # A second turn on the same thread appends through the reducer.
    again = await app.run({"log": ["turn2"]}, thread="t1")
    assert again.values["log"] == ["start", "a", "b", "c", "turn2", "a", "b", "c"]
    # Results are snapshots: a later run on the thread does not change them.
    assert result.values["log"] == ["start", "a", "b", "c"] == result.state["log"]


async def test_parallel_nodes_merge_and_write_order_is_deterministic(store: Store) -> None:
    g = Graph(S)

    async def left(s: S) -> dict[str, Any]:
        return {"log": ["left"], "meta": {"l": 1}, "total": 1}

    def right(s: S) -> dict[str, Any]:
        return {"log": ["right"], "meta": {"r": 2}, "total": 10}

    g.add_node("left", left).add_node("right", right)
    g.add_edge(START, "right").add_edge(START, "left")
    app = g.compile(store=store)
    for i in range(5):
        r = await app.run({}, thread=f"t{i}")
        # Declaration order (left before right), not completion order.
        assert r.values["log"] == ["left", "right"]
        assert r.values["meta"] == {"l": 1, "r": 2}
        assert r.values["total"] == 11


async def test_two_writes_to_last_value_key_in_one_step_is_an_error(store: Store) -> None:
    g = Graph(S)
    g.add_node("a", lambda s: {"last": "a"}).add_node("b", lambda s: {"last": "b"})
    g.add_edge(START, "a").add_edge(START, "b")
    with pytest.raises(InvalidUpdate, match="'last' was written by 2 tasks"):
        await g.compile(store=store).run({}, thread="t")
