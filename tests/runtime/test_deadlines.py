"""Deadlines: the sweeper resolves expired interrupts by their policy and continues the thread."""

from __future__ import annotations

import time
from typing import Annotated, Any, TypedDict

import pytest

from interlock import START, Graph, Store, append, approve, interrupt, timeout_default

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    log: Annotated[list[str], append]


def graph(**kw: Any) -> Graph[S]:
    g = Graph(S)
    g.add_node("ask", lambda s: {"log": [repr(interrupt("ok?", key="q", deadline=60, **kw))]})
    g.add_edge(START, "ask")
    return g


async def test_reject_by_default_and_only_when_due(store: Store) -> None:
    app = graph().compile(store=store)
    r = await app.run({}, thread="t")
    question = r.interrupt()
    assert question.deadline is not None and question.deadline > time.time() + 50
    assert await app.sweep(now=time.time()) == []  # not due yet: nothing happens
    (done,) = await app.sweep(now=question.deadline + 1)  # an injected clock, no waiting
    assert done.status == "done" and done.values["log"] == ["False"]
    stored = await store.get_interrupt(question.id)
    assert stored is not None and stored.status == "expired"
    assert await app.sweep(now=question.deadline + 1) == []  # acted on exactly once


async def test_default_value_policy(store: Store) -> None:
    app = graph(on_timeout=timeout_default("auto-approved")).compile(store=store)
    r = await app.run({}, thread="t")
    (done,) = await app.sweep(now=r.interrupt().deadline + 1)  # type: ignore[operator]
    assert done.values["log"] == ["'auto-approved'"]


async def test_escalate_asks_again_without_deadline(store: Store) -> None:
    app = graph(on_timeout="escalate").compile(store=store)
    r = await app.run({}, thread="t")
    first = r.interrupt()
    (again,) = await app.sweep(now=first.deadline + 1)  # type: ignore[operator]
    assert again.status == "interrupted"
    escalated = again.interrupt()
    assert escalated.id != first.id and escalated.deadline is None
    assert escalated.info == {"escalated": True, "info": "ok?"}
    assert [i.id for i in await app.inbox()] == [escalated.id]
    done = await app.resume("t", {escalated.id: "yes"})
    assert done.values["log"] == ["'yes'"]


async def test_approve_deadline_in_a_subgraph(store: Store) -> None:
    inner = Graph(S, name="inner")
    inner.add_node("gate", lambda s: {"log": [str(approve("go?", deadline=5))]})
    inner.add_edge(START, "gate")
    outer = Graph(S)
    outer.add_node("sub", inner.compile()).add_edge(START, "sub")
    app = outer.compile(store=store)
    r = await app.run({}, thread="t")
    (done,) = await app.sweep(now=r.interrupt().deadline + 1)  # type: ignore[operator]
    assert done.values["log"] == ["False"]


async def test_unknown_policy_is_a_definition_error(store: Store) -> None:
    from interlock import NodeError

    app = graph(on_timeout="shrug").compile(store=store)
    with pytest.raises(NodeError, match="on_timeout must be"):
        await app.run({}, thread="t")
