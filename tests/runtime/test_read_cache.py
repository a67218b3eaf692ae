"""`App.get_state` keeps the states it read: never stale, never shared with the caller.

An App keeps the latest state of the threads it read, keyed by checkpoint; a later read takes
it only for that same checkpoint, or moves it on by the deltas written since. These tests write
with a second App (its own cache) and with a second process, and check that every read equals
what a fresh App reads from the file.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, NamedTuple, TypedDict

import anyio
import pytest

from interlock import (
    END,
    START,
    App,
    CheckpointCorrupt,
    CheckpointNotFound,
    Graph,
    SqliteStore,
    append,
    approve,
)
from interlock.runtime import _persist
from interlock.stores import CheckpointRecord

pytestmark = pytest.mark.anyio

TEXT = "x" * 600  # big enough that checkpoints are deltas, not whole states


class Chat(TypedDict, total=False):
    messages: Annotated[list[dict[str, Any]], append]
    title: str


def reply(state: Chat) -> dict[str, Any]:
    return {"messages": [{"role": "assistant", "n": len(state["messages"]), "text": TEXT}]}


def chat_app(path: Path) -> App[Chat]:
    g = Graph(Chat)
    g.add_node("reply", reply)
    g.add_edge(START, "reply").add_edge("reply", END)
    return g.compile(store=SqliteStore(path))


async def say(app: App[Chat], thread: str, turns: int) -> None:
    for _ in range(turns):
        await app.run({"messages": [{"role": "user", "text": TEXT}]}, thread=thread)


async def fresh_values(path: Path, thread: str) -> dict[str, Any]:
    app = chat_app(path)
    try:
        return (await app.get_state(thread)).values
    finally:
        await app.store.close()


class Pair(NamedTuple):
    db: Path
    reader: App[Chat]
    writer: App[Chat]


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[Pair]:
    """Two Apps on one file, each with its own cache: one reads, the other writes."""
    db = tmp_path / "chat.db"
    apps = Pair(db, chat_app(db), chat_app(db))
    yield apps
    for app in (apps.reader, apps.writer):
        await app.store.close()  # closing twice is harmless


class Ranges:
    """Records the rows each `checkpoint_range` call of a store returns."""

    def __init__(self, store: SqliteStore) -> None:
        self.rows: list[int] = []
        inner = store.checkpoint_range

        async def counted(thread: str, *, lo: int, hi: int) -> list[CheckpointRecord]:
            found = await inner(thread, lo=lo, hi=hi)
            self.rows.append(len(found))
            return found

        store.checkpoint_range = counted  # type: ignore[method-assign]


async def test_a_read_after_another_app_wrote_reads_only_the_new_deltas(pair: Pair) -> None:
    db, reader, writer = pair
    await say(writer, "t", 20)
    first = await reader.get_state("t")
    assert first.values == await fresh_values(db, "t")

    ranges = Ranges(reader.store)  # type: ignore[arg-type]
    await say(writer, "t", 3)  # six checkpoints more: an input and a step per turn
    later = await reader.get_state("t")
    assert later.values == await fresh_values(db, "t")
    assert len(later.values["messages"]) == len(first.values["messages"]) + 6
    assert ranges.rows == [5]  # the five between the cached head and the new one; no more

    again = await reader.get_state("t")
    assert again.values == later.values and ranges.rows == [5]  # same head: nothing read


async def test_what_a_read_returns_is_a_copy_the_caller_may_change(tmp_path: Path) -> None:
    g = Graph(Chat)

    def gate(state: Chat) -> dict[str, Any]:
        approve("go?", details={"items": [1, 2]})
        return {}

    g.add_node("reply", reply).add_node("gate", gate)
    g.add_edge(START, "reply").add_edge("reply", "gate").add_edge("gate", END)
    app = g.compile(store=SqliteStore(tmp_path / "c.db"))
    await app.run({"messages": [{"role": "user", "text": TEXT}]}, thread="t0")  # stops at gate
    first = await app.get_state("t0")  # a copy of the level the App kept
    first.values["messages"][0]["text"] = "changed first"
    first.interrupts[0].info["details"]["items"].append(0)
    one = await app.get_state("t0")  # a new copy: the first was the caller's own
    assert one.values["messages"][0]["text"] == TEXT
    assert one.interrupts[0].info["details"]["items"] == [1, 2]
    one.values["messages"][0]["text"] = "changed"
    one.values["messages"].append({"role": "intruder"})
    one.state["messages"][1]["text"] = "changed too"
    one.interrupts[0].info["details"]["items"].append(3)
    one.metadata["added"] = True
    two = await app.get_state("t0")
    assert two.values["messages"][0]["text"] == TEXT
    assert two.state["messages"][1]["text"] == TEXT
    assert len(two.values["messages"]) == 2
    assert two.interrupts[0].info["details"]["items"] == [1, 2]
    assert "added" not in two.metadata
    assert two.state == two.values  # one state, as `history` gives it
    await app.store.close()


async def test_a_thread_deleted_elsewhere_is_not_read_from_the_cache(pair: Pair) -> None:
    _, reader, writer = pair
    await say(writer, "t", 5)
    await reader.get_state("t")
    await writer.store.delete_thread("t")
    with pytest.raises(CheckpointNotFound):
        await reader.get_state("t")
    await say(writer, "t", 1)  # the same name again, a new thread
    assert len((await reader.get_state("t")).values["messages"]) == 2


async def test_edits_and_new_snapshots_written_elsewhere_are_seen(
    pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_persist, "SNAPSHOT_MIN_BYTES", 8 * 1024)  # snapshots every few turns
    db, reader, writer = pair
    await say(writer, "t", 4)
    await reader.get_state("t")
    seen_bases = set()
    for turn in range(30):
        await say(writer, "t", 1)
        if turn % 7 == 0:
            await writer.update_state("t", {"title": f"turn {turn}"})
        state = await reader.get_state("t")
        assert state.values == await fresh_values(db, "t")
        seen_bases.add((await reader.store.get_checkpoint("t")).base_seq)  # type: ignore[union-attr]
    assert len(seen_bases) > 2  # the cached chain was left behind for new snapshots


async def test_a_delta_damaged_after_the_state_was_cached_is_refused(pair: Pair) -> None:
    db, reader, writer = pair
    await say(writer, "t", 10)
    await reader.get_state("t")
    await say(writer, "t", 2)
    await writer.store.close()
    with sqlite3.connect(db) as raw:
        (seq,) = raw.execute("SELECT max(seq) - 1 FROM checkpoints WHERE thread = 't'").fetchone()
        raw.execute(
            "UPDATE checkpoints SET body = CAST(zeroblob(40) AS BLOB) WHERE thread = 't' "
            "AND seq = ?",
            (seq,),
        )
    raw.close()  # the with block commits; it does not close
    with pytest.raises(CheckpointCorrupt):
        await reader.get_state("t")


@pytest.mark.parametrize("every", [None, 4096], ids=["default snapshots", "snapshots every 4 KiB"])
def test_a_second_process_writing_is_seen_by_the_reader(tmp_path: Path, every: int | None) -> None:
    db = tmp_path / "chat.db"
    writer = textwrap.dedent(
        f"""
        import anyio, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_read_cache import chat_app, say
        from interlock.runtime import _persist

        if {every!r} is not None:
            _persist.SNAPSHOT_MIN_BYTES = {every!r}  # shared snapshots in the writes that follow

        async def main():
            app = chat_app({str(db)!r})
            await say(app, "t", int(sys.argv[1]))
            await app.update_state("t", {{"title": sys.argv[1]}})
            await app.store.close()

        anyio.run(main)
        """
    )

    def write(turns: int) -> None:
        done = subprocess.run(
            [sys.executable, "-c", writer, str(turns)], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr

    async def main() -> None:
        write(8)
        reader = chat_app(db)
        lengths = [len((await reader.get_state("t")).values["messages"])]
        for turns in (1, 3, 0, 2, 0):
            write(turns)
            state = await reader.get_state("t")
            assert state.values == await fresh_values(db, "t")
            assert state.values["title"] == str(turns)
            lengths.append(len(state.values["messages"]))
        assert lengths == [16, 18, 24, 24, 28, 28]
        if every is not None:  # the writes made snapshots that name earlier ones
            rows = await reader.store.checkpoint_range("t", lo=1, hi=999)
            ops = [reader.plan.codec.decode(r.body)["ch"].get("messages", "-")[0] for r in rows]
            assert ops.count("seg") >= 3
        await reader.store.close()

    anyio.run(main)
