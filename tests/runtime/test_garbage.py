"""A finished call leaves no reference cycles behind: its objects are freed at once, not by the
cyclic garbage collector (whose passes over a growing heap slow every later call)."""

from __future__ import annotations

import gc
from typing import Annotated, Any, TypedDict

import pytest

from interlock import START, Graph, MemoryStore, append, approve

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    log: Annotated[list[str], append]
    ok: bool


async def test_approval_round_trips_leave_no_cycles() -> None:
    g = Graph(S)
    g.add_node("ask", lambda s: {"ok": approve("go?")})
    g.add_node("act", lambda s: {"log": ["acted"]}, dangerous=True)
    g.add_edge(START, "ask")
    g.add_edge("ask", "act")
    app = g.compile(store=MemoryStore())

    async def round_trip(n: int) -> Any:
        r = await app.run({}, thread=f"t{n}")
        return await app.resume(f"t{n}", {r.interrupt().id: True})

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
