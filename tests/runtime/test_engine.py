"""The superstep engine, without interrupts: routing, fan-out, limits, failures, subgraphs."""

from __future__ import annotations

from typing import Any

import pytest

from _graphs import S, chain
from interlock import (
    END,
    START,
    Command,
    Graph,
    InvalidUpdate,
    NodeError,
    RecursionLimit,
    Send,
    Store,
    approve,
)
from interlock.runtime import _level

pytestmark = pytest.mark.anyio


async def test_conditional_edges_and_loops(store: Store) -> None:
    g = Graph(S)
    g.add_node("inc", lambda s: {"total": 1})
    g.add_edge(START, "inc")
    g.add_conditional_edges("inc", lambda s: "inc" if s["total"] < 5 else END)
    r = await g.compile(store=store).run({"total": 0}, thread="t")
    assert r.values["total"] == 5


async def test_path_map_and_unknown_route(store: Store) -> None:
    g = Graph(S)
    g.add_node("a", lambda s: {"last": "a"}).add_node("b", lambda s: {"log": ["b"]})
    g.add_edge(START, "a")
    g.add_conditional_edges("a", lambda s: "yes", {"yes": "b", "no": END})
    assert (await g.compile(store=store).run({}, thread="t")).values["log"] == ["b"]
    bad = Graph(S)
    bad.add_node("a", lambda s: {"last": "a"})
    bad.add_edge(START, "a")
    bad.add_conditional_edges("a", lambda s: "nowhere")
    with pytest.raises(InvalidUpdate, match="'nowhere', which is not a node"):
        await bad.compile(store=store).run({}, thread="t2")


async def test_send_fans_out_with_own_inputs(store: Store) -> None:
    g = Graph(S)
    g.add_node("plan", lambda s: {"last": "planned"})
    g.add_node("work", lambda item: {"log": [f"did {item}"], "total": item})
    g.add_edge(START, "plan")
    g.add_conditional_edges("plan", lambda s: [Send("work", i) for i in (3, 1, 2)])
    r = await g.compile(store=store).run({}, thread="t")
    assert r.values["log"] == ["did 3", "did 1", "did 2"]
    assert r.values["total"] == 6


async def test_command_goto_from_node(store: Store) -> None:
    g = Graph(S)
    g.add_node("a", lambda s: Command(update={"log": ["a"]}, goto="c"))
    g.add_node("b", lambda s: {"log": ["b"]})
    g.add_node("c", lambda s: {"log": ["c"]})
    g.add_edge(START, "a")
    r = await g.compile(store=store).run({}, thread="t")
    assert r.values["log"] == ["a", "c"]


async def test_recursion_limit_is_a_clear_error(store: Store) -> None:
    g = Graph(S)
    g.add_node("spin", lambda s: {"total": 1})
    g.add_edge(START, "spin").add_edge("spin", "spin")
    with pytest.raises(RecursionLimit, match="more than 7 supersteps"):
        await g.compile(store=store, recursion_limit=7).run({"total": 0}, thread="t")


async def test_node_exception_is_wrapped_and_chained(store: Store) -> None:
    g = Graph(S)

    def boom(s: S) -> None:
        raise KeyError("nope")

    g.add_node("boom", boom).add_edge(START, "boom")
    with pytest.raises(NodeError, match="node 'boom' failed") as info:
        await g.compile(store=store).run({}, thread="t")
    assert isinstance(info.value.__cause__, KeyError)


async def test_unknown_key_in_update_is_rejected(store: Store) -> None:
    g = Graph(S)
    g.add_node("a", lambda s: {"typo": 1}).add_edge(START, "a")
    with pytest.raises(InvalidUpdate, match="unknown state keys \\['typo'\\]"):
        await g.compile(store=store).run({}, thread="t")


async def test_subgraph_runs_as_a_node_and_returns_only_its_writes(store: Store) -> None:
    inner = chain("i1", "i2").compile()
    g = Graph(S)
    g.add_node("before", lambda s: {"log": ["before"]})
    g.add_node("sub", inner)
    g.add_node("after", lambda s: {"log": ["after"]})
    g.add_edge(START, "before").add_edge("before", "sub").add_edge("sub", "after")
    r = await g.compile(store=store).run({"log": ["in"]}, thread="t")
    assert r.values["log"] == ["in", "before", "i1", "i2", "after"]
    assert r.values["last"] == "i2"


async def test_task_addresses_stay_right_when_runs_share_a_plan(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Top-level runs of one plan share its task addresses; a run of the same plan as a
    # subgraph must still get its own, and a fan-out wider than the cache is not all kept.
    monkeypatch.setattr(_level, "_MAX_ADDRESSES", 3)

    def work(item: int) -> dict[str, Any]:
        return {"log": [f"{item}:{approve(f'item {item}?')}"]}

    inner_graph = Graph(S)
    inner_graph.add_node("fan", lambda s: {"last": "fan"}).add_node("work", work)
    inner_graph.add_edge(START, "fan")
    inner_graph.add_conditional_edges("fan", lambda s: [Send("work", i) for i in range(5)])
    inner = inner_graph.compile(store=store)
    outer_graph = Graph(S)
    outer_graph.add_node("sub", inner).add_edge(START, "sub")
    outer = outer_graph.compile(store=store)
    top = [f"node:work:{i}" for i in range(5)]
    for thread in ("a", "b"):
        asked = await inner.run({}, thread=thread)
        assert [str(i.address) for i in asked.interrupts] == top
        nested = await outer.run({}, thread=f"outer-{thread}")
        assert [str(i.address) for i in nested.interrupts] == [f"subgraph:sub/{a}" for a in top]
        done = await inner.resume(thread, {i.id: True for i in asked.interrupts})
        assert done.values["log"] == [f"{i}:True" for i in range(5)]
    assert len(inner.plan.top_addresses) == 3


def test_sync_twins_work_in_scripts() -> None:
    app = chain("a").compile()
    assert app.run_sync({}, thread="t").values["log"] == ["a"]
    assert app.get_state_sync("t").values["last"] == "a"
