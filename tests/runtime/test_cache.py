"""An App's cached view of a thread is verified by compare-and-set, never trusted blindly."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import pytest

from interlock import START, Graph, InterruptAlreadyResolved, Store, append, interrupt

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    log: Annotated[list[str], append]


def graph() -> Graph[S]:
    g = Graph(S)
    g.add_node("ask", lambda s: {"log": [interrupt("say something", key="say")]})
    g.add_edge(START, "ask")
    return g


async def test_other_app_advancing_the_thread_invalidates_the_cache(store: Store) -> None:
    first, second = graph().compile(store=store), graph().compile(store=store)
    r = await first.run({"log": ["a"]}, thread="t")  # first now caches the thread
    # second resumes it and starts a new turn, which waits on a new interrupt.
    await second.resume("t", {r.interrupt().id: "b"})
    r2 = await second.run({"log": ["c"]}, thread="t")
    # first's cache still shows the old interrupt as pending: it must notice, not act on it.
    with pytest.raises(InterruptAlreadyResolved):
        await first.resume("t", {r.interrupt().id: "stale"})
    done = await first.resume("t", {r2.interrupt().id: "d"})
    assert done.values["log"] == ["a", "b", "c", "d"]


async def test_run_on_an_existing_thread_without_cache_keeps_its_state(store: Store) -> None:
    g = Graph(S)
    g.add_node("echo", lambda s: {"log": [f"seen {len(s['log'])}"]}).add_edge(START, "echo")
    await g.compile(store=store).run({"log": ["one"]}, thread="t")
    fresh = g.compile(store=store)  # no cache: it first assumes a new thread, then finds out
    r = await fresh.run({"log": ["two"]}, thread="t")
    assert r.values["log"] == ["one", "seen 1", "two", "seen 3"]
    records = await store.checkpoint_range("t", lo=1, hi=100)
    assert [c.seq for c in records] == list(range(1, len(records) + 1))


async def test_cached_run_after_foreign_turn_applies_input_to_latest_state(store: Store) -> None:
    g = Graph(S)
    g.add_node("echo", lambda s: {"log": ["echo"]}).add_edge(START, "echo")
    a, b = g.compile(store=store), g.compile(store=store)
    await a.run({"log": ["1"]}, thread="t")
    await b.run({"log": ["2"]}, thread="t")
    r = await a.run({"log": ["3"]}, thread="t")
    assert r.values["log"] == ["1", "echo", "2", "echo", "3", "echo"]
    history: list[Any] = await a.history("t", limit=100)
    assert history[0].values == r.values
