"""A reconcile question names its call by the same key `effect_key` gives the code."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest

from interlock import START, Graph, NodeError, Store, effect, effect_key

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    out: str


class Line:
    """An outside system whose first call drops after acting."""

    def __init__(self) -> None:
        self.calls = 0

    def send(self) -> str:
        self.calls += 1
        if self.calls == 1:
            raise ConnectionError("the line dropped")
        return "sent"


async def reconcile_key(store: Store, g: Graph[S]) -> str:
    app = g.compile(store=store)
    with pytest.raises(NodeError):
        await app.run({}, thread="t")
    question = (await app.resume("t")).interrupt()
    assert question.kind == "reconcile"
    key: str = question.info["key"]
    return key


async def test_an_effect_call_s_reconcile_key_is_its_effect_key(store: Store) -> None:
    line, seen = Line(), []

    async def node(s: S) -> dict[str, Any]:
        seen.append(effect_key("send"))
        return {"out": await effect("send", line.send)}

    g = Graph(S)
    g.add_node("work", node).add_edge(START, "work")
    key = await reconcile_key(store, g)
    assert seen and set(seen) == {key} and key.startswith("t/")


async def test_a_dangerous_node_s_reconcile_key_is_its_effect_key(store: Store) -> None:
    line, seen = Line(), []

    def node(s: S) -> dict[str, Any]:
        seen.append(effect_key())
        return {"out": line.send()}

    g = Graph(S)
    g.add_node("pay", node, dangerous=True).add_edge(START, "pay")
    key = await reconcile_key(store, g)
    assert seen and set(seen) == {key} and key.startswith("t/")
