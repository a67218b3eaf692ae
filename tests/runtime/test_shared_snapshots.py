"""Snapshots of a growing list name what earlier snapshots hold instead of copying it.

A long chat is stored as delta checkpoints plus snapshots every `SNAPSHOT_MIN_BYTES` of deltas;
each snapshot stores only the messages after the previous one and names the earlier snapshots
(``(seq, count)``) for the rest. These tests check that every state read back is exact (fresh
App, warm App, history, after a fork, after a migration), that a read stays a few rows however
long the chat, that no message is copied into two snapshots, and that a damaged reference is
refused with `CheckpointCorrupt`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

import msgspec
import pytest
from test_history_bounds import CountingStore as RangeCountingStore

from interlock import (
    END,
    START,
    App,
    CheckpointCorrupt,
    Graph,
    MemoryStore,
    SqliteStore,
    Store,
    append,
)
from interlock.runtime import _persist
from interlock.stores import CheckpointRecord

pytestmark = pytest.mark.anyio

TEXT = "x" * 600
MIN_BYTES = 4 * 1024


class Chat(TypedDict, total=False):
    messages: Annotated[list[dict[str, Any]], append]
    title: str


@pytest.fixture(autouse=True)
def frequent_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot every ~4 KiB of deltas (every three turns or so) instead of every 32 KiB."""
    monkeypatch.setattr(_persist, "SNAPSHOT_MIN_BYTES", MIN_BYTES)


class CountingStore(RangeCountingStore):
    """A memory store that counts the checkpoint rows its range and seq reads return."""

    async def checkpoints_at(self, thread: str, seqs: Sequence[int]) -> list[CheckpointRecord]:
        rows = await super().checkpoints_at(thread, seqs)
        self.rows_read += len(rows)
        return rows


def chat_graph() -> Graph[Chat]:
    g = Graph(Chat)
    g.add_node("reply", lambda s: {"messages": [{"n": len(s["messages"]), "text": TEXT}]})
    g.add_edge(START, "reply").add_edge("reply", END)
    return g


async def say(app: App[Chat], thread: str, turns: int) -> None:
    for _ in range(turns):
        await app.run({"messages": [{"role": "user", "text": TEXT}]}, thread=thread)


def expected(turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for _ in range(turns):
        out.append({"role": "user", "text": TEXT})
        out.append({"n": len(out), "text": TEXT})
    return out


async def rows(store: Store, thread: str) -> list[CheckpointRecord]:
    return await store.checkpoint_range(thread, lo=1, hi=10**6)


def entries(app: App[Chat], record: CheckpointRecord) -> dict[str, Any]:
    """The channel entries a checkpoint body stores."""
    body = app.plan.codec.decode(record.body)
    assert isinstance(body, dict)
    return body["ch"]  # type: ignore[no-any-return]


def shared_snapshots(app: App[Chat], records: list[CheckpointRecord]) -> list[CheckpointRecord]:
    return [
        r
        for r in records
        if r.seq == r.base_seq and entries(app, r).get("messages", [None])[0] == "seg"
    ]


async def test_every_read_of_a_long_chat_is_exact(store: Store) -> None:
    app = chat_graph().compile(store=store)
    await say(app, "t", 40)
    records = await rows(store, "t")
    assert len(shared_snapshots(app, records)) >= 5
    want = expected(40)
    assert (await app.get_state("t")).values["messages"] == want
    fresh = chat_graph().compile(store=store)  # no warm state, no read cache
    assert (await fresh.get_state("t")).values["messages"] == want
    seen = 0
    before = None
    while page := await fresh.history("t", limit=7, before=before):
        for snap in page:
            n = len(snap.values.get("messages", []))
            assert snap.values.get("messages", []) == want[:n]
            seen += 1
        before = page[-1].checkpoint_id
    assert seen == len(records)


async def test_no_message_is_copied_into_two_snapshots(store: Store) -> None:
    app = chat_graph().compile(store=store)
    await say(app, "t", 40)
    records = await rows(store, "t")
    last_small = max(r.seq for r in records if r.seq == r.base_seq and r.seq < 10)
    held = 0
    for r in records:
        if r.seq != r.base_seq or r.seq < last_small:
            continue
        op, payload = entries(app, r)["messages"]
        held += len(payload if op == "set" else payload[1])
    # From the last whole (small-state) snapshot on, each message is in one snapshot at most.
    assert held <= len(expected(40))
    head = shared_snapshots(app, records)[-1]
    op, (refs, items) = entries(app, head)["messages"]
    assert [seq for seq, _ in refs] == sorted(seq for seq, _ in refs)
    assert sum(count for _, count in refs) + len(items) == len(
        (await app.get_state("t", checkpoint_id=head.id)).values["messages"]
    )


async def test_a_fresh_read_stays_a_few_rows_however_long_the_chat() -> None:
    store = CountingStore()
    app = chat_graph().compile(store=store)
    delta = 800  # the smallest delta checkpoint of this chat, in bytes (a message of 600 + framing)
    read: dict[int, int] = {}
    for turns in (20, 60, 120):
        await say(app, "t", turns - (max(read) if read else 0))
        store.rows_read = 0
        reader = chat_graph().compile(store=store)
        assert (await reader.get_state("t")).values["messages"] == expected(turns)
        read[turns] = store.rows_read
        snapshots = sum(r.seq == r.base_seq for r in await rows(store, "t"))
        # The snapshots the head's base names, and at most SNAPSHOT_MIN_BYTES of deltas.
        assert read[turns] <= snapshots + math.ceil(MIN_BYTES / delta) + 1, read
    total = len(await rows(store, "t"))
    assert read[120] < total / 4, (read, total)


async def test_a_run_continued_from_the_store_keeps_naming_earlier_snapshots(
    tmp_path: Path,
) -> None:
    db = tmp_path / "chat.db"
    for turns in range(0, 40, 5):  # a new App, so a cold load, every five turns
        app = chat_graph().compile(store=SqliteStore(db))
        try:
            await say(app, "t", 5)
            assert (await app.get_state("t")).values["messages"] == expected(turns + 5)
        finally:
            await app.store.close()
    app = chat_graph().compile(store=SqliteStore(db))
    try:
        snaps = shared_snapshots(app, await rows(app.store, "t"))
        refs = [entries(app, r)["messages"][1][0] for r in snaps]
        assert len(snaps) >= 5
        # Each names what the one before it named, and that one.
        for earlier, later, named in zip(snaps, snaps[1:], refs[1:], strict=False):
            assert [seq for seq, _ in named][-1] == earlier.seq
            assert named[:-1] == refs[snaps.index(earlier)]
            assert later.seq > earlier.seq
    finally:
        await app.store.close()


async def test_a_fork_of_a_long_chat_stands_on_its_own(store: Store) -> None:
    app = chat_graph().compile(store=store)
    await say(app, "t", 30)
    first = await app.fork("t", None, "f")
    forked = await rows(store, "f")
    assert [r.id for r in forked] == [first] and forked[0].seq == forked[0].base_seq
    assert entries(app, forked[0])["messages"][0] == "set"  # names nothing of thread "t"
    await say(app, "f", 20)
    await store.delete_thread("t")
    fresh = chat_graph().compile(store=store)
    assert (await fresh.get_state("f")).values["messages"] == expected(50)
    assert shared_snapshots(app, await rows(store, "f"))


async def test_a_migration_sees_the_whole_list(store: Store) -> None:
    old = chat_graph().compile(store=store)
    await say(old, "t", 30)

    class Renamed(TypedDict, total=False):
        log: Annotated[list[dict[str, Any]], append]

    seen: list[int] = []

    def migrate(values: dict[str, Any]) -> dict[str, Any]:
        seen.append(len(values["messages"]))
        return {"log": values["messages"]}

    g = Graph(Renamed)
    g.add_node("reply", lambda s: {"log": [{"n": len(s["log"]), "text": TEXT}]})
    g.add_edge(START, "reply").add_edge("reply", END)
    new = g.compile(store=store, migrations={old.fingerprint: migrate})
    assert (await new.get_state("t")).values["log"] == expected(30)
    await new.run({"log": [{"role": "user", "text": TEXT}]}, thread="t")
    assert seen and seen[0] == 60
    again = g.compile(store=store)  # the migrated thread is read without the migration now
    assert (await again.get_state("t")).values["log"] == expected(31)


async def forge_head(store: MemoryStore, app: App[Chat], edit: Any) -> None:
    """Append a copy of the latest shared snapshot, its body changed by ``edit``, as the head."""
    records = await rows(store, "t")
    snap = shared_snapshots(app, records)[-1]
    body = app.plan.codec.decode(snap.body)
    edit(body)
    head = records[-1]
    forged = msgspec.structs.replace(
        snap,
        id="forged",
        seq=head.seq + 1,
        base_seq=head.seq + 1,
        parent_id=head.id,
        body=app.plan.codec.encode(body),
    )
    await store.append_checkpoint(forged, expected_head=head.id)


def _set_refs(refs: list[list[int]]) -> Any:
    def edit(body: dict[str, Any]) -> None:
        body["ch"]["messages"][1][0] = refs

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda b: b["ch"]["messages"][1][0][-1].__setitem__(1, 1), "does not hold the 1 items"),
        (_set_refs([[99999, 2]]), "names \\[99999, 2\\]"),
        (_set_refs([[3, 2], [2, 2]]), "names \\[2, 2\\]"),
        (_set_refs([[1, 0]]), "names \\[1, 0\\]"),
        (_set_refs([]), "is malformed"),
        (lambda b: b["ch"]["messages"].__setitem__(1, "nonsense"), "is malformed"),
    ],
)
async def test_a_damaged_reference_is_refused(edit: Any, message: str) -> None:
    store = MemoryStore()
    app = chat_graph().compile(store=store)
    await say(app, "t", 30)
    await forge_head(store, app, edit)
    with pytest.raises(CheckpointCorrupt, match=message):
        await chat_graph().compile(store=store).get_state("t")


async def test_a_reference_to_a_delta_is_refused() -> None:
    store = MemoryStore()
    app = chat_graph().compile(store=store)
    await say(app, "t", 30)
    records = await rows(store, "t")
    delta = next(r for r in records if r.seq != r.base_seq)
    count = len(entries(app, delta)["messages"][1])
    await forge_head(store, app, _set_refs([[delta.seq, count]]))
    with pytest.raises(CheckpointCorrupt, match="is not a snapshot"):
        await chat_graph().compile(store=store).get_state("t")


async def test_a_shared_entry_in_a_delta_is_refused() -> None:
    store = MemoryStore()
    app = chat_graph().compile(store=store)
    await say(app, "t", 30)
    records = await rows(store, "t")
    head = records[-1]
    assert head.seq != head.base_seq
    body = app.plan.codec.decode(head.body)
    body["ch"]["messages"] = ["seg", [[[1, 1]], []]]
    forged = msgspec.structs.replace(
        head, id="forged", seq=head.seq + 1, parent_id=head.id, body=app.plan.codec.encode(body)
    )
    await store.append_checkpoint(forged, expected_head=head.id)
    with pytest.raises(CheckpointCorrupt, match="invalid state deltas"):
        await chat_graph().compile(store=store).get_state("t")


async def test_a_second_read_rebuilds_from_the_rows_kept_by_the_first(tmp_path: Path) -> None:
    store = CountingStore()
    writer = chat_graph().compile(store=store)
    await say(writer, "t", 40)
    reader = chat_graph().compile(store=store)
    first = await reader.get_state("t")  # handed over: the reader keeps the rows only
    first.values["messages"].clear()
    store.rows_read = 0
    second = await reader.get_state("t")  # rebuilt from the rows kept: nothing read again
    assert store.rows_read == 0
    assert second.values["messages"] == expected(40)
    second.values["messages"].clear()  # a copy: the state kept is not changed
    assert (await reader.get_state("t")).values["messages"] == expected(40)
    assert store.rows_read == 0


async def test_rows_kept_of_a_deleted_thread_are_not_used_for_its_successor() -> None:
    store = MemoryStore()
    writer = chat_graph().compile(store=store)
    await say(writer, "t", 40)
    reader = chat_graph().compile(store=store)
    await reader.get_state("t")  # keeps the rows of this thread "t"
    await store.delete_thread("t")

    other = Graph(Chat)
    other.add_node("reply", lambda s: {"messages": [{"other": len(s["messages"])}]})
    other.add_edge(START, "reply").add_edge("reply", END)
    app = other.compile(store=store)
    for _ in range(45):  # a new thread "t": the same seqs, other rows
        await app.run({"messages": [{"role": "user", "text": TEXT}]}, thread="t")
    want = (await chat_graph().compile(store=store).get_state("t")).values
    assert (await reader.get_state("t")).values == want
    assert (await reader.get_state("t")).values == want
