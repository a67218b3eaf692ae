"""The ``*_sync`` twins: for scripts; inside a running event loop they say to ``await`` instead."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

import pytest

from interlock import (
    START,
    App,
    CheckpointNotFound,
    Graph,
    GraphChanged,
    GraphDefinitionError,
    MemoryStore,
    append,
    approve,
)

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    log: Annotated[list[str], append]
    ok: bool


def build() -> App[S]:
    g = Graph(S)
    g.add_node("gate", lambda s: {"ok": approve("go?")})
    g.add_edge(START, "gate")
    return g.compile(store=MemoryStore())


TWINS: dict[str, Callable[[App[S]], Any]] = {
    "run": lambda app: app.run_sync({}, thread="t"),
    "resume": lambda app: app.resume_sync("t"),
    "get_state": lambda app: app.get_state_sync("t"),
    "history": lambda app: app.history_sync("t"),
    "update_state": lambda app: app.update_state_sync("t", {"log": ["x"]}),
    "fork": lambda app: app.fork_sync("t", None, "t2"),
    "decide": lambda app: app.decide_sync("t", {"x": True}),
    "sweep": lambda app: app.sweep_sync(),
    "inbox": lambda app: app.inbox_sync(),
    "inbox_counts": lambda app: app.inbox_counts_sync(),
    "request_pause": lambda app: app.request_pause_sync("t"),
    "record_failure": lambda app: app.record_failure_sync(
        "t", GraphChanged(thread="t", stored="a", current="b")
    ),
    "question": lambda app: app.question_sync("x"),
    "checkpoint_meta": lambda app: app.checkpoint_meta_sync("t", "c"),
    "continued_by": lambda app: app.continued_by_sync(),
    "threads": lambda app: app.threads_sync(),
}


def test_every_public_coroutine_method_has_a_twin() -> None:
    coroutines = {
        name
        for name, value in vars(App).items()
        if not name.startswith("_") and inspect.iscoroutinefunction(value)
    }
    assert coroutines - {"start", "stream"} <= set(TWINS)  # those two are context managers


@pytest.mark.parametrize("method", list(TWINS))
async def test_sync_twin_inside_a_running_loop_says_to_await(method: str) -> None:
    app = build()
    await app.run({}, thread="t")
    before = await app.history("t")
    with pytest.raises(GraphDefinitionError, match=rf"await app\.{method}\(\.\.\.\)") as caught:
        TWINS[method](app)
    assert f"App.{method}_sync()" in str(caught.value)
    assert "running event loop" in str(caught.value)
    # Nothing was done: the thread still waits at its gate, and no fork was made.
    assert [s.checkpoint_id for s in await app.history("t")] == [s.checkpoint_id for s in before]
    assert len((await app.get_state("t")).interrupts) == 1
    with pytest.raises(CheckpointNotFound):
        await app.get_state("t2")


def test_sync_twins_still_drive_a_thread_from_a_script() -> None:
    app = build()
    first = app.run_sync({}, thread="t")
    assert first.status == "interrupted"
    done = app.resume_sync("t", {first.interrupt().id: True})
    assert done.status == "done" and done.values["ok"] is True
    assert app.get_state_sync("t").values["ok"] is True
    assert len(app.history_sync("t")) >= 2
    assert app.fork_sync("t", None, "t2")
    assert app.update_state_sync("t2", {"log": ["edited"]})
    assert app.get_state_sync("t2").values["log"] == ["edited"]


def test_the_deciding_and_reading_twins_from_a_script() -> None:
    app = build()
    first = app.run_sync({}, thread="t")
    (pending,) = app.inbox_sync()
    assert pending.id == first.interrupt().id and app.inbox_counts_sync() == {None: 1}
    assert app.request_pause_sync("t") is True and app.request_pause_sync("nope") is False
    (decision,) = app.decide_sync("t", {pending.id: True}, actor="ana")
    assert decision.actor == "ana" and app.inbox_sync() == []
    assert app.sweep_sync() == []  # nothing had a deadline
    assert app.resume_sync("t").values["ok"] is True


def test_a_sync_twin_raises_what_the_call_raised_with_nothing_chained_on() -> None:
    app = build()
    with pytest.raises(CheckpointNotFound) as caught:
        app.get_state_sync("missing")
    chain: list[BaseException] = []
    error: BaseException | None = caught.value
    while error is not None:
        chain.append(error)
        error = error.__cause__ or error.__context__
    assert not [e for e in chain if "event loop" in str(e)], chain
