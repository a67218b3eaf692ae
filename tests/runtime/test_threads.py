"""Static pauses, subgraphs, and the thread API: state, history, edits, forks, time travel."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Annotated, Any, TypedDict

import pytest

from interlock import (
    START,
    CheckpointEvent,
    CheckpointNotFound,
    Command,
    Graph,
    GraphChanged,
    GraphDefinitionError,
    InterruptEvent,
    NodeOutputEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StepEvent,
    StepFinishedEvent,
    Store,
    ThreadInterrupted,
    append,
    approve,
    interrupt,
)

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    log: Annotated[list[str], append]
    answer: Any


def counted_chain(entries: Counter[str], *names: str) -> Graph[S]:
    g = Graph(S)
    prev = START
    for n in names:

        def node(s: S, n: str = n) -> dict[str, Any]:
            entries[n] += 1
            return {"log": [n]}

        g.add_node(n, node).add_edge(prev, n)
        prev = n
    return g


async def test_interrupt_before_and_after_do_not_retrigger(store: Store) -> None:
    entries: Counter[str] = Counter()
    app = counted_chain(entries, "a", "b", "c").compile(
        store=store, interrupt_before=["b"], interrupt_after=["b"]
    )
    r = await app.run({}, thread="t")
    assert r.status == "paused" and r.interrupts[0].kind == "before"
    assert entries == Counter(a=1)
    r = await app.resume("t")
    assert r.status == "paused" and r.interrupts[0].kind == "after"
    assert entries == Counter(a=1, b=1)
    r = await app.resume("t")
    assert r.status == "done" and r.values["log"] == ["a", "b", "c"]
    assert entries == Counter(a=1, b=1, c=1)


async def test_per_run_breakpoints_and_star(store: Store) -> None:
    entries: Counter[str] = Counter()
    app = counted_chain(entries, "a", "b").compile(store=store)
    r = await app.run({}, thread="t", interrupt_before=["b"])
    assert r.status == "paused" and str(r.interrupts[0].address) == "node:b"
    r = await app.resume("t", interrupt_after=["*"])
    assert r.status == "paused" and r.interrupts[0].info == {"nodes": ["b"], "when": "after"}
    assert (await app.resume("t")).values["log"] == ["a", "b"]


def inner_graph(entries: Counter[str]) -> Graph[S]:
    g = Graph(S, name="inner")

    def prep(s: S) -> dict[str, Any]:
        entries["prep"] += 1
        return {"log": ["prep"]}

    def gate(s: S) -> dict[str, Any]:
        entries["gate"] += 1
        return {"answer": approve("deep?", key="deep"), "log": ["gate"]}

    g.add_node("prep", prep).add_node("gate", gate).add_edge(START, "prep").add_edge("prep", "gate")
    return g


def outer_graph(entries: Counter[str], **compile_kw: Any) -> Graph[S]:
    g = Graph(S)
    g.add_node("pre", lambda s: {"log": ["pre"]})
    g.add_node("review", inner_graph(entries).compile(**compile_kw))
    g.add_node("post", lambda s: {"log": ["post"]})
    g.add_edge(START, "pre").add_edge("pre", "review").add_edge("review", "post")
    return g


async def test_subgraph_resumes_at_the_inner_node(store: Store) -> None:
    entries: Counter[str] = Counter()
    app = outer_graph(entries).compile(store=store)
    r = await app.run({}, thread="t")
    (i,) = r.interrupts
    assert str(i.address) == "subgraph:review/node:gate"
    r = await app.resume("t", {"deep": True})
    assert r.status == "done"
    assert r.values["log"] == ["pre", "prep", "gate", "post"]
    assert entries == Counter(prep=1, gate=2)  # prep never re-ran


async def test_static_breakpoints_inside_subgraphs(store: Store) -> None:
    entries: Counter[str] = Counter()
    app = outer_graph(entries, interrupt_before=["gate"]).compile(store=store)
    r = await app.run({}, thread="t")
    assert r.status == "paused" and str(r.interrupts[0].address) == "subgraph:review/node:gate"
    r = await app.resume("t")
    assert r.status == "interrupted" and r.interrupt().key == "deep"
    r = await app.resume("t", {"deep": False})
    assert r.status == "done" and entries == Counter(prep=1, gate=2)
    # Per-run breakpoint reaching into the subgraph by path.
    entries.clear()
    app2 = outer_graph(entries).compile(store=store)
    r = await app2.run({}, thread="t2", interrupt_before=["review/prep"])
    assert r.status == "paused" and str(r.interrupts[0].address) == "subgraph:review/node:prep"


async def test_fork_and_time_travel_keep_subgraph_progress(store: Store) -> None:
    entries: Counter[str] = Counter()
    app = outer_graph(entries).compile(store=store)
    r = await app.run({}, thread="t")
    old_id = r.interrupt().id
    paused_at = r.checkpoint_id
    await app.resume("t", {"deep": True})
    assert entries == Counter(prep=1, gate=2)

    # Fork the interrupted checkpoint into a new thread: new id, progress kept.
    await app.fork("t", paused_at, "t-fork")
    forked = await app.get_state("t-fork")
    (fi,) = forked.interrupts
    assert fi.id != old_id and fi.key == "deep"
    r = await app.resume("t-fork", {fi.id: False})
    assert r.values["log"] == ["pre", "prep", "gate", "post"] and r.values["answer"] is False
    assert entries == Counter(prep=1, gate=3)

    # Time travel on the same thread: answer the old interrupt differently.
    r = await app.resume("t", {old_id: False}, checkpoint_id=paused_at)
    assert r.values["answer"] is False
    assert entries == Counter(prep=1, gate=4)
    latest = await app.get_state("t")
    assert latest.values["answer"] is False


async def test_new_input_to_interrupted_thread_is_refused_or_cancels(store: Store) -> None:
    g = Graph(S)
    g.add_node("ask", lambda s: {"answer": interrupt("q")}).add_edge(START, "ask")
    app = g.compile(store=store)
    r = await app.run({"log": ["one"]}, thread="t")
    iid = r.interrupt().id
    with pytest.raises(ThreadInterrupted, match=iid):
        await app.run({"log": ["two"]}, thread="t")
    assert (await app.get_state("t")).values["log"] == ["one"]
    r = await app.run({"log": ["two"]}, thread="t", on_pending="cancel")
    assert (await store.get_interrupt(iid)).status == "cancelled"  # type: ignore[union-attr]
    assert r.values["log"] == ["one", "two"] and r.interrupt().id != iid


async def test_decided_pauses_and_subgraph_questions_are_pending_work(store: Store) -> None:
    entries: Counter[str] = Counter()
    paused = counted_chain(entries, "a", "b").compile(store=store, interrupt_before=["b"])
    nested = outer_graph(entries).compile(store=store)
    for app, thread in ((paused, "pause"), (nested, "nested")):
        r = await app.run({}, thread=thread)
        (i,) = r.interrupts
        await app.decide(thread, {i.id: True if i.kind == "dynamic" else None})
        with pytest.raises(ThreadInterrupted) as info:
            await app.run({"log": ["again"]}, thread=thread)
        assert info.value.decided == (i.id,)
    assert entries == Counter(a=1, prep=1, gate=1)  # nothing ran after the decisions

    # A passed pause whose node then asked a question: the question is what is pending.
    g = Graph(S)
    g.add_node("ask", lambda s: {"answer": interrupt("q")}).add_edge(START, "ask")
    asking = g.compile(store=store, interrupt_before=["ask"])
    await asking.run({}, thread="asks")
    question = (await asking.resume("asks")).interrupt()
    with pytest.raises(ThreadInterrupted) as info:
        await asking.run({"log": ["again"]}, thread="asks")
    assert info.value.interrupt_ids == (question.id,) and info.value.decided == ()


async def test_history_is_paged_newest_first_with_parent_links(store: Store) -> None:
    entries: Counter[str] = Counter()
    app = counted_chain(entries, *[f"n{i}" for i in range(12)]).compile(store=store)
    await app.run({}, thread="t")
    pages = []
    before = None
    while True:
        page = await app.history("t", limit=5, before=before)
        if not page:
            break
        pages.append(page)
        before = page[-1].checkpoint_id
    snaps = [s for p in pages for s in p]
    assert [len(p) for p in pages] == [5, 5, 3]
    assert [s.step for s in snaps] == list(range(12, -1, -1))
    for newer, older in itertools.pairwise(snaps):
        assert newer.parent_id == older.checkpoint_id
        assert newer.values["log"][: len(older.values["log"])] == older.values["log"]
    assert snaps[0].values["log"] == [f"n{i}" for i in range(12)]
    assert snaps[-1].source == "input" and snaps[-1].next == ("n0",)
    with pytest.raises(CheckpointNotFound):
        await app.history("missing")


async def test_update_state_and_as_node(store: Store) -> None:
    entries: Counter[str] = Counter()
    app = counted_chain(entries, "a", "b", "c").compile(store=store, interrupt_before=["b"])
    await app.run({}, thread="t")
    await app.update_state("t", {"log": ["edited"]})
    snap = await app.get_state("t")
    assert snap.values["log"] == ["a", "edited"] and snap.source == "update"
    assert snap.next == ("b",)
    r = await app.resume("t")
    assert r.values["log"] == ["a", "edited", "b", "c"]
    # as_node: pretend "b" wrote this, so "c" runs next.
    app2 = counted_chain(entries, "a", "b", "c").compile(store=store, interrupt_before=["b"])
    await app2.run({}, thread="t2")
    with pytest.raises(ThreadInterrupted):
        await app2.update_state("t2", {"log": ["by-b"]}, as_node="b")
    await app2.update_state("t2", {"log": ["by-b"]}, as_node="b", on_pending="cancel")
    assert (await app2.get_state("t2")).next == ("c",)
    r = await app2.resume("t2")
    assert r.values["log"] == ["a", "by-b", "c"]


async def test_command_update_and_goto_on_resume(store: Store) -> None:
    entries: Counter[str] = Counter()
    g = counted_chain(entries, "a", "b")
    g.add_node("extra", lambda s: {"log": ["extra"]})
    app = g.compile(store=store, interrupt_before=["b"])
    await app.run({}, thread="t")
    r = await app.resume("t", Command(update={"log": ["fixed"]}, goto="extra"))
    assert r.values["log"] == ["a", "fixed", "b", "extra"]


async def test_graph_changed_is_detected(store: Store) -> None:
    entries: Counter[str] = Counter()
    app = counted_chain(entries, "a", "b").compile(store=store, interrupt_before=["b"])
    await app.run({}, thread="t")
    changed = counted_chain(entries, "a", "b", "c").compile(store=store)
    with pytest.raises(GraphChanged, match="different graph"):
        await changed.resume("t")


async def test_stream_events_in_order_and_interrupt_after_commit(store: Store) -> None:
    g = Graph(S)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b", lambda s: {"answer": interrupt("b?")})
    g.add_edge(START, "a").add_edge("a", "b")
    app = g.compile(store=store)
    async with app.stream({}, thread="t") as stream:
        events = [e async for e in stream]
    kinds = [e.kind for e in events]
    assert kinds == [
        "run",
        "checkpoint",
        "step",
        "node",
        "step_done",
        "checkpoint",
        "step",
        "checkpoint",
        "interrupt",
        "finished",
    ]
    assert isinstance(events[0], RunStartedEvent) and not events[0].resumed
    assert isinstance(events[2], StepEvent) and events[2].nodes == ("a",)
    assert isinstance(events[3], NodeOutputEvent) and events[3].update == {"log": ["a"]}
    assert isinstance(events[4], StepFinishedEvent) and events[4].next == ("b",)
    last_cp, interrupt_event, final = events[7], events[8], events[9]
    assert isinstance(last_cp, CheckpointEvent) and last_cp.status == "interrupted"
    assert isinstance(interrupt_event, InterruptEvent)
    assert isinstance(final, RunFinishedEvent) and final.result.status == "interrupted"
    # The interrupt event comes after its checkpoint: the store already has it.
    assert (await store.get_interrupt(interrupt_event.interrupt.id)) is not None

    resume = {interrupt_event.interrupt.id: 1}
    async with app.stream(thread="t", resume=resume, modes=["run", "updates"]) as stream:
        resumed = [e async for e in stream]
    assert [e.kind for e in resumed] == ["run", "node", "finished"]
    assert resumed[-1].result.values["answer"] == 1  # type: ignore[union-attr]
    with pytest.raises(GraphDefinitionError, match="unknown stream modes"):
        app.stream({}, thread="t2", modes=["everything"])  # type: ignore[list-item]


async def test_durability_exit_writes_only_at_stop(store: Store) -> None:
    entries: Counter[str] = Counter()
    app = counted_chain(entries, *[f"n{i}" for i in range(6)]).compile(store=store)
    await app.run({}, thread="sync")
    await app.run({}, thread="exit", durability="exit")
    sync_thread = await store.get_thread("sync")
    exit_thread = await store.get_thread("exit")
    assert sync_thread is not None and exit_thread is not None
    assert sync_thread.head_seq == 7 and exit_thread.head_seq == 1
    assert (await app.get_state("exit")).values == (await app.get_state("sync")).values
