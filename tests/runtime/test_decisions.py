"""Deciding apart from continuing; recorded decisions; idempotent retries; stale questions."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

from interlock import (
    END,
    START,
    Decision,
    Graph,
    InterruptAlreadyResolved,
    InvalidResume,
    SqliteStore,
    Store,
    ThreadInterrupted,
    UnknownInterrupt,
    append,
    approve,
)

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    log: Annotated[list[str], append]
    ok: bool


def graph(executed: Counter[str]) -> Graph[S]:
    g = Graph(S)

    def execute(s: S) -> dict[str, Any]:
        executed["execute"] += 1
        return {"log": ["executed"]}

    g.add_node("approve", lambda s: {"ok": approve("refund ¥5000?", key="refund")})
    g.add_node("execute", execute)
    g.add_edge(START, "approve")
    g.add_conditional_edges("approve", lambda s: "execute" if s["ok"] else END)
    return g


async def test_decide_records_and_a_later_resume_continues(store: Store) -> None:
    executed: Counter[str] = Counter()
    app = graph(executed).compile(store=store)
    r = await app.run({}, thread="t")
    question = r.interrupt()
    (d,) = await app.decide(
        "t",
        {question.id: True},
        actor="ana",
        reason="known customer",
        nonce="n-1",
        seen={question.id: app.payload_hash(question)},
    )
    assert isinstance(d, Decision)
    assert (d.actor, d.reason, d.nonce, d.answer) == ("ana", "known customer", "n-1", True)
    assert d.payload_hash == app.payload_hash(question) and d.thread == "t"
    assert executed["execute"] == 0  # deciding does not run anything
    assert await app.inbox() == []

    # The same decision sent again with its nonce is the recorded outcome, not an error.
    assert await app.decide("t", {question.id: True}, nonce="n-1") == [d]
    # A different decision is refused, carrying the recorded one.
    with pytest.raises(InterruptAlreadyResolved) as info:
        await app.decide("t", {question.id: False}, nonce="n-2")
    assert info.value.resolved_value == d

    done = await app.resume("t")
    assert done.values["log"] == ["executed"] and executed["execute"] == 1


async def test_refusals_record_nothing(store: Store) -> None:
    executed: Counter[str] = Counter()
    app = graph(executed).compile(store=store)
    r = await app.run({}, thread="t")
    question = r.interrupt()
    before = await store.get_checkpoint("t")
    with pytest.raises(InvalidResume, match="changed since it was shown"):
        await app.decide("t", {question.id: True}, seen={question.id: "0" * 32})
    with pytest.raises(InvalidResume):
        await app.decide("t", {question.id: "maybe"})
    with pytest.raises(UnknownInterrupt):
        await app.decide("t", {"no-such-id": True})
    assert await store.get_checkpoint("t") == before
    assert [i.id for i in await app.inbox()] == [question.id]


async def test_failed_resumes_leave_the_file_byte_identical(tmp_path: Path) -> None:
    path = tmp_path / "same.db"
    executed: Counter[str] = Counter()
    async with SqliteStore(path) as store:
        r = await graph(executed).compile(store=store).run({}, thread="t")
    question = r.interrupt()
    before = path.read_bytes()
    bad: list[dict[str, Any]] = [
        {"no-such-id": True},
        {question.id: 42},
        {question.id: "x" * (65 * 1024 * 1024)},  # over the codec's size limit
    ]
    for answers in bad:
        async with SqliteStore(path) as store:
            with pytest.raises(Exception) as info:  # noqa: PT011 - each is a typed refusal
                await graph(executed).compile(store=store).resume("t", answers)
            assert type(info.value).__module__.startswith("interlock")
    assert path.read_bytes() == before
    assert executed["execute"] == 0


async def test_resume_records_who_and_why(store: Store) -> None:
    from interlock.runtime._resume import recorded_decision

    executed: Counter[str] = Counter()
    app = graph(executed).compile(store=store)
    r = await app.run({}, thread="t")
    iid = r.interrupt().id
    await app.resume("t", {iid: False}, actor="bo", reason="amount too high")
    stored = await store.get_interrupt(iid)
    assert stored is not None
    decision = recorded_decision(app.plan.codec, stored)
    assert decision is not None
    assert (decision.actor, decision.reason, decision.answer) == ("bo", "amount too high", False)
    assert executed["execute"] == 0


async def test_new_input_does_not_drop_a_decided_task(store: Store) -> None:
    executed: Counter[str] = Counter()
    app = graph(executed).compile(store=store)
    iid = (await app.run({}, thread="t")).interrupt().id
    await app.decide("t", {iid: True}, actor="ana")
    head = await store.get_checkpoint("t")
    # The approval is pending work: new input is refused, naming it, and nothing changes.
    for fresh in (app, graph(executed).compile(store=store)):
        with pytest.raises(ThreadInterrupted, match="decided") as info:
            await fresh.run({"log": ["new turn"]}, thread="t")
        assert info.value.interrupt_ids == (iid,) and info.value.decided == (iid,)
        assert await store.get_checkpoint("t") == head
    done = await app.resume("t")
    assert done.values["log"] == ["executed"] and executed["execute"] == 1


async def test_cancelling_a_decided_task_is_on_the_record(store: Store) -> None:
    executed: Counter[str] = Counter()
    app = graph(executed).compile(store=store)
    iid = (await app.run({}, thread="t")).interrupt().id
    await app.decide("t", {iid: True}, actor="ana")
    decided_at = await store.get_checkpoint("t")
    assert decided_at is not None
    r = await app.run({"log": ["new turn"]}, thread="t", on_pending="cancel")
    assert r.interrupt().id != iid and executed["execute"] == 0
    log = await store.audit_log(thread="t")
    assert [e.kind for e in log] == ["interrupt", "decision", "dropped", "interrupt"]
    dropped = json.loads(log[2].data)
    assert dropped["interrupts"] == [iid] and dropped["nodes"] == ["approve"]
    assert dropped["checkpoint"] == decided_at.id


async def test_an_edit_that_replaces_the_next_tasks_does_not_drop_a_decision(
    store: Store,
) -> None:
    executed: Counter[str] = Counter()
    app = graph(executed).compile(store=store)
    iid = (await app.run({}, thread="t")).interrupt().id
    await app.decide("t", {iid: True})
    with pytest.raises(ThreadInterrupted) as info:
        await app.update_state("t", {"ok": False}, as_node="approve")
    assert info.value.decided == (iid,)
    await app.update_state("t", {"ok": False}, as_node="approve", on_pending="cancel", actor="bo")
    log = await store.audit_log(thread="t")
    assert [(e.kind, e.actor) for e in log[2:]] == [("edit", "bo"), ("dropped", "bo")]
    assert (await app.resume("t")).status == "done" and executed["execute"] == 0


async def test_resuming_a_finished_thread_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "done.db"
    executed: Counter[str] = Counter()
    async with SqliteStore(path) as store:
        app = graph(executed).compile(store=store)
        iid = (await app.run({}, thread="t")).interrupt().id
        done = await app.resume("t", {iid: True})
        assert done.status == "done"
        # On the App that finished it (its cached view) and on a fresh one alike.
        again = await app.resume("t")
    before = path.read_bytes()
    async with SqliteStore(path) as store:
        later = await graph(executed).compile(store=store).resume("t")
    assert path.read_bytes() == before
    for r in (again, later):
        assert (r.status, r.values, r.checkpoint_id) == ("done", done.values, done.checkpoint_id)
    assert executed["execute"] == 1


async def test_an_empty_decision_is_refused(store: Store) -> None:
    app = graph(Counter()).compile(store=store)
    await app.run({}, thread="t")
    before = await store.get_checkpoint("t")
    with pytest.raises(ValueError, match="answers"):
        await app.decide("t", {})
    assert await store.get_checkpoint("t") == before


def two_questions() -> Graph[S]:
    g = Graph(S)
    g.add_node("a", lambda s: {"ok": approve("a?")})
    g.add_node("b", lambda s: {"log": [str(approve("b?"))]})
    g.add_edge(START, "a").add_edge(START, "b")
    return g


async def test_a_bare_answer_resumes_the_single_question(store: Store) -> None:
    executed: Counter[str] = Counter()
    app = graph(executed).compile(store=store)
    await app.run({}, thread="t")
    done = await app.resume("t", True)
    assert done.status == "done" and executed["execute"] == 1

    app2 = two_questions().compile(store=store)
    r = await app2.run({}, thread="two")
    before = await store.get_checkpoint("two")
    with pytest.raises(InvalidResume) as info:
        await app2.resume("two", True)
    for i in r.interrupts:
        assert i.id in str(info.value)
    assert await store.get_checkpoint("two") == before


async def test_the_id_in_an_interrupt_s_repr_resumes_it(store: Store) -> None:
    executed: Counter[str] = Counter()
    app = graph(executed).compile(store=store)
    question = (await app.run({}, thread="t")).interrupt()
    shown = repr(question).split()[1]
    assert shown == question.id
    done = await app.resume("t", {shown: True})
    assert done.status == "done" and executed["execute"] == 1
