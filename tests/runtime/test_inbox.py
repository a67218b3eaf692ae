"""The inbox: pending interrupts across threads, from the store's index."""

from __future__ import annotations

import gc
from typing import Any, TypedDict

import msgspec
import pytest

from interlock import START, CheckpointCorrupt, Graph, SqliteStore, Store, approve, choose

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    ok: bool
    pick: str


async def test_inbox_lists_every_waiting_thread_and_answers_resume_them(store: Store) -> None:
    g = Graph(S)
    g.add_node("gate", lambda s: {"ok": approve("ship?", key="ship")})
    g.add_node("pick", lambda s: {"pick": choose("which?", ["a", "b"], key="pick")})
    g.add_edge(START, "gate").add_edge("gate", "pick")
    app = g.compile(store=store)
    for n in range(5):
        await app.run({}, thread=f"order-{n}")

    inbox = await app.inbox()
    assert [i.thread for i in inbox] == [f"order-{n}" for n in range(5)]
    first = inbox[0]
    assert first.key == "ship" and first.kind == "dynamic" and first.status == "pending"
    assert first.info["question"] == "ship?" and str(first.address) == "node:gate"
    assert first.schema is not None and "anyOf" in first.schema

    await app.resume(first.thread, {first.id: True})
    inbox = await app.inbox()
    assert [(i.thread, i.key) for i in inbox] == [
        *((f"order-{n}", "ship") for n in range(1, 5)),
        ("order-0", "pick"),
    ]
    assert [i.thread for i in await app.inbox(key="pick")] == ["order-0"]
    assert [i.key for i in await app.inbox(thread="order-3")] == ["ship"]
    assert len(await app.inbox(limit=2)) == 2
    first_page = await app.inbox(limit=2)
    rest = await app.inbox(after=first_page[-1].id)
    assert [i.id for i in [*first_page, *rest]] == [i.id for i in inbox]

    for i in await app.inbox(key="ship"):
        await app.resume(i.thread, {i.id: False})
    remaining: list[Any] = await app.inbox()
    assert [(i.thread, i.key) for i in remaining] == [(f"order-{n}", "pick") for n in range(5)]


async def test_a_page_of_one_schema_decodes_it_once_and_matches_each_question(
    store: Store,
) -> None:
    # A page of approvals shares one decoded schema; the choices among them keep theirs, and
    # every interrupt of the page is the one its question decodes on its own.
    g = Graph(S)
    g.add_node(
        "gate",
        lambda s: (
            {"pick": choose("which?", ["a", "b"])}
            if s.get("pick")
            else {"ok": approve(f"ship {s}?")}
        ),
    )
    g.add_edge(START, "gate")
    app = g.compile(store=store)
    for n in range(24):
        await app.run({"pick": "x"} if n in (5, 17) else {}, thread=f"t{n}")

    inbox = await app.inbox()
    assert len(inbox) == 24
    for i in inbox:
        found = await app.question(i.id)
        assert found is not None
        assert (i.info, i.schema, i.thread, i.address) == (
            found.interrupt.info,
            found.interrupt.schema,
            found.interrupt.thread,
            found.interrupt.address,
        )
    approvals = [i for i in inbox if i.thread not in ("t5", "t17")]
    assert {i.info["question"] for i in approvals} == {"ship {}?"}
    assert len({id(i.info) for i in approvals}) == 22  # each question its own
    if isinstance(store, SqliteStore):  # decoded from the file: one schema for the page
        assert all(i.schema is approvals[0].schema for i in approvals)
    choices = [i for i in inbox if i.thread in ("t5", "t17")]
    assert [i.info["options"] for i in choices] == [["a", "b"]] * 2
    assert choices[0].schema != approvals[0].schema


@pytest.mark.parametrize("running", [True, False])
async def test_listing_leaves_the_garbage_collector_as_it_found_it(
    store: Store, running: bool
) -> None:
    g = Graph(S)
    g.add_node("gate", lambda s: {"ok": approve("ship?")})
    g.add_edge(START, "gate")
    app = g.compile(store=store)
    for n in range(3):
        await app.run({}, thread=f"t{n}")
    was = gc.isenabled()
    try:
        if not running:
            gc.disable()
        assert len(await app.inbox()) == 3  # the store's page and its decoding pause it
        assert gc.isenabled() is running
        # A page the codec refuses: the collector comes back on with the error.
        row = (await store.pending(limit=1))[0]
        head = await store.get_checkpoint(row.thread)
        assert head is not None
        damaged = msgspec.structs.replace(
            row, id="damaged", thread="t9", checkpoint_id="t9-1", body=b"ILK\x01!"
        )
        record = msgspec.structs.replace(head, thread="t9", id="t9-1", parent_id=None, seq=1)
        await store.append_checkpoint(record, expected_head=None, new_interrupts=[damaged])
        with pytest.raises(CheckpointCorrupt):
            await app.inbox()
        assert gc.isenabled() is running
    finally:
        if was:
            gc.enable()
