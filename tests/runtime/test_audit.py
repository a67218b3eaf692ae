"""The audit log records interrupts, decisions, edits, effects, expiry and cancellation."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any, TypedDict

import pytest

from interlock import START, Graph, Store, append, approve, interrupt, verify_audit

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    log: Annotated[list[str], append]
    ok: bool


def graph() -> Graph[S]:
    g = Graph(S)
    g.add_node("ask", lambda s: {"ok": approve("send the refund?")})
    g.add_node("send", lambda s: {"log": ["sent"]}, dangerous=True)
    g.add_edge(START, "ask")
    g.add_edge("ask", "send")
    return g


async def test_a_thread_s_story_is_in_its_audit_log(store: Store) -> None:
    app = graph().compile(store=store)
    asked = (await app.run({}, thread="t")).interrupt()
    await app.decide("t", {asked.id: True}, actor="ana", reason="known customer", nonce="n1")
    await app.update_state("t", {"log": ["note"]}, actor="bob")
    await app.resume("t")
    entries = await store.audit_log(thread="t")
    kinds = [e.kind for e in entries]
    assert kinds == ["interrupt", "decision", "edit", "effect_started", "effect_done"]
    raised, decision, edit = (json.loads(e.data) for e in entries[:3])
    assert raised["interrupt"] == asked.id and raised["payload_hash"] == app.payload_hash(asked)
    assert decision == {
        "interrupt": asked.id,
        "status": "resolved",
        "answer": True,
        "reason": "known customer",
        "nonce": "n1",
        "payload_hash": app.payload_hash(asked),
    }
    assert entries[1].actor == "ana" and entries[2].actor == "bob"
    assert edit["as_node"] is None
    report = await verify_audit(store)
    assert report.ok and report.entries == 5


async def test_expiry_and_cancellation_are_recorded(store: Store) -> None:
    g = Graph(S)
    g.add_node("ask", lambda s: {"ok": interrupt("approve?", deadline=60)})
    g.add_edge(START, "ask")
    app = g.compile(store=store)
    await app.run({}, thread="late")
    await app.sweep(now=time.time() + 120)
    await app.run({}, thread="busy")
    await app.run({"log": ["changed my mind"]}, thread="busy", on_pending="cancel")
    late = [(e.kind, e.actor) for e in await store.audit_log(thread="late")]
    assert late == [("interrupt", None), ("expired", "sweeper")]
    busy = [e.kind for e in await store.audit_log(thread="busy")]
    assert busy == ["interrupt", "cancelled", "interrupt"]
    assert (await verify_audit(store)).ok


async def test_expired_threads_keep_their_log(store: Store) -> None:
    g = Graph(S)
    g.add_node("ask", lambda s: {"ok": approve("ok?")})
    g.add_edge(START, "ask")
    app = g.compile(store=store)
    r = await app.run({}, thread="t")
    await app.resume("t", {r.interrupt().id: True})
    assert await store.expire(older_than=time.time() + 1) == ["t"]
    kinds = [e.kind for e in await store.audit_log(thread="t")]
    assert kinds == ["interrupt", "decision", "thread_deleted"]
    any_data: Any = json.loads((await store.audit_log(thread="t"))[-1].data)
    assert any_data == {}
