"""A finished call leaves no reference cycles behind: its objects are freed at once, not by the
cyclic garbage collector (whose passes over a growing heap slow every later call).

Python 3.12 links a finished coroutine's frame to its caller's, so a caught exception kept past
its ``except`` block (an interrupt signal carried in a task's outcome) holds every frame up the
await chain, and with them the locals that hold it: each shape below is checked for that.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

import pytest

from interlock import (
    START,
    App,
    Child,
    Graph,
    MemoryStore,
    Segment,
    append,
    approve,
    gather_children,
)

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    log: Annotated[list[str], append]
    ok: bool


def single() -> Graph[S]:
    g = Graph(S)
    g.add_node("ask", lambda s: {"ok": approve("go?")})
    g.add_node("act", lambda s: {"log": ["acted"]}, dangerous=True)
    g.add_edge(START, "ask")
    g.add_edge("ask", "act")
    return g


def parallel() -> Graph[S]:
    g = Graph(S)
    g.add_node("fan", lambda s: None)
    g.add_node("left", lambda s: {"log": [f"left:{approve('left?')}"]})
    g.add_node("right", lambda s: {"log": [f"right:{approve('right?')}"]})
    g.add_edge(START, "fan").add_edge("fan", "left").add_edge("fan", "right")
    return g


def subgraph() -> Graph[S]:
    inner = Graph(S, name="inner")
    inner.add_node("gate", lambda s: {"ok": approve("go?")})
    inner.add_edge(START, "gate")
    g = Graph(S)
    g.add_node("sub", inner.compile()).add_edge(START, "sub")
    return g


def children() -> Graph[S]:
    async def tools(s: S) -> dict[str, Any]:
        kids = [
            Child(Segment("tool", name, name), lambda name=name: f"{name}:{approve(name)}")
            for name in ("rm", "mail")
        ]
        return {"log": await gather_children(kids)}

    g = Graph(S)
    g.add_node("tools", tools).add_edge(START, "tools")
    return g


@pytest.mark.parametrize("shape", [single, parallel, subgraph, children])
async def test_approval_round_trips_leave_no_cycles(shape: Callable[[], Graph[S]]) -> None:
    app: App[S] = shape().compile(store=MemoryStore())

    async def round_trip(n: int) -> Any:
        r = await app.run({}, thread=f"t{n}")
        return await app.resume(f"t{n}", {i.id: True for i in r.interrupts})

    await round_trip(-1)  # warm up caches and imports
    gc.collect()
    gc.disable()
    try:
        for n in range(400):
            assert (await round_trip(n)).status == "done"
        garbage = gc.collect()
    finally:
        gc.enable()
    assert garbage < 400, f"{garbage} objects in reference cycles after 400 round trips"
