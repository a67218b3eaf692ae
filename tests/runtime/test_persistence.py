"""Checkpoints on disk: deltas stay small, types round-trip, damage is detected."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Annotated, Any, TypedDict

import msgspec
import pytest

from interlock import (
    START,
    CheckpointCorrupt,
    Graph,
    SqliteStore,
    Store,
    UnregisteredType,
    append,
    interrupt,
)
from interlock.stores import CheckpointRecord

pytestmark = pytest.mark.anyio


class Chat(TypedDict, total=False):
    messages: Annotated[list[dict[str, str]], append]


async def test_chat_thread_file_stays_within_3x_raw_bytes(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    store = SqliteStore(path)
    g = Graph(Chat)
    turn = 0

    def reply(s: Chat) -> dict[str, Any]:
        return {"messages": [{"role": "assistant", "content": f"{turn:04d}" + "a" * 1020}]}

    g.add_node("reply", reply).add_edge(START, "reply")
    app = g.compile(store=store)
    raw = 0
    for turn in range(300):
        user = {"role": "user", "content": f"{turn:04d}" + "u" * 1020}
        await app.run({"messages": [user]}, thread="chat")
        raw += 2 * 1024
    state = await app.get_state("chat")
    assert len(state.values["messages"]) == 600
    assert state.values["messages"][-1]["content"].startswith("0299")
    await store.close()
    size = path.stat().st_size
    assert size <= 3 * raw, f"database is {size} bytes for {raw} raw bytes ({size / raw:.2f}x)"


@dataclasses.dataclass
class Opaque:
    secret: str


async def test_unregistered_type_in_state_names_the_path(store: Store) -> None:
    g = Graph(Chat)
    g.add_node(
        "bad", lambda s: {"messages": [{"role": "x"}, {"role": "y", "payload": Opaque("s")}]}
    )
    g.add_edge(START, "bad")
    app = g.compile(store=store)
    with pytest.raises(UnregisteredType) as info:
        await app.run({"messages": [{"role": "user"}]}, thread="t")
    assert "state.messages" in str(info.value) and "Opaque" in str(info.value)
    assert "register" in str(info.value)
    # The thread stays at its last good checkpoint (the input).
    assert (await app.get_state("t")).values["messages"] == [{"role": "user"}]


async def test_registered_types_round_trip_through_checkpoints(store: Store) -> None:
    class S(TypedDict, total=False):
        items: Annotated[list[Opaque], append]

    g = Graph(S)
    g.add_node("a", lambda s: {"items": [Opaque("x")]})
    g.add_node("b", lambda s: {"items": [Opaque(interrupt("more?"))]})
    g.add_edge(START, "a").add_edge("a", "b")
    app = g.compile(store=store)
    r = await app.run({}, thread="t")
    state = await app.get_state("t")
    assert state.values["items"] == [Opaque("x")]
    r = await app.resume("t", {r.interrupt().id: "y"})
    assert r.values["items"] == [Opaque("x"), Opaque("y")]


async def test_corrupt_checkpoint_gives_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    store = SqliteStore(path)
    g = Graph(Chat)
    g.add_node("a", lambda s: {"messages": [{"role": "a"}]}).add_edge(START, "a")
    app = g.compile(store=store)
    await app.run({}, thread="t")
    await store.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE checkpoints SET body = ? WHERE seq = 2", (b"\x00garbage",))
    db.close()
    store = SqliteStore(path)
    try:
        app = g.compile(store=store)
        with pytest.raises(CheckpointCorrupt, match="thread 't'"):
            await app.get_state("t")
    finally:
        await store.close()


async def test_small_states_are_stored_whole(store: Store) -> None:
    g = Graph(Chat)
    g.add_node("a", lambda s: {"messages": [{"role": "a"}]}).add_edge(START, "a")
    await g.compile(store=store).run({}, thread="t")
    records = await store.checkpoint_range("t", lo=1, hi=10)
    assert [r.base_seq for r in records] == [r.seq for r in records] == [1, 2]


async def test_broken_delta_chain_is_reported(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from interlock.runtime import _persist

    monkeypatch.setattr(_persist, "SNAPSHOT_SMALL_BYTES", 0)
    g = Graph(Chat)
    g.add_node("a", lambda s: {"messages": [{"role": "a"}]}).add_edge(START, "a")
    app = g.compile(store=store)
    await app.run({}, thread="t")
    head = await store.get_checkpoint("t")
    assert head is not None and head.base_seq == 1 and head.seq == 2
    orphan = msgspec.structs.replace(head, id="x", seq=3, parent_id="missing")
    await store.append_checkpoint(orphan, expected_head=head.id)
    with pytest.raises(CheckpointCorrupt, match="delta chain is broken"):
        await app.get_state("t")


async def test_checkpoint_records_hold_parent_links_and_sources(store: Store) -> None:
    g = Graph(Chat)
    g.add_node("a", lambda s: {"messages": [{"role": "a"}]})
    g.add_node("b", lambda s: {"messages": [{"role": interrupt("b?")}]})
    g.add_edge(START, "a").add_edge("a", "b")
    app = g.compile(store=store)
    r = await app.run({}, thread="t")
    await app.resume("t", {r.interrupt().id: "b"})
    records: list[CheckpointRecord] = await store.checkpoint_range("t", lo=1, hi=100)
    assert [r.source for r in records] == ["input", "loop", "loop", "resume", "loop"]
    assert [r.status for r in records] == ["ready", "ready", "interrupted", "ready", "done"]
    assert [r.parent_id for r in records[1:]] == [r.id for r in records[:-1]]


async def test_inbox_names_the_damaged_interrupt_among_many(tmp_path: Path) -> None:
    path = tmp_path / "inbox.db"
    store = SqliteStore(path)
    g = Graph(Chat)
    g.add_node("ask", lambda s: {"messages": [{"role": interrupt({"q": "ok?", "n": [1, 2]})}]})
    g.add_edge(START, "ask")
    app = g.compile(store=store)
    for i in range(30):  # a page big enough for the batch decoder's fast path
        await app.run({}, thread=f"t{i:02d}")
    page = await app.inbox(limit=100)
    assert [i.info for i in page] == [{"q": "ok?", "n": [1, 2]}] * 30
    assert [i.thread for i in page] == [f"t{i:02d}" for i in range(30)]
    await store.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE interrupts SET body = ? WHERE thread = 't17'", (b"ILK\x01broken",))
    db.close()
    store = SqliteStore(path)
    try:
        app = g.compile(store=store)
        with pytest.raises(
            CheckpointCorrupt, match=r"thread 't17'.*(checksum mismatch|does not match its digest)"
        ):
            await app.inbox(limit=100)
        # The rest of the inbox stays readable around it.
        assert len(await app.inbox(limit=17)) == 17
    finally:
        await store.close()


async def test_a_damaged_row_in_a_long_range_is_named(tmp_path: Path) -> None:
    # A range is checked in one pass over all its rows; a bad row among many is still found,
    # and named, by the row-by-row check the pass falls back to.
    path = tmp_path / "range.db"
    g = Graph(Chat)
    g.add_node("a", lambda s: {"messages": [{"role": "a"}]}).add_edge(START, "a")
    app = g.compile(store=SqliteStore(path))
    for _ in range(20):
        await app.run({}, thread="t")
    store = app.store
    assert len(await store.checkpoint_range("t", lo=1, hi=100)) == 40
    with sqlite3.connect(path) as db:
        (bad,) = db.execute("SELECT id FROM checkpoints WHERE thread = 't' AND seq = 23").fetchone()
        db.execute("UPDATE checkpoints SET step = step + 1 WHERE id = ?", (bad,))
    db.close()  # the with block commits; it does not close
    with pytest.raises(CheckpointCorrupt, match="checkpoint of thread 't' does not match") as e:
        await store.checkpoint_range("t", lo=1, hi=100)
    assert e.value.checkpoint_id == bad
    assert len(await store.checkpoint_range("t", lo=1, hi=22)) == 22  # the rows before are sound
    await store.close()
