"""`App.record_failure`: a thread whose continuation cannot run is left failed, and goes on
from there once the cause is fixed."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import pytest

from interlock import (
    END,
    START,
    App,
    Graph,
    GraphChanged,
    InvalidUpdate,
    Store,
    StoreError,
    ThreadBusy,
    ThreadInterrupted,
    append,
    approve,
)

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    log: Annotated[list[str], append]
    ok: bool


def _app(store: Store, **kwargs: Any) -> App[S]:
    """Steps that grow the state past a whole snapshot (its checkpoints become deltas), then a
    question, then a last step."""

    def grow(state: S) -> S:
        return {"log": [f"{len(state.get('log', []))}:" + "x" * 1200]}

    def ask(state: S) -> S:
        return {"ok": approve("go on?")}

    def done(state: S) -> S:
        return {"log": ["done"]}

    g = Graph(S, name="growing")
    g.add_node("a", grow).add_node("b", grow).add_node("c", grow)
    g.add_node("ask", ask).add_node("done", done)
    g.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", "ask")
    g.add_edge("ask", "done").add_edge("done", END)
    return g.compile(store=store, **kwargs)


async def test_a_failed_record_keeps_the_state_and_the_answers_for_a_later_resume(
    store: Store,
) -> None:
    app = _app(store)
    asked = await app.run({}, thread="t")
    await app.decide("t", {asked.interrupts[0].id: True}, actor="ana")
    decided = await app.get_state("t")
    head = await store.get_checkpoint("t")
    assert head is not None and head.base_seq < head.seq  # a delta on a snapshot: the hard case
    changed = GraphChanged(thread="t", stored="f-old", current=app.plan.fingerprint)

    failed_id = await app.record_failure("t", changed)
    assert failed_id is not None
    failed = await app.get_state("t")
    assert (failed.checkpoint_id, failed.parent_id) == (failed_id, decided.checkpoint_id)
    assert (failed.status, failed.values, failed.next) == ("failed", decided.values, ("ask",))
    assert failed.metadata["error"] == f"GraphChanged: {changed}"
    assert failed.metadata["continue_with"] == "interlock resume t --app MODULE:ATTR"
    assert (await store.get_thread("t")).status == "failed"  # type: ignore[union-attr]
    # Recorded once: asked again, it names the same checkpoint and writes nothing.
    assert await app.record_failure("t", changed) == failed_id

    done = await _app(store).resume("t")  # a fresh process, the cause fixed
    assert done.status == "done" and done.values["ok"] is True
    assert [entry[:2] for entry in done.values["log"]] == ["0:", "1:", "2:", "do"]


async def test_what_a_retry_may_fix_or_that_changed_nothing_is_not_recorded(
    store: Store,
) -> None:
    app = _app(store)
    asked = await app.run({}, thread="t")
    await app.decide("t", {asked.interrupts[0].id: True}, actor="ana")
    head = (await app.get_state("t")).checkpoint_id
    for error in (StoreError("the database is away"), ThreadBusy("t"), RuntimeError("?")):
        assert await app.record_failure("t", error) is None
    assert await app.record_failure("nobody", InvalidUpdate("bad")) is None
    assert (await app.get_state("t")).checkpoint_id == head


async def _decided_then_failed(store: Store) -> tuple[App[S], str]:
    """Thread ``t`` with its question decided, then its continuation failed; the question."""
    app = _app(store)
    asked = await app.run({}, thread="t")
    question = asked.interrupts[0].id
    await app.decide("t", {question: True}, actor="ana")
    await app.record_failure("t", GraphChanged(thread="t", stored="a", current="b"))
    return app, question


async def test_new_input_on_it_does_not_drop_the_decision_unsaid(store: Store) -> None:
    app, question = await _decided_then_failed(store)
    # Its decided task never ran: new input must say so, as on the ready thread it was.
    with pytest.raises(ThreadInterrupted) as refused:
        await app.run({"log": ["again"]}, thread="t")
    assert refused.value.decided == (question,)


async def test_an_edit_as_a_node_does_not_drop_the_decision_unsaid(store: Store) -> None:
    app, question = await _decided_then_failed(store)
    # An edit as a node plans that node's successors: the decided task would never run.
    with pytest.raises(ThreadInterrupted) as refused:
        await app.update_state("t", {"log": ["edited"]}, as_node="c")
    assert refused.value.decided == (question,)
    # Without as_node nothing is planned again: the edit is kept and the decision still runs.
    await app.update_state("t", {"log": ["edited"]})
    done = await app.resume("t")
    assert done.status == "done" and done.values["ok"] is True
    assert done.values["log"][-2:] == ["edited", "done"]


async def test_the_app_lists_failed_threads_with_why_and_what_continues_them(store: Store) -> None:
    app = _app(store)
    for thread in ("t1", "t2", "t3"):
        await app.run({}, thread=thread)
    changed = GraphChanged(thread="t2", stored="f-old", current=app.plan.fingerprint)
    await app.decide("t2", {(await app.inbox(thread="t2"))[0].id: True}, actor="ana")
    await app.record_failure("t2", changed)
    [failed] = await app.threads(status="failed")
    assert (failed.thread, failed.status) == ("t2", "failed")
    assert failed.error == f"GraphChanged: {changed}"
    assert failed.continue_with == "interlock resume t2 --app MODULE:ATTR"
    listed = await app.threads(limit=2)
    assert [t.thread for t in listed] == ["t1", "t2"]
    assert listed[0].error is None and listed[1].error is not None
    assert [t.thread for t in await app.threads(after="t2")] == ["t3"]
    with pytest.raises(ValueError, match="status"):
        await app.threads(status="broken")  # type: ignore[arg-type]
