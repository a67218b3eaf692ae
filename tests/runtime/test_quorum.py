"""Quorum interrupts: a question that needs approvals from N distinct people.

Each approval is a vote, committed by compare-and-set and audited, that leaves the interrupt
pending until the Nth distinct approver; any other answer (a rejection) decides at once.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

import anyio
import msgspec
import pytest

from interlock import (
    END,
    START,
    App,
    Child,
    Decision,
    Graph,
    InterruptAlreadyResolved,
    InterruptEvent,
    InvalidResume,
    NodeError,
    RunFinishedEvent,
    Segment,
    SqliteStore,
    Store,
    append,
    approve,
    gather_children,
    interrupt,
    timeout_default,
    verify_audit,
)
from interlock.runtime._records import Address, Interrupt
from interlock.runtime._signals import Raised
from interlock.runtime._wire import raised_from_wire, raised_to_wire

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    log: Annotated[list[str], append]
    ok: bool


def graph(executed: Counter[str], approvals: int = 2, **kw: Any) -> Graph[S]:
    """``approve`` (a quorum of ``approvals``), then ``execute`` if it approved."""
    g = Graph(S)

    def execute(s: S) -> dict[str, Any]:
        executed["execute"] += 1
        return {"log": ["executed"]}

    g.add_node("approve", lambda s: {"ok": approve("deploy to prod?", approvals=approvals, **kw)})
    g.add_node("execute", execute)
    g.add_edge(START, "approve")
    g.add_conditional_edges("approve", lambda s: "execute" if s["ok"] else END)
    return g


async def kinds(store: Store, thread: str) -> list[tuple[str, str | None]]:
    return [(r.kind, r.actor) for r in await store.audit_log(thread=thread)]


async def test_approve_returns_true_only_once_n_distinct_actors_approved(store: Store) -> None:
    executed: Counter[str] = Counter()
    app = graph(executed).compile(store=store)
    question = (await app.run({}, thread="t")).interrupt()
    assert (question.approvals, question.approved_by) == (2, ())
    assert "approved=0/2" in repr(question)

    (vote,) = await app.decide("t", {question.id: True}, actor="alice", reason="looks fine")
    assert isinstance(vote, Decision)
    assert (vote.final, vote.approvals, vote.approved_by) == (False, 2, ("alice",))
    assert (vote.actor, vote.reason, vote.answer) == ("alice", "looks fine", True)
    # The vote leaves the interrupt pending, with its progress shown wherever it is read.
    stored = await store.get_interrupt(question.id)
    assert stored is not None and stored.status == "pending"
    (waiting,) = await app.inbox()
    assert (waiting.id, waiting.approvals, waiting.approved_by) == (question.id, 2, ("alice",))
    snapshot = await app.get_state("t")
    assert snapshot.status == "interrupted"
    assert snapshot.interrupts[0].approved_by == ("alice",)
    # Continuing the thread does not run anything: it still waits on the quorum.
    with pytest.raises(InvalidResume, match="waits on 1 interrupt"):
        await app.resume("t")
    assert executed["execute"] == 0

    (last,) = await app.decide("t", {question.id: "approve"}, actor="bob")
    assert (last.final, last.approved_by, last.answer) == (True, ("alice", "bob"), "approve")
    assert await app.inbox() == []
    done = await app.resume("t")
    assert done.status == "done" and done.values == {"ok": True, "log": ["executed"]}
    assert executed["execute"] == 1

    assert await kinds(store, "t") == [
        ("interrupt", None),
        ("approval", "alice"),
        ("approval", "bob"),
        ("decision", "bob"),
    ]
    rows = await store.audit_log(thread="t")
    approval, decision = json.loads(rows[1].data), json.loads(rows[3].data)
    assert approval["interrupt"] == question.id and approval["approved_by"] == ["alice"]
    assert approval["approvals"] == 2 and approval["reason"] == "looks fine"
    assert decision["approved_by"] == ["alice", "bob"] and decision["status"] == "resolved"
    assert (await verify_audit(store)).ok


async def test_three_approvals_count_one_each(store: Store) -> None:
    app = graph(Counter(), approvals=3).compile(store=store)
    question = (await app.run({}, thread="t")).interrupt()
    for n, actor in enumerate(["ana", "ben"], start=1):
        (vote,) = await app.decide("t", {question.id: True}, actor=actor)
        assert not vote.final and len(vote.approved_by) == n
        (shown,) = await app.inbox(thread="t")
        assert len(shown.approved_by) == n and shown.approvals == 3
    (last,) = await app.decide("t", {question.id: True}, actor="cid")
    assert last.final and last.approved_by == ("ana", "ben", "cid")


@pytest.mark.parametrize("rejection", [False, "no", "reject"])
async def test_the_first_rejection_decides_at_once(store: Store, rejection: Any) -> None:
    executed: Counter[str] = Counter()
    app = graph(executed).compile(store=store)
    question = (await app.run({}, thread="t")).interrupt()
    await app.decide("t", {question.id: True}, actor="alice")
    (no,) = await app.decide("t", {question.id: rejection}, actor="bob")
    assert (no.final, no.answer, no.approved_by) == (True, rejection, ("alice",))
    done = await app.resume("t")
    assert done.values["ok"] is False and executed["execute"] == 0
    assert await kinds(store, "t") == [
        ("interrupt", None),
        ("approval", "alice"),
        ("decision", "bob"),
    ]
    # A rejection needs no quorum, nor a name: the first one decides, before any approval too.
    question = (await app.run({}, thread="t2")).interrupt()
    (no,) = await app.decide("t2", {question.id: False})
    assert no.final and no.approved_by == ()


async def test_an_approver_may_still_reject_later(store: Store) -> None:
    app = graph(Counter()).compile(store=store)
    question = (await app.run({}, thread="t")).interrupt()
    await app.decide("t", {question.id: True}, actor="alice")
    (no,) = await app.decide("t", {question.id: False}, actor="alice", reason="found a bug")
    assert no.final and no.actor == "alice"
    assert (await app.resume("t")).values["ok"] is False


async def test_resume_records_a_vote_and_the_thread_stays_interrupted(store: Store) -> None:
    executed: Counter[str] = Counter()
    app = graph(executed).compile(store=store)
    question = (await app.run({}, thread="t")).interrupt()

    first = await app.resume("t", {question.id: True}, actor="alice")
    assert first.status == "interrupted" and executed["execute"] == 0
    assert first.interrupt().id == question.id
    assert first.interrupt().approved_by == ("alice",)
    stored = await store.get_interrupt(question.id)
    assert stored is not None and stored.status == "pending"
    assert first.checkpoint_id == (await app.get_state("t")).checkpoint_id

    with pytest.raises(InvalidResume, match="already approved"):
        await app.resume("t", {question.id: True}, actor="alice")
    done = await app.resume("t", True, actor="bob")  # a bare answer to the single question
    assert done.status == "done" and executed["execute"] == 1
    assert await kinds(store, "t") == [
        ("interrupt", None),
        ("approval", "alice"),
        ("approval", "bob"),
        ("decision", "bob"),
    ]


async def test_a_streamed_vote_reports_the_question_still_waiting(store: Store) -> None:
    app = graph(Counter()).compile(store=store)
    question = (await app.run({}, thread="t")).interrupt()
    async with app.stream(thread="t", resume={question.id: True}, actor="alice") as events:
        seen = [e async for e in events]
    names = [type(e).__name__ for e in seen]
    assert names == ["RunStartedEvent", "CheckpointEvent", "InterruptEvent", "RunFinishedEvent"]
    assert isinstance(seen[2], InterruptEvent) and seen[2].interrupt.approved_by == ("alice",)
    assert isinstance(seen[3], RunFinishedEvent) and seen[3].result.status == "interrupted"


async def assert_nothing_recorded(
    app: App[Any], store: Store, thread: str, iid: str, approved_by: tuple[str, ...]
) -> None:
    stored = await store.get_interrupt(iid)
    assert stored is not None and stored.status == "pending"
    (shown,) = await app.inbox(thread=thread)
    assert shown.approved_by == approved_by


async def test_refusals_record_nothing(store: Store) -> None:
    app = graph(Counter()).compile(store=store)
    question = (await app.run({}, thread="t")).interrupt()
    before = (await app.get_state("t")).checkpoint_id
    log = await kinds(store, "t")

    # An approval without a name cannot count toward a quorum of people.
    with pytest.raises(InvalidResume, match=r"needs named deciders.*actor="):
        await app.decide("t", {question.id: True})
    with pytest.raises(InvalidResume, match="actor="):
        await app.resume("t", {question.id: True})
    with pytest.raises(InvalidResume, match="is invalid"):
        await app.decide("t", {question.id: None}, actor="alice")
    assert (await app.get_state("t")).checkpoint_id == before
    assert await kinds(store, "t") == log
    await assert_nothing_recorded(app, store, "t", question.id, ())
    # No data would give the code's default, deciding for everyone: refused even with one.
    defaulted = graph(Counter(), default=True).compile(store=store)
    other = (await defaulted.run({}, thread="d")).interrupt()
    with pytest.raises(InvalidResume, match="not with no data"):
        await defaulted.decide("d", {other.id: None}, actor="alice")
    await assert_nothing_recorded(defaulted, store, "d", other.id, ())

    await app.decide("t", {question.id: True}, actor="alice", nonce="a-1")
    voted = (await app.get_state("t")).checkpoint_id
    log = await kinds(store, "t")
    # The same person twice is one approval, not two.
    with pytest.raises(InvalidResume, match="'alice' already approved") as refused:
        await app.decide("t", {question.id: True}, actor="alice", nonce="a-2")
    assert refused.value.interrupt_id == question.id
    with pytest.raises(InvalidResume, match="already approved"):
        await app.decide("t", {question.id: "yes"}, actor="alice")
    # A question that changed since it was shown is refused as before.
    with pytest.raises(InvalidResume, match="changed since it was shown"):
        await app.decide("t", {question.id: True}, actor="bob", seen={question.id: "0" * 32})
    # A malformed answer is refused by the schema, as for any question.
    with pytest.raises(InvalidResume, match="invalid"):
        await app.decide("t", {question.id: "perhaps"}, actor="bob")

    assert (await app.get_state("t")).checkpoint_id == voted
    assert await kinds(store, "t") == log
    await assert_nothing_recorded(app, store, "t", question.id, ("alice",))
    # And the quorum is still there to complete.
    (last,) = await app.decide("t", {question.id: True}, actor="bob")
    assert last.final


async def test_a_vote_sent_again_with_its_nonce_is_its_recorded_outcome(store: Store) -> None:
    app = graph(Counter()).compile(store=store)
    question = (await app.run({}, thread="t")).interrupt()
    (vote,) = await app.decide("t", {question.id: True}, actor="alice", nonce="alice-1")
    log = await kinds(store, "t")
    assert await app.decide("t", {question.id: True}, actor="alice", nonce="alice-1") == [vote]
    assert await kinds(store, "t") == log  # the replay wrote nothing

    # Still its outcome after others completed the quorum.
    (last,) = await app.decide("t", {question.id: True}, actor="bob", nonce="bob-1")
    assert await app.decide("t", {question.id: True}, actor="alice", nonce="alice-1") == [vote]
    assert await app.decide("t", {question.id: True}, actor="bob", nonce="bob-1") == [last]
    # Anyone else is told what was decided.
    with pytest.raises(InterruptAlreadyResolved) as told:
        await app.decide("t", {question.id: True}, actor="cid", nonce="cid-1")
    assert told.value.resolved_value == last


async def test_a_vote_survives_reopening_the_file_in_a_fresh_app(tmp_path: Path) -> None:
    executed: Counter[str] = Counter()
    path = tmp_path / "quorum.db"
    async with SqliteStore(path) as first:
        app = graph(executed).compile(store=first)
        question = (await app.run({}, thread="t")).interrupt()
        await app.decide("t", {question.id: True}, actor="alice", nonce="n-a")

    async with SqliteStore(path) as second:
        fresh = graph(executed).compile(store=second)
        (shown,) = await fresh.inbox()
        assert (shown.id, shown.approvals, shown.approved_by) == (question.id, 2, ("alice",))
        assert (await fresh.get_state("t")).interrupts[0].approved_by == ("alice",)
        (replayed,) = await fresh.decide("t", {question.id: True}, actor="alice", nonce="n-a")
        assert not replayed.final and replayed.approved_by == ("alice",)
        with pytest.raises(InvalidResume, match="already approved"):
            await fresh.decide("t", {question.id: True}, actor="alice")
        done = await fresh.resume("t", {question.id: True}, actor="bob")
        assert done.status == "done" and executed["execute"] == 1
        assert (await verify_audit(second)).ok


async def test_interrupt_counts_true_as_an_approval_and_decides_on_anything_else(
    store: Store,
) -> None:
    g = Graph(S)
    g.add_node("ask", lambda s: {"log": [repr(interrupt({"q": "ship?"}, approvals=2))]})
    g.add_edge(START, "ask")
    app = g.compile(store=store)

    question = (await app.run({}, thread="t")).interrupt()
    (vote,) = await app.decide("t", {question.id: True}, actor="a")
    assert not vote.final
    (other,) = await app.decide("t", {question.id: {"hold": "until monday"}}, actor="b")
    assert other.final
    assert (await app.resume("t")).values["log"] == ["{'hold': 'until monday'}"]

    question = (await app.run({}, thread="t", on_pending="cancel")).interrupt()
    await app.decide("t", {question.id: True}, actor="a")
    done = await app.resume("t", {question.id: True}, actor="b")
    assert done.values["log"][-1] == "True"


async def test_one_call_may_vote_and_decide_several_questions(store: Store) -> None:
    g = Graph(S)

    async def both(s: S) -> dict[str, Any]:
        results = await gather_children(
            [
                Child(Segment("tool", "quorum"), lambda: approve("prod?", approvals=2)),
                Child(Segment("tool", "plain"), lambda: approve("staging?")),
            ]
        )
        return {"log": [repr(results)]}

    g.add_node("both", both)
    g.add_edge(START, "both")
    app = g.compile(store=store)
    quorum, plain = (await app.run({}, thread="t")).interrupts
    assert (quorum.approvals, plain.approvals) == (2, 1)

    vote, decision = await app.decide("t", {quorum.id: True, plain.id: True}, actor="alice")
    assert (vote.final, decision.final) == (False, True)
    assert decision.approved_by == () and decision.approvals == 1
    # The plain answer ran its child; the quorum child waits with its vote.
    after = await app.resume("t")
    assert after.status == "interrupted"
    assert after.interrupt().id == quorum.id and after.interrupt().approved_by == ("alice",)
    done = await app.resume("t", {quorum.id: True}, actor="bob")
    assert done.values["log"] == ["[True, True]"]


class Outer(TypedDict, total=False):
    log: Annotated[list[str], append]


def nested_graph() -> Graph[Outer]:
    """A subgraph whose node asks a quorum question and a plain one side by side."""
    inner = Graph(Outer)

    async def ask(s: Outer) -> dict[str, Any]:
        results = await gather_children(
            [
                Child(Segment("tool", "quorum"), lambda: approve("prod?", approvals=2)),
                Child(Segment("tool", "plain"), lambda: approve("staging?")),
            ]
        )
        return {"log": [repr(results)]}

    inner.add_node("ask", ask)
    inner.add_edge(START, "ask")
    outer = Graph(Outer)
    outer.add_node("sub", inner.compile())
    outer.add_edge(START, "sub")
    return outer


async def test_votes_inside_a_subgraph_survive_its_task_running_again(store: Store) -> None:
    app = nested_graph().compile(store=store)
    quorum, plain = (await app.run({}, thread="t")).interrupts
    assert str(quorum.address) == "subgraph:sub/node:ask/tool:quorum"
    await app.decide("t", {quorum.id: True}, actor="alice")
    # Answering the sibling re-runs the subgraph's task, which reports the quorum question
    # again from the subgraph's own record: the vote recorded above must not be lost.
    after = await app.resume("t", {plain.id: True}, actor="carl")
    assert after.status == "interrupted"
    assert after.interrupt().id == quorum.id
    assert after.interrupt().approved_by == ("alice",)
    (shown,) = await app.inbox()
    assert shown.approved_by == ("alice",)
    with pytest.raises(InvalidResume, match="already approved"):
        await app.decide("t", {quorum.id: True}, actor="alice")
    done = await app.resume("t", {quorum.id: True}, actor="bob")
    assert done.status == "done" and done.values["log"] == ["[True, True]"]


async def test_a_deadline_applies_its_policy_to_a_quorum_as_to_any_question(store: Store) -> None:
    executed: Counter[str] = Counter()
    app = graph(executed, deadline=60).compile(store=store)
    question = (await app.run({}, thread="t")).interrupt()
    await app.decide("t", {question.id: True}, actor="alice")
    assert question.deadline is not None
    (done,) = await app.sweep(now=question.deadline + 1)
    assert done.values["ok"] is False and executed["execute"] == 0  # reject, the default
    stored = await store.get_interrupt(question.id)
    assert stored is not None and stored.status == "expired"

    g = Graph(S)
    g.add_node(
        "ask",
        lambda s: {
            "log": [
                repr(interrupt("ok?", approvals=3, deadline=60, on_timeout=timeout_default(True)))
            ]
        },
    )
    g.add_edge(START, "ask")
    app2 = g.compile(store=store)
    question = (await app2.run({}, thread="t2")).interrupt()
    assert question.deadline is not None
    (done,) = await app2.sweep(now=question.deadline + 1)
    assert done.values["log"] == ["True"]  # the policy's answer, whatever the quorum


async def test_an_in_process_handler_cannot_vote(store: Store) -> None:
    app = graph(Counter()).compile(store=store)

    async def yes(_: Any) -> bool:
        return True

    with pytest.raises(InvalidResume, match="actor="):
        await app.run({}, thread="t", on_interrupt=yes)
    (waiting,) = await app.inbox()  # the question is committed and still answerable
    assert waiting.approved_by == ()


@pytest.mark.parametrize(
    ("approvals", "error"), [(0, ValueError), (-1, ValueError), ("2", TypeError), (True, TypeError)]
)
async def test_a_bad_count_is_the_callers_mistake(approvals: Any, error: type[Exception]) -> None:
    app = graph(Counter(), approvals=approvals).compile()
    with pytest.raises(NodeError) as failed:
        await app.run({}, thread="t")
    assert isinstance(failed.value.__cause__, error)
    assert "approvals" in str(failed.value.__cause__)


async def test_one_approval_is_the_plain_question_as_before(store: Store) -> None:
    app = graph(Counter(), approvals=1).compile(store=store)
    question = (await app.run({}, thread="t")).interrupt()
    assert (question.approvals, question.approved_by) == (1, ())
    assert "approved=" not in repr(question)
    (d,) = await app.decide("t", {question.id: True})  # no actor needed
    assert d.final and d.approvals == 1 and d.approved_by == ()
    assert await kinds(store, "t") == [("interrupt", None), ("decision", None)]


# -- the stored form ----------------------------------------------------------------------


def _raised(approvals: int, votes: Sequence[Decision] = ()) -> Raised:
    record = Interrupt(
        id="i1",
        key=None,
        address=Address(),
        kind="dynamic",
        info="?",
        created_at=time.time(),
        approvals=approvals,
        approved_by=tuple(str(v.actor) for v in votes),
    )
    return Raised(
        record,
        task="t1",
        local="l",
        owner="t1",
        approving={"const": True} if approvals > 1 else None,
        votes=tuple(votes),
    )


def _vote(actor: str) -> Decision:
    return Decision(
        interrupt_id="i1",
        thread="t",
        answer=True,
        actor=actor,
        nonce=f"{actor}-1",
        payload_hash="h",
        decided_at=1.0,
        approvals=3,
        approved_by=(actor,),
        final=False,
    )


def test_a_quorum_round_trips_on_the_wire() -> None:
    raised = _raised(3, [_vote("a"), _vote("b")])
    wire = msgspec.msgpack.decode(msgspec.msgpack.encode(raised_to_wire(raised)))
    back = raised_from_wire(wire, "t")
    assert back.interrupt.approvals == 3 and back.interrupt.approved_by == ("a", "b")
    assert back.votes == raised.votes and back.approving == {"const": True}
    # A plain question keeps the fourteen fields checkpoints always held.
    assert len(raised_to_wire(_raised(1))) == 14
    assert raised_from_wire(raised_to_wire(_raised(1))).interrupt.approvals == 1


@pytest.mark.parametrize(
    ("field", "damaged"),
    [
        (14, 1),  # a quorum of one is no quorum
        (14, "3"),
        (15, "yes"),  # the approving schema
        (16, [{"actor": "a"}]),  # a vote that is no decision
        (16, [msgspec.structs.asdict(_vote("a"))] * 2),  # one actor counted twice
    ],
)
def test_damaged_quorum_fields_are_refused(field: int, damaged: Any) -> None:
    wire = raised_to_wire(_raised(3, [_vote("a")]))
    wire[field] = damaged
    with pytest.raises(ValueError, match=r"approvals|approving|vote|distinct"):
        raised_from_wire(wire)


# -- races ------------------------------------------------------------------------------------

ROUNDS = 15


async def vote_at_once(
    apps: Sequence[App[Any]], thread: str, iid: str, actors: Sequence[str]
) -> list[Decision | Exception]:
    """Every actor approves at once, each through its own app; what each got back."""
    outcomes: list[Decision | Exception] = []

    async def one(app: App[Any], actor: str, n: int) -> None:
        try:
            (d,) = await app.decide(thread, {iid: True}, actor=actor, nonce=f"{actor}-{n}")
            outcomes.append(d)
        except (InvalidResume, InterruptAlreadyResolved) as exc:
            outcomes.append(exc)

    async with anyio.create_task_group() as tg:
        for n, actor in enumerate(actors):
            tg.start_soon(one, apps[n % len(apps)], actor, n)
    return outcomes


async def race_rounds(stores: Sequence[Store]) -> None:
    executed: Counter[str] = Counter()
    apps = [graph(executed, approvals=3).compile(store=s) for s in stores]
    for n in range(ROUNDS):
        # Three approvers at once: every vote is counted, the last one resolves it.
        thread = f"three-{n}"
        iid = (await apps[0].run({}, thread=thread)).interrupt().id
        outcomes = await vote_at_once(apps, thread, iid, ["ana", "ben", "cid"])
        assert all(isinstance(o, Decision) for o in outcomes), outcomes
        decisions = [o for o in outcomes if isinstance(o, Decision)]
        final = [d for d in decisions if d.final]
        assert len(final) == 1 and sorted(final[0].approved_by) == ["ana", "ben", "cid"]
        assert sorted(len(d.approved_by) for d in decisions) == [1, 2, 3]
        done = await apps[1].resume(thread)
        assert done.values["ok"] is True
        log = await kinds(stores[0], thread)
        assert sorted(str(a) for k, a in log if k == "approval") == ["ana", "ben", "cid"]
        assert [k for k, _ in log].count("decision") == 1

        # One actor racing itself (two clients, two nonces): counted once, the other refused.
        thread = f"twice-{n}"
        iid = (await apps[0].run({}, thread=thread)).interrupt().id
        outcomes = await vote_at_once(apps, thread, iid, ["ana", "ana"])
        counted = [o for o in outcomes if isinstance(o, Decision)]
        refused = [o for o in outcomes if isinstance(o, InvalidResume)]
        assert len(counted) == 1 and len(refused) == 1, outcomes
        (shown,) = await apps[1].inbox(thread=thread)
        assert shown.approved_by == ("ana",)
        assert [k for k, _ in await kinds(stores[0], thread)].count("approval") == 1
    assert executed["execute"] == ROUNDS
    for s in stores:
        assert (await verify_audit(s)).ok


async def test_concurrent_votes_on_one_sqlite_file(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "t.db") as a, SqliteStore(tmp_path / "t.db") as b:
        await race_rounds([a, b])


async def test_concurrent_votes_on_one_postgres_database(dsn: str) -> None:
    from interlock.stores import PostgresStore

    async with PostgresStore(dsn) as a, PostgresStore(dsn) as b:
        await race_rounds([a, b])
