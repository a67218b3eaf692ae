"""External pause from a run handle: planned and forced, at any graph level."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any, TypedDict

import anyio
import pytest

from interlock import START, Graph, GraphDefinitionError, Store, append

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    log: Annotated[list[str], append]


async def test_planned_pause_lets_running_tasks_finish_and_nothing_reruns(store: Store) -> None:
    entries: Counter[str] = Counter()
    started, release = anyio.Event(), anyio.Event()
    g = Graph(S)

    async def slow(s: S) -> dict[str, Any]:
        entries["slow"] += 1
        started.set()
        await release.wait()
        return {"log": ["slow"]}

    def count(name: str) -> Any:
        def node(s: S) -> dict[str, Any]:
            entries[name] += 1
            return {"log": [name]}

        return node

    g.add_node("a", count("a")).add_node("slow", slow).add_node("c", count("c"))
    g.add_edge(START, "a").add_edge("a", "slow").add_edge("slow", "c")
    app = g.compile(store=store)
    async with app.start({}, thread="t") as handle:
        await started.wait()
        handle.request_pause()
        release.set()
        paused = await handle.result()
        assert await handle.pause() == paused  # pausing again is harmless
    assert paused.status == "paused"
    (i,) = paused.interrupts
    assert i.kind == "external" and i.info["when"] == "planned"
    assert i.info == {
        "when": "planned",
        "finished": ["slow"],
        "rerun": [],
        "next": ["c"],
        "waiting": [],
    }
    assert entries == Counter(a=1, slow=1)
    assert (await app.get_state("t")).status == "paused"

    done = await app.resume("t")
    assert done.status == "done" and done.values["log"] == ["a", "slow", "c"]
    assert entries == Counter(a=1, slow=1, c=1)


async def test_forced_pause_cancels_running_tasks_and_keeps_finished_siblings(
    store: Store,
) -> None:
    entries: Counter[str] = Counter()
    fast_done, stuck_started = anyio.Event(), anyio.Event()
    stuck_forever = {"yes": True}
    g = Graph(S)

    def fast(s: S) -> dict[str, Any]:
        entries["fast"] += 1
        fast_done.set()
        return {"log": ["fast"]}

    async def stuck(s: S) -> dict[str, Any]:
        entries["stuck"] += 1
        stuck_started.set()
        if stuck_forever["yes"]:
            await anyio.Event().wait()  # only a cancellation ends this
        return {"log": ["stuck"]}

    g.add_node("fast", fast).add_node("stuck", stuck).add_node("after", lambda s: None)
    g.add_edge(START, "fast").add_edge(START, "stuck")
    g.add_edge("fast", "after").add_edge("stuck", "after")
    app = g.compile(store=store)
    async with app.start({}, thread="t") as handle:
        await fast_done.wait()
        await stuck_started.wait()
        paused = await handle.pause(timeout=0)
    assert paused.status == "paused"
    (i,) = paused.interrupts
    assert i.info == {
        "when": "forced",
        "finished": ["fast"],
        "rerun": ["stuck"],
        "next": ["stuck"],
        "waiting": [],
    }

    stuck_forever["yes"] = False
    done = await app.resume("t")
    assert done.values["log"] == ["fast", "stuck"]
    assert entries == Counter(fast=1, stuck=2)  # fast kept its result; stuck re-ran


def fan_out(entries: Counter[str], gate: anyio.Event, quick_done: anyio.Event) -> Graph[S]:
    """``entry → {slow, quick} → join``: ``slow`` waits for ``gate``, ``quick`` returns at once."""
    g = Graph(S)

    def entry(s: S) -> dict[str, Any]:
        entries["entry"] += 1
        return {"log": ["entry"]}

    async def slow(s: S) -> dict[str, Any]:
        entries["slow"] += 1
        await gate.wait()
        return {"log": ["slow"]}

    def quick(s: S) -> dict[str, Any]:
        entries["quick"] += 1
        quick_done.set()
        return {"log": ["quick"]}

    def join(s: S) -> dict[str, Any]:
        entries["join"] += 1
        return {"log": ["join"]}

    g.add_node("entry", entry).add_node("slow", slow).add_node("quick", quick)
    g.add_node("join", join)
    g.add_edge(START, "entry").add_edge("entry", "slow").add_edge("entry", "quick")
    g.add_edge("slow", "join").add_edge("quick", "join")
    return g


async def test_planned_pause_reports_the_step_that_ran_and_what_runs_next(store: Store) -> None:
    entries: Counter[str] = Counter()
    gate, quick_done = anyio.Event(), anyio.Event()
    app = fan_out(entries, gate, quick_done).compile(store=store)
    async with app.start({}, thread="t") as handle:
        await quick_done.wait()
        handle.request_pause()  # while slow still runs
        gate.set()
        paused = await handle.result()
    (i,) = paused.interrupts
    # Both tasks of the running step finished; join never ran, it is what runs next.
    assert i.info == {
        "when": "planned",
        "finished": ["slow", "quick"],
        "rerun": [],
        "next": ["join"],
        "waiting": [],
    }
    assert (await app.get_state("t")).next == ("join",)
    done = await app.resume("t")
    assert done.values["log"] == ["entry", "slow", "quick", "join"]
    assert entries == Counter(entry=1, slow=1, quick=1, join=1)


async def test_forced_pause_reports_finished_siblings_and_the_task_that_reruns(
    store: Store,
) -> None:
    entries: Counter[str] = Counter()
    gate, quick_done = anyio.Event(), anyio.Event()
    app = fan_out(entries, gate, quick_done).compile(store=store)
    async with app.start({}, thread="t") as handle:
        await quick_done.wait()
        paused = await handle.pause(timeout=0)
    (i,) = paused.interrupts
    assert i.info == {
        "when": "forced",
        "finished": ["quick"],
        "rerun": ["slow"],
        "next": ["slow"],
        "waiting": [],
    }
    gate.set()
    done = await app.resume("t")
    assert done.values["log"] == ["entry", "slow", "quick", "join"]
    assert entries == Counter(entry=1, slow=2, quick=1, join=1)


async def test_planned_pause_inside_a_subgraph_resumes_there(store: Store) -> None:
    entries: Counter[str] = Counter()
    started, release = anyio.Event(), anyio.Event()
    inner = Graph(S, name="inner")

    async def first(s: S) -> dict[str, Any]:
        entries["first"] += 1
        started.set()
        await release.wait()
        return {"log": ["first"]}

    def second(s: S) -> dict[str, Any]:
        entries["second"] += 1
        return {"log": ["second"]}

    inner.add_node("first", first).add_node("second", second)
    inner.add_edge(START, "first").add_edge("first", "second")
    outer = Graph(S)
    outer.add_node("sub", inner.compile()).add_edge(START, "sub")
    app = outer.compile(store=store)
    async with app.start({}, thread="t") as handle:
        await started.wait()
        handle.request_pause()
        release.set()
        paused = await handle.result()
    (i,) = paused.interrupts
    assert i.kind == "external" and str(i.address) == "subgraph:sub"
    assert entries == Counter(first=1)
    done = await app.resume("t")
    assert done.values["log"] == ["first", "second"]
    assert entries == Counter(first=1, second=1)


async def test_pause_after_finish_and_cancel(store: Store) -> None:
    g = Graph(S)
    g.add_node("a", lambda s: {"log": ["a"]}).add_edge(START, "a")
    app = g.compile(store=store)
    async with app.start({}, thread="t") as handle:
        done = await handle.result()
        assert (await handle.pause()).status == "done" == done.status

    blocked = anyio.Event()
    g2 = Graph(S)

    async def wait_forever(s: S) -> None:
        blocked.set()
        await anyio.Event().wait()

    g2.add_node("w", wait_forever).add_edge(START, "w")
    app2 = g2.compile(store=store)
    async with app2.start({}, thread="t2") as handle:
        await blocked.wait()
        handle.cancel()
    assert handle.done
    with pytest.raises(GraphDefinitionError, match="cancelled"):
        await handle.result()
    state = await app2.get_state("t2")
    assert state.status == "ready" and state.next == ("w",)  # the input checkpoint stands


async def test_forced_pause_mid_stream_reruns_the_streaming_node(store: Store) -> None:
    from collections.abc import AsyncIterator

    runs: list[int] = []
    first_chunk = anyio.Event()
    hang = {"yes": True}
    g = Graph(S)

    async def talk(s: S) -> AsyncIterator[dict[str, Any]]:
        runs.append(1)
        yield {"log": ["hello"]}
        first_chunk.set()
        if hang["yes"]:
            await anyio.Event().wait()
        yield {"log": ["world"]}

    g.add_node("talk", talk).add_edge(START, "talk")
    app = g.compile(store=store)
    async with app.start({}, thread="t") as handle:
        await first_chunk.wait()
        paused = await handle.pause(timeout=0)
    assert paused.status == "paused" and paused.values["log"] == []  # no half stream stored
    assert paused.interrupts[0].info["rerun"] == ["talk"]
    hang["yes"] = False
    done = await app.resume("t")
    assert done.values["log"] == ["hello", "world"] and len(runs) == 2


async def test_forced_pause_keeps_finished_children_of_a_running_node(store: Store) -> None:
    from interlock import Child, Segment, gather_children

    runs: Counter[str] = Counter()
    quick_done = anyio.Event()
    hang = {"yes": True}

    async def quick() -> str:
        runs["quick"] += 1
        quick_done.set()
        return "quick"

    async def slow() -> str:
        runs["slow"] += 1
        if hang["yes"]:
            await anyio.Event().wait()
        return "slow"

    async def tools(s: S) -> dict[str, Any]:
        got = await gather_children(
            [Child(Segment("tool", "quick", "1"), quick), Child(Segment("tool", "slow", "2"), slow)]
        )
        return {"log": got}

    g = Graph(S)
    g.add_node("tools", tools).add_edge(START, "tools")
    app = g.compile(store=store)
    async with app.start({}, thread="t") as handle:
        await quick_done.wait()
        paused = await handle.pause(timeout=0)
    assert paused.status == "paused" and paused.interrupts[0].info["rerun"] == ["tools"]
    hang["yes"] = False
    done = await app.resume("t")
    assert done.values["log"] == ["quick", "slow"]
    assert runs == Counter(quick=1, slow=2)  # the finished child was not run again
