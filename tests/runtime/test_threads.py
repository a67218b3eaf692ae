"""Static pauses, subgraphs, and the thread API: state, history, edits, forks, time travel."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, TypedDict

import anyio
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
    MemoryStore,
    NodeOutputEvent,
    RunFinishedEvent,
    RunStartedEvent,
    SqliteStore,
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
    # The breakpoint before "b" is not a question: the edit drops it with "b" itself.
    app2 = counted_chain(entries, "a", "b", "c").compile(store=store, interrupt_before=["b"])
    pause = (await app2.run({}, thread="t2")).interrupt()
    await app2.update_state("t2", {"log": ["by-b"]}, as_node="b")
    snap = await app2.get_state("t2")
    assert snap.next == ("c",) and snap.status == "ready" and snap.interrupts == []
    assert (await store.get_interrupt(pause.id)).status == "cancelled"  # type: ignore[union-attr]
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


# -- editing at a breakpoint, then continuing (LangGraph's review-and-edit) ----------------


class Order(TypedDict, total=False):
    log: Annotated[list[str], append]
    amount: int


def reviewed_order(entries: Counter[str], **compile_kw: Any) -> Any:
    """``a`` proposes an amount, ``b`` pays what the state holds, or ``c`` pays it by hand
    when it is large (a conditional edge after ``a``)."""
    g = Graph(Order)

    def a(s: Order) -> dict[str, Any]:
        entries["a"] += 1
        return {"log": ["a"], "amount": 10}

    def pay(name: str) -> Any:
        def node(s: Order) -> dict[str, Any]:
            entries[name] += 1
            return {"log": [f"{name} paid {s['amount']}"]}

        return node

    g.add_node("a", a).add_node("b", pay("b")).add_node("c", pay("c"))
    g.add_edge(START, "a")
    g.add_conditional_edges("a", lambda s: "b" if s["amount"] < 100 else "c")
    return g.compile(**compile_kw)


async def test_edit_at_a_breakpoint_then_continue(store: Store) -> None:
    entries: Counter[str] = Counter()
    app = reviewed_order(entries, store=store, interrupt_before=["b"])
    paused = await app.run({}, thread="t")
    pause = paused.interrupt()
    assert paused.status == "paused" and pause.kind == "before"

    edit = await app.update_state("t", {"amount": 42}, as_node="a", actor="ana")
    snap = await app.get_state("t")
    assert snap.checkpoint_id == edit and snap.source == "update"
    assert snap.parent_id == paused.checkpoint_id
    # The thread still shows where it stopped: the same breakpoint, pending, before "b".
    assert snap.status == "paused" and snap.next == ("b",)
    assert [i.id for i in snap.interrupts] == [pause.id]
    assert (await store.get_interrupt(pause.id)).status == "pending"  # type: ignore[union-attr]

    done = await app.resume("t")
    assert done.status == "done" and done.interrupts == []
    assert done.values == {"log": ["a", "b paid 42"], "amount": 42}
    assert entries == Counter(a=1, b=1)  # "b" ran once, with the edit, and did not stop again

    # History: the edit sits between the paused checkpoint and the resumed run.
    ids = [s.checkpoint_id for s in await app.history("t")]
    at = ids.index(edit)
    assert ids[at + 1] == paused.checkpoint_id and ids[0] == done.checkpoint_id
    resumed = (await app.history("t"))[at - 1]
    assert resumed.parent_id == edit and resumed.source == "resume"
    # The audit log records the edit as it records other edits, between the pause it kept
    # (raised once) and the resume that passed it.
    raised, edited, passed = await store.audit_log(thread="t")
    assert (raised.kind, edited.kind, passed.kind) == ("interrupt", "edit", "decision")
    assert json.loads(raised.data)["interrupt"] == json.loads(passed.data)["interrupt"] == pause.id
    assert edited.actor == "ana"
    assert json.loads(edited.data) == {"checkpoint": edit, "as_node": "a"}

    # The paused checkpoint is untouched: a fork from it pays the original amount.
    await app.fork("t", paused.checkpoint_id, "t-fork")
    forked = await app.get_state("t-fork")
    assert forked.status == "paused" and forked.next == ("b",)
    r = await app.resume("t-fork")
    assert r.values == {"log": ["a", "b paid 10"], "amount": 10}
    assert entries == Counter(a=1, b=2)


async def test_edit_after_a_node_then_continue(store: Store) -> None:
    entries: Counter[str] = Counter()
    app = reviewed_order(entries, store=store, interrupt_after=["a"])
    paused = await app.run({}, thread="t")
    pause = paused.interrupt()
    assert pause.kind == "after" and paused.status == "paused"
    # A pause is not a question: there is nothing for on_pending="cancel" to cancel.
    await app.update_state("t", {"amount": 7}, as_node="a", on_pending="cancel")
    snap = await app.get_state("t")
    assert snap.status == "paused" and snap.next == ("b",)
    assert [i.id for i in snap.interrupts] == [pause.id]
    done = await app.resume("t")
    assert done.status == "done" and done.values["log"] == ["a", "b paid 7"]
    assert entries == Counter(a=1, b=1)


async def test_edits_without_as_node_and_twice_before_resuming(store: Store) -> None:
    entries: Counter[str] = Counter()
    app = reviewed_order(entries, store=store, interrupt_before=["b"])
    paused = await app.run({}, thread="t")
    # Without as_node nothing is planned again: the route after "a" is not asked again, so
    # "b" stays next although the amount would now send the order to "c".
    first = await app.update_state("t", {"amount": 500})
    second = await app.update_state("t", {"log": ["checked by ana"]}, as_node="a")
    snap = await app.get_state("t")
    assert snap.parent_id == first and snap.checkpoint_id == second
    assert (await app.get_state("t", first)).parent_id == paused.checkpoint_id
    # As "a", the route is asked again: "c" runs next, and the breakpoint before "b" is gone.
    assert snap.next == ("c",) and snap.status == "ready" and snap.interrupts == []
    assert (await store.get_interrupt(paused.interrupt().id)).status == "cancelled"  # type: ignore[union-attr]

    again = await app.run({}, thread="t2")
    await app.update_state("t2", {"amount": 500})
    await app.update_state("t2", {"log": ["checked"]})
    assert (await app.get_state("t2")).interrupts == again.interrupts
    done = await app.resume("t2")
    assert done.values == {"log": ["a", "checked", "b paid 500"], "amount": 500}
    assert (await app.resume("t")).values["log"] == ["a", "checked by ana", "c paid 500"]
    assert entries == Counter(a=2, b=1, c=1)


async def test_a_question_still_refuses_an_edit_as_a_node(store: Store) -> None:
    g = Graph(S)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("ask", lambda s: {"answer": interrupt("which?")})
    g.add_edge(START, "a").add_edge("a", "ask")
    app = g.compile(store=store, interrupt_before=["ask"])
    await app.run({}, thread="t")
    # Past the breakpoint the node asks a person: that question is pending work.
    question = (await app.resume("t")).interrupt()
    head = (await app.get_state("t")).checkpoint_id
    with pytest.raises(ThreadInterrupted) as info:
        await app.update_state("t", {"log": ["x"]}, as_node="a")
    assert info.value.interrupt_ids == (question.id,)
    assert (await app.get_state("t")).checkpoint_id == head  # nothing was written
    # A plain edit leaves the question where it is, as before.
    await app.update_state("t", {"log": ["note"]})
    assert (await app.resume("t", {question.id: 3})).values == {"log": ["a", "note"], "answer": 3}


async def test_a_pause_in_a_half_done_step_refuses_an_edit_as_a_node(store: Store) -> None:
    fast_done, stuck_started = anyio.Event(), anyio.Event()
    stuck_forever = {"yes": True}
    g = Graph(S)

    async def stuck(s: S) -> dict[str, Any]:
        stuck_started.set()
        if stuck_forever["yes"]:
            await anyio.Event().wait()  # only a cancellation ends this
        return {"log": ["stuck"]}

    def fast(s: S) -> dict[str, Any]:
        fast_done.set()
        return {"log": ["fast"]}

    g.add_node("fast", fast).add_node("stuck", stuck)
    g.add_edge(START, "fast").add_edge(START, "stuck")
    app = g.compile(store=store)
    async with app.start({}, thread="t") as handle:
        await fast_done.wait()
        await stuck_started.wait()
        paused = await handle.pause(timeout=0)
    # "fast" finished in the step a forced pause cut short: a new plan would drop its write.
    with pytest.raises(ThreadInterrupted) as info:
        await app.update_state("t", {"log": ["x"]}, as_node="fast")
    assert info.value.interrupt_ids == (paused.interrupt().id,)
    await app.update_state("t", {"log": ["note"]})
    stuck_forever["yes"] = False
    assert (await app.resume("t")).values["log"] == ["note", "fast", "stuck"]


def inspected_inner(seen: list[Any]) -> Graph[Order]:
    g = Graph(Order, name="inner")
    g.add_node("prep", lambda s: {"log": ["prep"], "amount": 10})

    def gate(s: Order) -> dict[str, Any]:
        seen.append(s["amount"])
        return {"log": [f"gate saw {s['amount']}"]}

    g.add_node("gate", gate).add_edge(START, "prep").add_edge("prep", "gate")
    return g


async def test_edit_at_a_breakpoint_inside_a_subgraph(store: Store) -> None:
    seen: list[Any] = []
    g = Graph(Order)
    g.add_node("pre", lambda s: {"log": ["pre"]})
    g.add_node("review", inspected_inner(seen).compile(interrupt_before=["gate"]))
    g.add_node("post", lambda s: {"log": [f"post {s['amount']}"]})
    g.add_edge(START, "pre").add_edge("pre", "review").add_edge("review", "post")
    app = g.compile(store=store)
    paused = await app.run({}, thread="t")
    pause = paused.interrupt()
    assert str(pause.address) == "subgraph:review/node:gate"

    # The subgraph runs on its own state: an edit as a node of the top graph would start it
    # over, so it is refused like pending work; "review/prep" edits the subgraph's state.
    with pytest.raises(ThreadInterrupted):
        await app.update_state("t", {"amount": 1}, as_node="pre")
    for wrong, message in (
        ("review/nope", "not a node of subgraph 'review'"),
        ("nope/prep", "not a node of graph"),
        ("post/x", "no task of it waits"),
    ):
        with pytest.raises(GraphDefinitionError, match=message):
            await app.update_state("t", {"amount": 1}, as_node=wrong)
    await app.update_state("t", {"amount": 77}, as_node="review/prep")
    snap = await app.get_state("t")
    assert snap.status == "paused" and [i.id for i in snap.interrupts] == [pause.id]

    done = await app.resume("t")
    assert done.status == "done" and seen == [77]
    # The edited key comes back to the parent with the subgraph's other writes.
    assert done.values == {"log": ["pre", "prep", "gate saw 77", "post 77"], "amount": 77}

    # A per-run breakpoint reaching into the subgraph, and an edit that skips its node.
    again = await app.run({}, thread="t2", interrupt_before=["review/gate"])
    assert str(again.interrupt().address) == "subgraph:review/node:gate"
    await app.update_state("t2", {"log": ["gate skipped"]}, as_node="review/gate")
    snap = await app.get_state("t2")
    assert snap.status == "ready" and snap.next == ("review",)
    gone = await store.get_interrupt(again.interrupt().id)
    assert gone is not None and gone.status == "cancelled"
    done = await app.resume("t2")
    assert done.values["log"] == ["pre", "prep", "gate skipped", "post 10"] and seen == [77]


async def test_edit_at_a_breakpoint_two_subgraphs_deep(store: Store) -> None:
    seen: list[Any] = []
    mid = Graph(Order, name="mid")
    mid.add_node("m0", lambda s: {"log": ["m0"]})
    mid.add_node("inner", inspected_inner(seen).compile(interrupt_before=["gate"]))
    mid.add_edge(START, "m0").add_edge("m0", "inner")
    g = Graph(Order)
    g.add_node("mid", mid.compile()).add_node("post", lambda s: {"log": [f"post {s['amount']}"]})
    g.add_edge(START, "mid").add_edge("mid", "post")
    app = g.compile(store=store)
    pause = (await app.run({}, thread="t")).interrupt()
    assert str(pause.address) == "subgraph:mid/subgraph:inner/node:gate"
    await app.update_state("t", {"amount": 9}, as_node="mid/inner/prep")
    assert [i.id for i in (await app.get_state("t")).interrupts] == [pause.id]
    done = await app.resume("t")
    assert done.values["log"] == ["m0", "prep", "gate saw 9", "post 9"] and seen == [9]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_edit_at_a_breakpoint_from_a_script(kind: str, tmp_path: Path) -> None:
    entries: Counter[str] = Counter()
    store: Store = MemoryStore() if kind == "memory" else SqliteStore(tmp_path / "t.db")
    try:
        app = reviewed_order(entries, store=store, interrupt_before=["b"])
        assert app.run_sync({}, thread="t").status == "paused"
        app.update_state_sync("t", {"amount": 5}, as_node="a")
        assert app.get_state_sync("t").status == "paused"
        done = app.resume_sync("t")
        assert done.status == "done" and done.values["log"] == ["a", "b paid 5"]
        assert entries == Counter(a=1, b=1)
    finally:
        anyio.run(store.close)
