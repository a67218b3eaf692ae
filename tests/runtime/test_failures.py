"""Failed nodes and contended resumes: nothing that finished runs again, one resume wins."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any, TypedDict

import anyio
import pytest

from interlock import (
    START,
    Graph,
    InterruptAlreadyResolved,
    NodeError,
    Store,
    ThreadBusy,
    append,
    approve,
)

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    log: Annotated[list[str], append]


async def test_failed_step_keeps_finished_siblings(store: Store) -> None:
    entries: Counter[str] = Counter()
    broken = {"flaky": True}
    g = Graph(S)

    def steady(s: S) -> dict[str, Any]:
        entries["steady"] += 1
        return {"log": ["steady"]}

    def flaky(s: S) -> dict[str, Any]:
        entries["flaky"] += 1
        if broken["flaky"]:
            raise RuntimeError("upstream timeout")
        return {"log": ["flaky"]}

    g.add_node("steady", steady).add_node("flaky", flaky).add_node("after", lambda s: None)
    g.add_edge(START, "steady").add_edge(START, "flaky")
    g.add_edge("steady", "after").add_edge("flaky", "after")
    app = g.compile(store=store)
    with pytest.raises(NodeError, match="upstream timeout"):
        await app.run({}, thread="t")
    state = await app.get_state("t")
    assert state.status == "failed" and "upstream timeout" in state.metadata["error"]
    broken["flaky"] = False
    r = await app.resume("t")
    assert r.status == "done" and r.values["log"] == ["steady", "flaky"]
    assert entries == Counter(steady=1, flaky=2)


async def test_concurrent_resumes_of_one_interrupt_run_the_action_once(store: Store) -> None:
    executed: list[str] = []
    g = Graph(S)
    g.add_node("gate", lambda s: {"log": [str(approve("go?"))]})
    g.add_node("act", lambda s: executed.append("act"))
    g.add_edge(START, "gate").add_edge("gate", "act")
    app = g.compile(store=store)
    r = await app.run({}, thread="t")
    iid = r.interrupt().id
    outcomes: list[str] = []

    async def attempt(answer: bool) -> None:
        try:
            await app.resume("t", {iid: answer})
            outcomes.append("won")
        except (ThreadBusy, InterruptAlreadyResolved) as exc:
            outcomes.append(type(exc).__name__)

    async with anyio.create_task_group() as tg:
        for k in range(8):
            tg.start_soon(attempt, k % 2 == 0)
    assert outcomes.count("won") == 1 and len(outcomes) == 8
    assert executed.count("act") <= 1
    stored = await store.get_interrupt(iid)
    assert stored is not None and stored.status == "resolved"
