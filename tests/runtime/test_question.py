"""The App's reader doors: `App.question`, `App.checkpoint_meta`, `Reader`, `App.continued_by`.

A person's surface (the approval server, the command line) reads one question through these,
then decides it; a decision that follows `App.question` reads nothing more of the store unless
someone wrote to the thread in between.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, TypedDict

import pytest

from interlock import (
    END,
    START,
    App,
    Graph,
    InterruptAlreadyResolved,
    InvalidResume,
    MemoryStore,
    SqliteStore,
    approve,
)
from interlock.runtime import Question, Reader

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    ok: bool
    done: bool


def _graph(approvals: int = 1, deadline: float | None = None) -> Graph[S]:
    g = Graph(S, name="refunds")

    def review(s: S) -> S:
        ok = approve("Refund 120?", approvals=approvals, deadline=deadline)
        return {"ok": bool(ok)}

    def finish(s: S) -> S:
        return {"done": True}

    g.add_node("review", review).add_node("finish", finish)
    g.add_edge(START, "review").add_edge("review", "finish").add_edge("finish", END)
    return g


class CountingStore(SqliteStore):
    """A SQLite store that counts its reads of checkpoints and interrupts."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.reads: Counter[str] = Counter()

    async def get_checkpoint(self, thread: str, id: str | None = None) -> Any:
        self.reads["get_checkpoint"] += 1
        return await super().get_checkpoint(thread, id)

    async def get_interrupt(self, id: str) -> Any:
        self.reads["get_interrupt"] += 1
        return await super().get_interrupt(id)

    async def checkpoint_range(self, thread: str, *, lo: int, hi: int) -> Any:
        self.reads["checkpoint_range"] += 1
        return await super().checkpoint_range(thread, lo=lo, hi=hi)


async def test_a_pending_question_carries_what_a_person_deciding_it_needs(tmp_path: Path) -> None:
    app = _graph().compile(store=SqliteStore(tmp_path / "q.db"))
    await app.run({}, thread="t1", metadata={"started_by": "bob"})
    [pending] = await app.inbox()
    question = await app.question(pending.id)
    assert isinstance(question, Question)
    assert (question.id, question.thread, question.status) == (pending.id, "t1", "pending")
    assert question.interrupt.info == pending.info
    assert question.payload_hash == app.payload_hash(pending)
    assert question.decision is None
    assert question.started_by == "bob"
    assert question.meta["started_by"] == "bob"
    assert await app.question("01J0000000000000000000000X") is None
    await app.store.close()


async def test_a_decided_question_carries_its_decision(tmp_path: Path) -> None:
    app = _graph().compile(store=SqliteStore(tmp_path / "q.db"))
    await app.run({}, thread="t1", metadata={"started_by": "bob"})
    [pending] = await app.inbox()
    await app.decide("t1", {pending.id: True}, actor="alice", reason="fine")
    question = await app.question(pending.id)
    assert question is not None and question.status == "resolved"
    assert question.decision is not None
    assert (question.decision.actor, question.decision.reason) == ("alice", "fine")
    assert question.started_by == "bob"  # read from the checkpoint that asked
    await app.store.close()


async def test_a_pending_quorum_shows_who_approved_so_far(tmp_path: Path) -> None:
    app = _graph(approvals=2).compile(store=SqliteStore(tmp_path / "q.db"))
    await app.run({}, thread="t1")
    [pending] = await app.inbox()
    await app.decide("t1", {pending.id: True}, actor="alice")
    question = await app.question(pending.id)
    assert question is not None and question.status == "pending"
    assert question.interrupt.approved_by == ("alice",)
    # A process that did not record the vote reads it from the thread as well.
    other = _graph(approvals=2).compile(store=SqliteStore(tmp_path / "q.db"))
    seen = await other.question(pending.id)
    assert seen is not None and seen.interrupt.approved_by == ("alice",)
    await app.store.close()
    await other.store.close()


async def test_deciding_after_reading_the_question_reads_the_store_no_more(
    tmp_path: Path,
) -> None:
    path = tmp_path / "q.db"
    writer = _graph().compile(store=SqliteStore(path))
    await writer.run({}, thread="t1", metadata={"started_by": "bob"})
    [pending] = await writer.inbox()
    store = CountingStore(path)
    app = _graph().compile(store=store)  # a fresh process: nothing of the thread is held
    question = await app.question(pending.id)
    assert question is not None
    read = store.reads.copy()
    assert read["get_interrupt"] == 1 and read["get_checkpoint"] == 1
    decisions = await app.decide(
        "t1", {pending.id: True}, actor="alice", seen={pending.id: question.payload_hash}
    )
    assert decisions[0].actor == "alice"
    assert store.reads == read  # the decision took the level the question read
    await writer.store.close()
    await store.close()


async def test_the_app_that_ran_the_thread_reads_only_the_question(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "q.db")
    app = _graph().compile(store=store)
    await app.run({}, thread="t1", metadata={"started_by": "bob"})
    [pending] = await app.inbox()
    store.reads.clear()
    question = await app.question(pending.id)
    assert question is not None and question.started_by == "bob"
    await app.decide("t1", {pending.id: True}, actor="alice")
    assert store.reads == Counter({"get_interrupt": 1})
    await store.close()


async def test_a_decision_after_someone_else_moved_the_thread_reads_it_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "q.db"
    first = _graph().compile(store=SqliteStore(path))
    await first.run({}, thread="t1")
    [pending] = await first.inbox()
    second = _graph().compile(store=SqliteStore(path))
    question = await first.question(pending.id)
    assert question is not None
    await second.decide("t1", {pending.id: False}, actor="carol")
    # The level `first` holds is stale now: its decision finds out, and reports carol's.
    with pytest.raises(InterruptAlreadyResolved) as caught:
        await first.decide("t1", {pending.id: True}, actor="alice")
    decided = caught.value.resolved_value
    assert (decided.actor, decided.answer) == ("carol", False)
    # A refusal the stale level would have made is not made from it either.
    await second.resume("t1")
    with pytest.raises(InterruptAlreadyResolved):
        await first.decide("t1", {pending.id: True}, actor="alice")
    await first.store.close()
    await second.store.close()


async def test_a_stale_question_is_refused_against_the_stored_one(tmp_path: Path) -> None:
    app = _graph().compile(store=SqliteStore(tmp_path / "q.db"))
    await app.run({}, thread="t1")
    [pending] = await app.inbox()
    await app.question(pending.id)
    with pytest.raises(InvalidResume, match="changed since it was shown"):
        await app.decide("t1", {pending.id: True}, actor="alice", seen={pending.id: "0" * 32})
    await app.store.close()


async def test_a_reader_without_an_app_reads_questions_and_metadata(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    app = _graph().compile(store=SqliteStore(path))
    await app.run({}, thread="t1", metadata={"started_by": "bob"})
    [pending] = await app.inbox()
    reader = Reader(SqliteStore(path))
    question = await reader.question(pending.id)
    assert question is not None
    assert question.interrupt.info == pending.info
    assert question.payload_hash == app.payload_hash(pending)
    assert question.started_by == "bob"
    assert await reader.checkpoint_meta("t1", "no-such-checkpoint") == {}
    assert await reader.question("01J0000000000000000000000X") is None
    await app.store.close()
    await reader.store.close()


async def test_without_workers_the_caller_continues_and_the_sweep_runs_threads_on() -> None:
    app: App[Any] = _graph(deadline=0.001).compile(store=MemoryStore())
    assert await app.continued_by() == "caller"
    await app.run({}, thread="t1")
    results = await app.sweep(now=10**10)
    assert [(r.thread, r.status, r.values["done"]) for r in results] == [("t1", "done", True)]
