"""Resuming under a changed graph: GraphChanged, or a registered migration carries state over."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest

from interlock import START, Graph, GraphChanged, Store, approve

pytestmark = pytest.mark.anyio


class V1(TypedDict, total=False):
    amount: int
    ok: bool


class V2(TypedDict, total=False):
    cents: int
    ok: bool
    note: str


def v1() -> Graph[V1]:
    g = Graph(V1)
    g.add_node("ask", lambda s: {"ok": approve(f"pay {s['amount']}?")})
    g.add_edge(START, "ask")
    return g


def v2() -> Graph[V2]:
    g = Graph(V2)
    g.add_node("ask", lambda s: {"ok": approve(f"pay {s['cents'] / 100}?")})
    g.add_node("pay", lambda s: {"note": f"paid {s['cents']} cents"})
    g.add_edge(START, "ask")
    g.add_edge("ask", "pay")
    return g


def to_cents(values: dict[str, Any]) -> dict[str, Any]:
    return {"cents": values.pop("amount") * 100, **values}


async def test_a_changed_graph_is_refused_with_the_way_out(store: Store) -> None:
    old = v1().compile(store=store)
    asked = (await old.run({"amount": 5}, thread="t")).interrupt()
    new = v2().compile(store=store)
    assert new.fingerprint != old.fingerprint
    with pytest.raises(GraphChanged) as changed:
        await new.resume("t", {asked.id: True})
    assert old.fingerprint in str(changed.value) and "migrations=" in str(changed.value)
    assert (await old.get_state("t")).interrupts[0].id == asked.id  # nothing changed


async def test_a_migration_carries_the_state_over(store: Store) -> None:
    old = v1().compile(store=store)
    asked = (await old.run({"amount": 5}, thread="t")).interrupt()
    new = v2().compile(store=store, migrations={old.fingerprint: to_cents})
    (pending,) = (await new.get_state("t")).interrupts
    assert pending.id == asked.id  # the question waiting under the old graph is the same one
    done = await new.resume("t", {asked.id: True})
    assert done.status == "done"
    assert done.values == {"cents": 500, "ok": True, "note": "paid 500 cents"}
    # The thread now belongs to the new graph: it loads without the migration too; its older
    # history is shown through the migration, or refused without it.
    plain = v2().compile(store=store)
    assert (await plain.get_state("t")).values["cents"] == 500
    past = await new.history("t")
    assert [h.values.get("cents") for h in past][-1] == 500 and len(past) >= 3
    with pytest.raises(GraphChanged):
        await plain.history("t")


async def test_a_broken_migration_is_a_clear_error(store: Store) -> None:
    old = v1().compile(store=store)
    await old.run({"amount": 5}, thread="t")

    def wrong_keys(values: dict[str, Any]) -> dict[str, Any]:
        return {"dollars": values["amount"]}

    def raises(values: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("cents")

    for migration, message in ((wrong_keys, "unknown keys ['dollars']"), (raises, "KeyError")):
        new = v2().compile(store=store, migrations={old.fingerprint: migration})
        with pytest.raises(GraphChanged, match=message.replace("[", r"\[").replace("]", r"\]")):
            await new.resume("t")
