"""Graph building and the superstep engine, without interrupts."""

from __future__ import annotations

import dataclasses
import operator
from typing import Annotated, Any, TypedDict

import pydantic
import pytest

from interlock import (
    END,
    START,
    Command,
    Graph,
    GraphDefinitionError,
    InvalidUpdate,
    NodeError,
    RecursionLimit,
    Send,
    Store,
    append,
    merge,
)

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    log: Annotated[list[str], append]
    meta: Annotated[dict[str, Any], merge]
    total: Annotated[int, operator.add]
    last: str


def chain(*names: str) -> Graph[S]:
    g = Graph(S)
    prev = START
    for n in names:
        g.add_node(n, lambda s, n=n: {"log": [n], "last": n})
        g.add_edge(prev, n)
        prev = n
    return g


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


@dataclasses.dataclass
class DState:
    items: Annotated[list[int], append] = dataclasses.field(default_factory=list)
    label: str = ""


class PState(pydantic.BaseModel):
    items: Annotated[list[int], append] = []
    label: str = ""


@pytest.mark.parametrize("schema", [DState, PState])
async def test_dataclass_and_pydantic_states(store: Store, schema: type[Any]) -> None:
    seen: list[Any] = []

    def node(s: Any) -> dict[str, Any]:
        seen.append(s)
        return {"items": [len(s.items)], "label": "x"}

    g: Graph[Any] = Graph(schema)
    g.add_node("a", node).add_node("b", node)
    g.add_edge(START, "a").add_edge("a", "b")
    r = await g.compile(store=store).run(schema(items=[7]), thread="t")
    assert isinstance(seen[0], schema)
    assert isinstance(r.state, schema)
    assert r.values["items"] == [7, 1, 2]
    assert r.state.label == "x"


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


def test_definition_errors_are_clear() -> None:
    g = Graph(S)
    with pytest.raises(GraphDefinitionError, match="no nodes"):
        g.compile()
    g.add_node("a", lambda s: None)
    with pytest.raises(GraphDefinitionError, match="no entry"):
        g.compile()
    with pytest.raises(GraphDefinitionError, match="already in the graph"):
        g.add_node("a", lambda s: None)
    g.add_edge(START, "a").add_edge("a", "ghost")
    with pytest.raises(GraphDefinitionError, match="unknown node 'ghost'"):
        g.compile()
    with pytest.raises(GraphDefinitionError, match="TypedDict, a dataclass or a pydantic"):
        Graph(int)
    with pytest.raises(GraphDefinitionError, match="interrupt_before names unknown"):
        chain("x").compile(interrupt_before=["y"])


def test_sync_twins_work_in_scripts() -> None:
    app = chain("a").compile()
    assert app.run_sync({}, thread="t").values["log"] == ["a"]
    assert app.get_state_sync("t").values["last"] == "a"
