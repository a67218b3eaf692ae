"""Hostile checkpoint bodies, well-encoded but wrong, through the App: typed errors only."""

from __future__ import annotations

import contextlib
import copy
from typing import Annotated, Any, TypedDict

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interlock import START, Graph, InterlockError, MemoryStore, append, interrupt
from interlock.stores import CheckpointRecord


class S(TypedDict, total=False):
    log: Annotated[list[str], append]
    n: int


def build() -> Any:
    g = Graph(S)
    g.add_node("a", lambda s: {"log": ["a"], "n": 1})
    g.add_node("b", lambda s: {"log": [interrupt("b?", key="b")]})
    g.add_edge(START, "a").add_edge("a", "b")
    return g


async def real_body() -> tuple[Any, dict[str, Any]]:
    app = build().compile(store=MemoryStore())
    await app.run({}, thread="t")
    head = await app.store.get_checkpoint("t")
    assert head is not None
    return app, app.plan.codec.decode(head.body)


APP, BODY = anyio.run(real_body)

leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
trees = st.recursive(
    leaves,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            found += paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += paths(v, (*prefix, i))
    return found


ALL_PATHS = paths(BODY)[1:]


@st.composite
def hostile_bodies(draw: st.DrawFn) -> Any:
    if draw(st.booleans()):
        return draw(trees)  # anything at all
    body = copy.deepcopy(BODY)  # a real body with a few parts replaced
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(ALL_PATHS))
        target = body
        try:
            for step in path[:-1]:
                target = target[step]
            target[path[-1]] = draw(trees)
        except (KeyError, IndexError, TypeError):
            continue
    return body


async def load(body: Any) -> None:
    store = MemoryStore()
    app = build().compile(store=store)
    record = CheckpointRecord(
        thread="t",
        id="c1",
        parent_id=None,
        seq=1,
        step=1,
        base_seq=1,
        created_at=1.0,
        source="loop",
        status="interrupted",
        body=app.plan.codec.encode(body),
    )
    await store.append_checkpoint(record, expected_head=None)
    attempts = (
        lambda: app.get_state("t"),
        lambda: app.resume("t", {"b": "x"}),
        lambda: app.history("t"),
    )
    for attempt in attempts:
        with contextlib.suppress(InterlockError):  # typed: what we want
            await attempt()


# Ten thousand bodies take half a minute: the main leg runs them, the other Pythons do not
# need to (the decoder under test is the same code on each).
@pytest.mark.slow
@settings(
    max_examples=10_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
@given(hostile_bodies())
def test_hostile_bodies_give_typed_errors_only(body: Any) -> None:
    anyio.run(load, body)


def test_the_real_body_loads() -> None:
    async def check() -> None:
        store = MemoryStore()
        app = build().compile(store=store)
        await app.run({}, thread="t")
        assert (await app.get_state("t")).values["log"] == ["a"]

    anyio.run(check)
