"""What ran: each checkpoint's metadata names the tasks that ran since its parent, and what
each of them wrote (``metadata["ran"]``)."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import pytest

from interlock import START, Graph, Send, Store, append, interrupt

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    log: Annotated[list[str], append]
    last: str
    count: int


def _ran(metadata: dict[str, Any]) -> list[tuple[str, list[str]]] | None:
    ran = metadata.get("ran")
    return None if ran is None else [(r["node"], r["keys"]) for r in ran]


async def _ran_oldest_first(app: Any, thread: str) -> list[tuple[str, Any]]:
    """``(source, ran)`` of every checkpoint of the thread, oldest first."""
    history = await app.history(thread, limit=100)
    return [(s.source, _ran(s.metadata)) for s in reversed(history)]


async def test_a_sequential_run_records_each_step_on_its_own_checkpoint(store: Store) -> None:
    g = Graph(S)
    g.add_node("a", lambda s: {"log": ["a"], "last": "a"})
    g.add_node("b", lambda s: {"count": 1})
    g.add_node("c", lambda s: None)
    g.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c")
    app = g.compile(store=store)
    await app.run({"log": ["in"]}, thread="t")
    assert await _ran_oldest_first(app, "t") == [
        ("input", None),
        ("loop", [("a", ["log", "last"])]),
        ("loop", [("b", ["count"])]),
        ("loop", [("c", [])]),
    ]
    # Nothing is carried over to the next run's checkpoints.
    await app.run({"log": ["again"]}, thread="t")
    later = await _ran_oldest_first(app, "t")
    assert later[4:] == [
        ("input", None),
        ("loop", [("a", ["log", "last"])]),
        ("loop", [("b", ["count"])]),
        ("loop", [("c", [])]),
    ]


async def test_a_fan_out_lists_every_task_in_task_order(store: Store) -> None:
    g = Graph(S)
    g.add_node("plan", lambda s: {"last": "plan"})
    g.add_node("work", lambda item: {"log": [f"w{item}"]})
    g.add_node("other", lambda s: {"count": 2})
    g.add_edge(START, "plan").add_edge("plan", "other")
    g.add_conditional_edges("plan", lambda s: [Send("work", i) for i in (3, 1)])
    app = g.compile(store=store)
    done = await app.run({}, thread="t")
    assert sorted(done.values["log"]) == ["w1", "w3"]
    ran = await _ran_oldest_first(app, "t")
    assert ran[1] == ("loop", [("plan", ["last"])])
    # One superstep ran "other" and "work" twice (Send): each task is an item.
    fanned = ran[2][1]
    assert fanned is not None
    assert sorted(fanned) == [("other", ["count"]), ("work", ["log"]), ("work", ["log"])]
    assert len(ran) == 3


async def test_exit_durability_gathers_the_steps_into_the_one_commit(store: Store) -> None:
    g = Graph(S)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b", lambda s: {"last": "b"})
    g.add_edge(START, "a").add_edge("a", "b")
    app = g.compile(store=store, durability="exit")
    await app.run({}, thread="t")
    ran = await _ran_oldest_first(app, "t")
    assert ran[-1] == ("loop", [("a", ["log"]), ("b", ["last"])])


async def test_a_subgraph_node_is_one_task_writing_what_the_subgraph_returns(
    store: Store,
) -> None:
    inner = Graph(S)
    inner.add_node("i1", lambda s: {"log": ["i1"]})
    inner.add_node("i2", lambda s: {"last": "i2"})
    inner.add_edge(START, "i1").add_edge("i1", "i2")
    outer = Graph(S)
    outer.add_node("sub", inner.compile(store=store))
    outer.add_node("after", lambda s: {"count": 3})
    outer.add_edge(START, "sub").add_edge("sub", "after")
    app = outer.compile(store=store)
    done = await app.run({}, thread="t")
    assert done.values["log"] == ["i1"]
    ran = await _ran_oldest_first(app, "t")
    assert ran[1:] == [
        ("loop", [("sub", ["log", "last"])]),
        ("loop", [("after", ["count"])]),
    ]


async def test_an_interrupted_step_is_recorded_on_the_checkpoint_that_completes_it(
    store: Store,
) -> None:
    def ask(s: S) -> dict[str, Any]:
        return {"last": str(interrupt({"question": "go?"}))}

    g = Graph(S)
    g.add_node("first", lambda s: {"log": ["first"]})
    g.add_node("ask", ask)
    g.add_node("quick", lambda s: {"count": 1})
    g.add_edge(START, "first").add_edge("first", "ask").add_edge("first", "quick")
    app = g.compile(store=store)
    asked = await app.run({}, thread="t")
    assert asked.status == "interrupted"
    ran = await _ran_oldest_first(app, "t")
    # "quick" finished in the interrupted step, but its write is not applied yet: the
    # interrupted checkpoint lists only the step that completed before it.
    assert ran[1:] == [("loop", [("first", ["log"])]), ("loop", None)]
    await app.resume("t", {asked.interrupts[0].id: "yes"})
    after = await _ran_oldest_first(app, "t")
    completed = [r for _, r in after[3:] if r]
    assert completed == [[("ask", ["last"]), ("quick", ["count"])]]
    assert (await app.get_state("t")).values["last"] == "yes"
