"""The first `App.get_state` after a run, in the App that ran it.

The App keeps the level it committed last for the thread's next call. A read of the thread
takes it, without rebuilding the state from the store's snapshot and deltas, only while the
store's head is still that checkpoint: whatever another App or process wrote since is read
from the store. What the read returns is a copy the caller may change.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import anyio
import msgspec
import pytest

from interlock import END, START, App, Graph, Send, SqliteStore, append, approve
from interlock.stores import CheckpointRecord

pytestmark = pytest.mark.anyio

TEXT = "x" * 600  # big enough that checkpoints are deltas, not whole states


class Chat(TypedDict, total=False):
    messages: Annotated[list[dict[str, Any]], append]
    title: str


def reply(state: Chat) -> dict[str, Any]:
    return {"messages": [{"role": "assistant", "n": len(state["messages"]), "text": TEXT}]}


def chat_graph() -> Graph[Chat]:
    g = Graph(Chat)
    g.add_node("reply", reply)
    g.add_edge(START, "reply").add_edge("reply", END)
    return g


async def say(app: App[Chat], thread: str, turns: int) -> None:
    for _ in range(turns):
        await app.run({"messages": [{"role": "user", "text": TEXT}]}, thread=thread)


async def fresh_values(open_file: Callable[[Path], SqliteStore], db: Path) -> dict[str, Any]:
    """The thread's state as an App that never saw it reads it from the file."""
    return (await chat_graph().compile(store=open_file(db)).get_state("t")).values


async def fresh_state(open_file: Callable[[Path], SqliteStore], db: Path) -> Any:
    """The thread's latest snapshot as an App that never saw it reads it."""
    return await chat_graph().compile(store=open_file(db)).get_state("t")


class Reads:
    """Counts the rows a store returns besides the head: what rebuilding a state reads."""

    def __init__(self, store: SqliteStore) -> None:
        self.rows = 0
        by_range, by_seq = store.checkpoint_range, store.checkpoints_at

        async def checkpoint_range(thread: str, *, lo: int, hi: int) -> list[CheckpointRecord]:
            found = await by_range(thread, lo=lo, hi=hi)
            self.rows += len(found)
            return found

        async def checkpoints_at(thread: str, seqs: list[int]) -> list[CheckpointRecord]:
            found = await by_seq(thread, seqs)
            self.rows += len(found)
            return found

        store.checkpoint_range = checkpoint_range  # type: ignore[method-assign]
        store.checkpoints_at = checkpoints_at  # type: ignore[method-assign,assignment]


async def test_the_first_read_after_a_run_rebuilds_nothing(
    tmp_path: Path, sqlite_files: Callable[[Path], SqliteStore]
) -> None:
    db = tmp_path / "chat.db"
    store = sqlite_files(db)
    app = chat_graph().compile(store=store)
    await say(app, "t", 40)
    reads = Reads(store)
    state = await app.get_state("t")
    assert reads.rows == 0  # the level the run committed, not the snapshot and its deltas
    assert len(state.values["messages"]) == 80
    assert state.values == await fresh_values(sqlite_files, db)
    head = await store.get_checkpoint("t")
    assert head is not None and state.checkpoint_id == head.id and state.step == head.step
    assert state.metadata == (await fresh_state(sqlite_files, db)).metadata
    assert state.next == ()


async def test_an_older_checkpoint_is_read_from_the_store(
    tmp_path: Path, sqlite_files: Callable[[Path], SqliteStore]
) -> None:
    app = chat_graph().compile(store=sqlite_files(tmp_path / "chat.db"))
    await say(app, "t", 3)
    first = (await app.history("t", limit=100))[-1]
    await say(app, "t", 2)
    old = await app.get_state("t", first.checkpoint_id)
    assert old.checkpoint_id == first.checkpoint_id and old.values == first.values
    latest = await app.get_state("t")
    assert len(latest.values["messages"]) == 10


async def test_what_the_first_read_returns_is_the_callers_own(
    tmp_path: Path, sqlite_files: Callable[[Path], SqliteStore]
) -> None:
    db = tmp_path / "chat.db"
    app = chat_graph().compile(store=sqlite_files(db))
    await say(app, "t", 5)
    one = await app.get_state("t")
    one.values["messages"][0]["text"] = "changed"
    one.values["messages"].append({"role": "intruder"})
    one.state["messages"][1]["text"] = "changed too"
    one.metadata["added"] = True
    two = await app.get_state("t")
    assert two.values["messages"][0]["text"] == TEXT
    assert two.values["messages"][1]["text"] == TEXT
    assert len(two.values["messages"]) == 10
    assert "added" not in two.metadata
    # The level the App keeps is the next run's: it goes on from the stored state.
    await say(app, "t", 1)
    three = await app.get_state("t")
    assert three.values == await fresh_values(sqlite_files, db)
    assert [m["text"] for m in three.values["messages"]] == [TEXT] * 12
    assert three.values["messages"][-1]["n"] == 11


async def test_a_pending_question_read_first_is_a_copy_and_the_thread_resumes(
    tmp_path: Path, sqlite_files: Callable[[Path], SqliteStore]
) -> None:
    g = Graph(Chat)

    def gate(state: Chat) -> dict[str, Any]:
        ok = approve("go?", details={"items": [1, 2]})
        return {"title": f"approved={ok}"}

    g.add_node("reply", reply).add_node("gate", gate)
    g.add_edge(START, "reply").add_edge("reply", "gate").add_edge("gate", END)
    app = g.compile(store=sqlite_files(tmp_path / "gate.db"))
    r = await app.run({"messages": [{"role": "user", "text": TEXT}]}, thread="t")
    first = await app.get_state("t")
    assert first.next == ("gate",) and [i.id for i in first.interrupts] == [r.interrupt().id]
    first.interrupts[0].info["details"]["items"].append(0)
    again = await app.get_state("t")
    assert again.interrupts[0].info["details"]["items"] == [1, 2]
    done = await app.resume("t", {r.interrupt().id: True})
    assert done.status == "done" and done.values["title"] == "approved=True"
    after = await app.get_state("t")
    assert after.values["title"] == "approved=True" and after.interrupts == []


async def test_another_app_writing_between_two_reads_is_seen(
    tmp_path: Path, sqlite_files: Callable[[Path], SqliteStore]
) -> None:
    db = tmp_path / "chat.db"
    mine = chat_graph().compile(store=sqlite_files(db))
    other = chat_graph().compile(store=sqlite_files(db))
    await say(mine, "t", 3)
    assert len((await mine.get_state("t")).values["messages"]) == 6
    await say(other, "t", 1)
    await other.update_state("t", {"title": "elsewhere"})
    seen = await mine.get_state("t")
    assert len(seen.values["messages"]) == 8 and seen.values["title"] == "elsewhere"
    await say(mine, "t", 1)  # and this App's next run builds on what the other wrote
    assert (await mine.get_state("t")).values == await fresh_values(sqlite_files, db)
    assert len((await mine.get_state("t")).values["messages"]) == 10


def test_another_process_writing_between_two_reads_is_seen(tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    writer = textwrap.dedent(
        f"""
        import anyio, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_first_read import chat_graph, say
        from interlock import SqliteStore

        async def main():
            app = chat_graph().compile(store=SqliteStore({str(db)!r}))
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
        stores: list[SqliteStore] = []

        def open_file(path: Path) -> SqliteStore:
            stores.append(SqliteStore(path))
            return stores[-1]

        try:
            app = chat_graph().compile(store=open_file(db))
            expected = 0
            for turns in (2, 0, 3):
                await say(app, "t", 2)  # this App holds the level it committed
                expected += 4
                assert len((await app.get_state("t")).values["messages"]) == expected
                write(turns)
                expected += 2 * turns
                state = await app.get_state("t")
                assert state.values["title"] == str(turns)
                assert len(state.values["messages"]) == expected
                assert state.values == await fresh_values(open_file, db)
            assert expected == 22
        finally:
            for store in stores:
                await store.close()

    anyio.run(main)


class Fan(TypedDict, total=False):
    log: Annotated[list[str], append]


def fan_graph() -> Graph[Fan]:
    """``fan`` sends three workers; two ask for approval, one finishes; then ``join``."""

    def fan(s: Fan) -> dict[str, Any]:
        return {"log": ["fan"]}

    def route(s: Fan) -> list[Send]:
        return [Send("worker", {"i": i}) for i in range(3)]

    def worker(arg: dict[str, int]) -> dict[str, Any]:
        ok = approve(f"item {arg['i']}?", details={"item": arg["i"]}) if arg["i"] else True
        return {"log": [f"w{arg['i']}:{ok}"]}

    def join(s: Fan) -> dict[str, Any]:
        return {"log": ["join"]}

    g = Graph(Fan)
    g.add_node("fan", fan).add_node("worker", worker).add_node("join", join)
    g.add_edge(START, "fan")
    g.add_conditional_edges("fan", route)
    g.add_edge("worker", "join").add_edge("join", END)
    return g


def shown(snapshot: Any) -> dict[str, Any]:
    """Every field of a snapshot, to compare two reads of one checkpoint."""
    return msgspec.structs.asdict(snapshot)


async def test_the_first_read_equals_what_a_fresh_app_reads_at_every_stop(
    tmp_path: Path, sqlite_files: Callable[[Path], SqliteStore]
) -> None:
    db = tmp_path / "fan.db"
    app = fan_graph().compile(store=sqlite_files(db), interrupt_before=["join"])

    async def same() -> None:
        mine = await app.get_state("t")
        fresh = await fan_graph().compile(store=sqlite_files(db)).get_state("t")
        assert shown(mine) == shown(fresh)

    r = await app.run({"log": ["start"]}, thread="t")  # two questions, one worker done
    assert r.status == "interrupted" and len(r.interrupts) == 2
    await same()
    first, second = r.interrupts
    await app.resume("t", {first.id: True})  # one answered, one still pending
    await same()
    r = await app.resume("t", {second.id: False})  # stops before join (a breakpoint)
    assert (await app.get_state("t")).next == ("join",)
    await same()
    await app.resume("t")
    await same()
    assert (await app.get_state("t")).values["log"][-1] == "join"
