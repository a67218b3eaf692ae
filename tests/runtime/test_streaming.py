"""Streaming nodes: chunks as events, their concatenation in the checkpoint."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import anyio
import pytest

from interlock import (
    START,
    ChunkEvent,
    Graph,
    InvalidUpdate,
    NodeError,
    NodeOutputEvent,
    SqliteStore,
    Store,
    append,
    interrupt,
    register_concat,
)

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    text: str
    blob: bytes
    items: Annotated[list[int], append]
    pair: tuple[int, ...]
    meta: dict[str, Any]
    tokens: Any


async def run_streaming(store: Store, node: Any, thread: str) -> tuple[list[Any], dict[str, Any]]:
    g = Graph(S)
    g.add_node("gen", node).add_edge(START, "gen")
    app = g.compile(store=store)
    chunks: list[Any] = []
    values: dict[str, Any] = {}
    async with app.stream({}, thread=thread, modes=["chunks"]) as events:
        async for event in events:
            if isinstance(event, ChunkEvent):
                assert event.node == "gen"
                chunks.append(event.chunk)
            else:
                values = event.result.values
    stored = (await app.get_state(thread)).values
    assert stored == values  # the checkpoint holds the concatenated update
    return chunks, values


async def test_each_builtin_rule(store: Store) -> None:
    async def words(s: S) -> AsyncIterator[dict[str, Any]]:
        for w in ("Hel", "lo", "!"):
            yield {"text": w}

    chunks, values = await run_streaming(store, words, "str")
    assert chunks == [{"text": "Hel"}, {"text": "lo"}, {"text": "!"}]
    assert values["text"] == "Hello!"

    async def everything(s: S) -> AsyncIterator[dict[str, Any]]:
        yield {"blob": b"ab", "items": [1], "pair": (1,), "meta": {"a": "x", "n": 1}}
        yield {"blob": b"cd", "items": [2, 3], "pair": (2, 3), "meta": {"a": "y", "b": [1]}}
        yield {"meta": {"b": [2]}}

    chunks, values = await run_streaming(store, everything, "all")
    assert len(chunks) == 3
    assert values["blob"] == b"abcd"
    assert values["items"] == [1, 2, 3]
    assert values["pair"] == (1, 2, 3)
    assert values["meta"] == {"a": "xy", "n": 1, "b": [1, 2]}


async def test_registered_rule_and_unknown_type(store: Store) -> None:
    @dataclasses.dataclass
    class Tokens:  # a fresh class per run: the concat registry is process-wide
        ids: list[int]

    async def tokens(s: S) -> AsyncIterator[dict[str, Any]]:
        yield {"tokens": Tokens([1])}
        yield {"tokens": Tokens([2, 3])}

    g = Graph(S)
    g.add_node("gen", tokens).add_edge(START, "gen")
    app = g.compile(store=store)
    with pytest.raises(
        InvalidUpdate,
        match=r"node .gen., key .tokens.: no rule to concatenate .*Tokens; register one",
    ):
        await app.run({}, thread="t")
    register_concat(Tokens, lambda chunks: Tokens([i for c in chunks for i in c.ids]))
    g2 = Graph(S, types=[Tokens])
    g2.add_node("gen", tokens).add_node("show", lambda s: {"text": str(s["tokens"].ids)})
    g2.add_edge(START, "gen").add_edge("gen", "show")
    r = await g2.compile(store=store).run({}, thread="t2")
    assert r.values["text"] == "[1, 2, 3]"
    assert (await g2.compile(store=store).get_state("t2")).values["tokens"] == Tokens([1, 2, 3])


async def test_mixed_chunk_types_are_refused(store: Store) -> None:
    async def mixed(s: S) -> AsyncIterator[Any]:
        yield {"text": "a"}
        yield "b"

    g = Graph(S)
    g.add_node("gen", mixed).add_edge(START, "gen")
    with pytest.raises(InvalidUpdate, match="mix dict and str"):
        await g.compile(store=store).run({}, thread="t")


async def test_streaming_node_can_interrupt_and_rerun(store: Store) -> None:
    runs: list[int] = []

    async def careful(s: S) -> AsyncIterator[dict[str, Any]]:
        runs.append(1)
        yield {"text": "draft "}
        ok = interrupt("send the rest?")
        yield {"text": "sent" if ok else "held"}

    g = Graph(S)
    g.add_node("gen", careful).add_edge(START, "gen")
    app = g.compile(store=store)
    r = await app.run({}, thread="t")
    assert r.status == "interrupted" and "text" not in r.values  # nothing half-written
    r = await app.resume("t", {r.interrupt().id: True})
    assert r.values["text"] == "draft sent" and len(runs) == 2


async def test_message_chunks_join_like_a_streamed_chat_reply(store: Store) -> None:
    from interlock import MessageChunk, ToolCallChunk

    class Chat(TypedDict, total=False):
        reply: MessageChunk

    async def model(s: Chat) -> AsyncIterator[dict[str, Any]]:
        yield {"reply": MessageChunk(role="assistant", content="Let me ")}
        yield {"reply": MessageChunk(content="check.")}
        yield {"reply": MessageChunk(tool_calls=(ToolCallChunk(index=0, id="c1", name="ls"),))}
        yield {"reply": MessageChunk(tool_calls=(ToolCallChunk(index=0, arguments='{"path"'),))}
        yield {"reply": MessageChunk(tool_calls=(ToolCallChunk(index=1, id="c2", name="rm"),))}
        yield {"reply": MessageChunk(tool_calls=(ToolCallChunk(index=0, arguments=': "/"}'),))}

    g = Graph(Chat)
    g.add_node("model", model).add_edge(START, "model")
    app = g.compile(store=store)
    r = await app.run({}, thread="t")
    expected = MessageChunk(
        role="assistant",
        content="Let me check.",
        tool_calls=(
            ToolCallChunk(index=0, id="c1", name="ls", arguments='{"path": "/"}'),
            ToolCallChunk(index=1, id="c2", name="rm"),
        ),
    )
    assert r.values["reply"] == expected
    assert (await app.get_state("t")).values["reply"] == expected  # stored, and read back


# -- the stream's lifecycle: leaving early, errors -------------------------------------------


def waiting_graph(
    entered: anyio.Event, calls: list[str], release: anyio.Event | None = None
) -> Graph[S]:
    """``first → slow → last``: ``slow`` waits (forever the first time, or until ``release``)."""

    async def slow(s: S) -> dict[str, Any]:
        calls.append("slow")
        if release is not None:
            await release.wait()
        elif len(calls) == 1:
            entered.set()
            await anyio.Event().wait()  # only a cancellation ends this
        return {"items": [2]}

    g = Graph(S)
    g.add_node("first", lambda s: {"items": [1]}).add_node("slow", slow)
    g.add_node("last", lambda s: {"items": [3]})
    g.add_edge(START, "first").add_edge("first", "slow").add_edge("slow", "last")
    return g


async def test_leaving_the_stream_early_stops_the_run_cleanly(tmp_path: Path) -> None:
    # Whether ``slow`` has started when the block is left is up to the scheduler; it may
    # only finish once the block is gone.
    entered, calls, release = anyio.Event(), [], anyio.Event()
    g = waiting_graph(entered, calls, release)
    async with SqliteStore(tmp_path / "a.db") as a, SqliteStore(tmp_path / "a.db") as b:
        app = g.compile(store=a)
        seen: list[str] = []
        async with app.stream({}, thread="t") as events:
            async for event in events:
                seen.append(event.kind)
                if isinstance(event, NodeOutputEvent) and event.node == "first":
                    break
        assert seen[-1] == "node"
        # The run stopped at its last commit, let its lease go, and continues elsewhere.
        state = await app.get_state("t")
        assert state.status == "ready" and state.values["items"] == [1]
        release.set()
        done = await g.compile(store=b).resume("t")
        assert done.status == "done" and done.values["items"] == [1, 2, 3]


async def test_leaving_the_stream_while_a_node_runs_cancels_it(tmp_path: Path) -> None:
    entered, calls = anyio.Event(), []
    g = waiting_graph(entered, calls)
    async with SqliteStore(tmp_path / "a.db") as a, SqliteStore(tmp_path / "a.db") as b:
        app = g.compile(store=a)
        async with app.stream({}, thread="t") as events:
            await entered.wait()  # not even reading: the run goes on without its reader
        assert calls == ["slow"]
        assert (await app.get_state("t")).next == ("slow",)
        done = await g.compile(store=b).resume("t")
        assert done.values["items"] == [1, 2, 3] and calls == ["slow", "slow"]
        assert [e.kind async for e in events] == []  # a left stream yields nothing more


async def test_an_error_in_the_body_stops_the_run_and_passes_through(tmp_path: Path) -> None:
    entered, calls = anyio.Event(), []
    g = waiting_graph(entered, calls)
    async with SqliteStore(tmp_path / "a.db") as a:
        app = g.compile(store=a)

        async def fail_while_reading() -> None:
            async with app.stream({}, thread="t"):
                await entered.wait()
                raise KeyError("mine")

        with pytest.raises(KeyError, match="mine"):  # as it is, not in an exception group
            await fail_while_reading()
        assert (await app.get_state("t")).next == ("slow",)


async def test_a_failing_node_raises_what_run_raises(tmp_path: Path) -> None:
    def boom(s: S) -> dict[str, Any]:
        raise ValueError("boom")

    g = Graph(S)
    g.add_node("a", lambda s: {"items": [1]}).add_node("boom", boom)
    g.add_edge(START, "a").add_edge("a", "boom")
    async with SqliteStore(tmp_path / "a.db") as store:
        app = g.compile(store=store)
        with pytest.raises(NodeError, match="boom") as from_run:
            await app.run({}, thread="r")
        seen: list[str] = []

        async def read_all() -> None:
            async with app.stream({}, thread="s") as events:
                async for event in events:
                    seen.append(event.kind)

        with pytest.raises(NodeError, match="boom") as from_stream:
            await read_all()
        assert type(from_stream.value) is type(from_run.value)
        assert "node" in seen  # the events before the failure came
        assert (await app.get_state("s")).status == "failed"


async def test_iterating_without_the_block_is_a_clear_error(store: Store) -> None:
    g = Graph(S)
    g.add_node("a", lambda s: {"items": [1]}).add_edge(START, "a")
    app = g.compile(store=store)
    with pytest.raises(TypeError, match=r"async with app\.stream\(\.\.\.\) as events"):
        async for _ in app.stream({}, thread="t"):  # type: ignore[attr-defined]
            pass
    assert await store.get_thread("t") is None  # nothing ran


async def test_a_cancelled_reader_stops_the_run_and_the_thread_resumes(tmp_path: Path) -> None:
    entered, calls = anyio.Event(), []
    g = waiting_graph(entered, calls)
    async with SqliteStore(tmp_path / "a.db") as a, SqliteStore(tmp_path / "a.db") as b:
        app = g.compile(store=a)
        with anyio.CancelScope() as outer:
            async with app.stream({}, thread="t") as events:
                async for event in events:
                    if event.kind == "step" and event.nodes == ("slow",):  # type: ignore[union-attr]
                        await entered.wait()
                        outer.cancel()  # whoever owns the reader gives up on it
        assert outer.cancelled_caught
        done = await g.compile(store=b).resume("t")
        assert done.values["items"] == [1, 2, 3] and calls == ["slow", "slow"]
