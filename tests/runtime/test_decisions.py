"""Deciding apart from continuing; recorded decisions; idempotent retries; stale questions."""

from __future__ import annotations

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
