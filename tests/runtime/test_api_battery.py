"""The public API called with arbitrary arguments: typed errors only, and the store stays usable.

Each example builds a few real threads (one waiting, one decided, one finished), then makes a
handful of calls whose arguments are drawn from odd values (None, bools, huge ints, NaN,
bytes, containers, empty, huge or lone-surrogate strings, unserialisable objects) with the real
thread, interrupt and checkpoint ids mixed in. Every call must return, or raise an
`InterlockError`, or a plain `TypeError`/`ValueError` that names one of its arguments. Then a
normal run, decision and resume must still work and the audit chain must verify.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interlock import (
    START,
    App,
    Command,
    Graph,
    InterlockError,
    MemoryStore,
    Send,
    SqliteStore,
    Store,
    append,
    interrupt,
    verify_audit,
)


class S(TypedDict, total=False):
    log: Annotated[list[str], append]
    ok: bool


def build(store: Store) -> App[S]:
    g = Graph(S)
    g.add_node(
        "ask",
        lambda s: {
            "ok": interrupt("approve?", key="approval", schema={"type": "boolean"}, deadline=3600)
        },
    )
    g.add_node("act", lambda s: {"log": ["acted" if s.get("ok") else "skipped"]}, dangerous=True)
    g.add_node("note", lambda s: {"log": [str(interrupt("note?", key="note"))]})
    g.add_edge(START, "ask").add_edge("ask", "act").add_edge("act", "note")
    return g.compile(store=store)


# -- values ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Real:
    """Stands for a real id of this example's threads, picked when the call is made."""

    kind: str
    pick: int


def real(kind: str) -> st.SearchStrategy[Real]:
    return st.builds(Real, st.just(kind), st.integers(0, 2**16))


surrogates = st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1)
odd_text = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["", " ", "x" * 600, "y" * 70_000, "a\x00b", "approval", "note", "*"]),
    st.tuples(st.text(max_size=3), surrogates).map("".join),
)
hashable = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.sampled_from([2**70, -(2**70), 10**400]),
    st.floats(),  # with NaN and the infinities
    st.binary(max_size=4),
    odd_text,
)
junk = st.one_of(
    hashable,
    st.lists(st.integers(0, 3) | st.text(max_size=3), max_size=3),
    st.dictionaries(
        st.text(max_size=3) | st.integers(0, 3), hashable | st.builds(object), max_size=3
    ),
    st.builds(object),  # not serialisable
)


def arg(kind: str | None = None, *valid: Any) -> st.SearchStrategy[Any]:
    """A real id of ``kind`` or one of the ``valid`` values (about 2 in 3), else junk."""
    options: list[st.SearchStrategy[Any]] = []
    if kind is not None:
        options.append(real(kind))
    if valid:
        options.append(st.sampled_from(valid))
    if not options:
        return junk
    return mostly(st.one_of(options), junk)


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``good`` two times in three, else ``bad``.

    Not ``one_of``: it would draw the few good values about as rarely as any one of the many
    kinds of junk, since the engine looks for values it has not tried yet.
    """
    return st.integers(0, 2).flatmap(lambda i: bad if i == 0 else good)


ids = mostly(real("interrupt") | real("key"), hashable)
answers = mostly(st.dictionaries(ids, arg(None, True, False, "fine"), max_size=3), junk)
targets = st.one_of(
    st.none(),
    answers,
    st.builds(
        Command,
        resume=arg(None, True) | answers,
        update=st.none() | junk | st.fixed_dictionaries({}, optional={"log": junk, "ok": junk}),
        goto=st.just(()) | arg(None, "act", "note") | st.builds(Send, arg(None, "act"), junk),
    ),
)
state_input = st.one_of(
    st.fixed_dictionaries({}, optional={"log": arg(None, ["x"]), "ok": junk, "nope": junk}),
    junk,
)
names = st.one_of(junk, st.lists(arg(None, "ask", "note", "*", "act"), max_size=2))
thread = arg("thread")
checkpoint = arg("checkpoint", None)
limit = arg(None, 0, 1, 5)
time_bound = arg(None, 0.0, 1e12)


def call(method: str, required: dict[str, Any], **optional: Any) -> st.SearchStrategy[Any]:
    return st.tuples(
        st.just(method),
        st.fixed_dictionaries(
            {k: v for k, v in required.items()},
            optional={k: v for k, v in optional.items()},
        ),
    )


calls = st.one_of(
    call(
        "run",
        {"input": state_input, "thread": thread},
        on_pending=arg(None, "raise", "cancel"),
        interrupt_before=names,
        interrupt_after=names,
        durability=arg(None, "sync", "exit"),
        metadata=junk,
        on_interrupt=hashable,
    ),
    call(
        "resume",
        {"thread": thread, "targets": targets},
        checkpoint_id=checkpoint,
        actor=arg(None, "ana"),
        reason=arg(None, "because"),
        durability=arg(None, "exit"),
        interrupt_after=names,
    ),
    call(
        "decide",
        {"thread": thread, "answers": answers},
        actor=arg(None, "ana"),
        reason=arg(None, ""),
        nonce=arg(None, "n1"),
        seen=st.one_of(junk, st.dictionaries(ids, arg(None, "0" * 32), max_size=2)),
    ),
    call(
        "inbox",
        {},
        thread=thread,
        key=arg(None, "approval", "note"),
        tool=arg(None, "act"),
        older_than=time_bound,
        limit=limit,
        after=arg("interrupt"),
        deadline_before=time_bound,
    ),
    call(
        "inbox_counts",
        {},
        thread=thread,
        key=arg(None, "approval", "note"),
        tool=arg(None, "act"),
        older_than=time_bound,
        deadline_before=time_bound,
    ),
    call("get_state", {"thread": thread}, checkpoint_id=checkpoint),
    call("history", {"thread": thread}, limit=limit, before=checkpoint),
    call(
        "update_state",
        {"thread": thread, "values": state_input},
        as_node=arg(None, "ask", "act", "note"),
        on_pending=arg(None, "raise", "cancel"),
        actor=arg(None, "bob"),
    ),
    call(
        "fork",
        {"thread": thread, "checkpoint_id": checkpoint, "new_thread": arg("thread", "copy")},
    ),
    call("request_pause", {"thread": thread}, forced=arg(None, True, False)),
    call("sweep", {}, now=time_bound, limit=limit),
    call(
        "stream",
        {"thread": thread},
        input=state_input,
        resume=st.booleans() | targets,
        modes=st.one_of(junk, st.lists(arg(None, "run", "steps", "interrupts"), max_size=2)),
    ),
    call("payload_hash", {"interrupt": arg("interrupt_record")}),
)


# -- the scenario ---------------------------------------------------------------------------

_examples = itertools.count()


def resolve(value: Any, reals: Mapping[str, list[Any]]) -> Any:
    """Replace every `Real` in a drawn value by a real id of this example."""
    if isinstance(value, Real):
        found = reals[value.kind]
        return found[value.pick % len(found)]
    if isinstance(value, dict):
        return {resolve(k, reals): resolve(v, reals) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, reals) for v in value]
    if isinstance(value, Command):
        return Command(
            resume=resolve(value.resume, reals),
            update=resolve(value.update, reals),
            goto=resolve(value.goto, reals),
        )
    if isinstance(value, Send):
        return Send(resolve(value.node, reals), resolve(value.arg, reals))
    return value


def check_refusal(exc: Exception, method: str, kwargs: Mapping[str, Any]) -> None:
    """Fail unless ``exc`` is an InterlockError or a plain caller error naming an argument."""
    if isinstance(exc, InterlockError):
        return
    if type(exc) in (TypeError, ValueError):
        named = [k for k in kwargs if re.search(rf"\b{k}\b", str(exc))]
        if named:
            return
    raise AssertionError(
        f"{method}({', '.join(kwargs)}) raised {type(exc).__name__}: {exc}"
    ) from exc


async def attempt(app: App[S], method: str, kwargs: dict[str, Any]) -> None:
    try:
        if method == "stream":
            async with app.stream(**kwargs) as events:
                async for _ in events:
                    pass
        elif method == "payload_hash":
            app.payload_hash(**kwargs)
        else:
            await getattr(app, method)(**kwargs)
    except Exception as exc:
        check_refusal(exc, method, kwargs)


async def seed(app: App[S], n: int) -> dict[str, list[Any]]:
    """Three real threads of this example: waiting, decided (not continued), finished."""
    waiting, decided, finished = (f"{n}-waiting", f"{n}-decided", f"{n}-finished")
    asked = (await app.run({}, thread=waiting)).interrupt()
    other = (await app.run({}, thread=decided)).interrupt()
    await app.decide(decided, {other.id: True}, actor="ana")
    await app.run({}, thread=finished)
    await app.resume(finished, {"approval": False})
    await app.resume(finished, {"note": "done"})
    checkpoints = [s.checkpoint_id for t in (waiting, finished) for s in await app.history(t)]
    return {
        "thread": [waiting, decided, finished],
        "interrupt": [asked.id, other.id],
        "interrupt_record": [asked, other],
        "key": ["approval", "note"],
        "checkpoint": checkpoints,
    }


async def still_usable(app: App[S], n: int) -> None:
    """A normal run, decision and resume work, and the whole audit log verifies."""
    thread = f"{n}-after"
    asked = (await app.run({}, thread=thread)).interrupt()
    assert asked.key == "approval"
    [decision] = await app.decide(thread, {asked.id: True}, actor="ana", nonce=f"n{n}")
    assert decision.answer is True
    noted = (await app.resume(thread)).interrupt()
    assert noted.key == "note"
    done = await app.resume(thread, {"note": "fine"})
    assert done.status == "done" and done.values["log"] == ["acted", "fine"]
    report = await verify_audit(app.store)
    assert report.ok, report.problems


async def scenario(store: Store, drawn: list[tuple[str, dict[str, Any]]]) -> None:
    n = next(_examples)
    async with store:
        app = build(store)
        reals = await seed(app, n)
        for method, kwargs in drawn:
            await attempt(app, method, resolve(kwargs, reals))
        await still_usable(app, n)


BATTERY = settings(
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,  # one database for all examples, on purpose
    ],
)


@pytest.mark.slow  # hundreds of drawn call sequences: the main leg runs them
@settings(BATTERY, max_examples=500)
@given(drawn=st.lists(calls, min_size=1, max_size=6))
def test_memory_store(drawn: list[tuple[str, dict[str, Any]]]) -> None:
    anyio.run(scenario, MemoryStore(), drawn)


@pytest.mark.slow  # hundreds of drawn call sequences: the main leg runs them
@settings(BATTERY, max_examples=200)
@given(drawn=st.lists(calls, min_size=1, max_size=6))
def test_sqlite_store(tmp_path: Path, drawn: list[tuple[str, dict[str, Any]]]) -> None:
    anyio.run(scenario, SqliteStore(tmp_path / "battery.db"), drawn)


@pytest.mark.slow  # hundreds of drawn call sequences: the main leg runs them
@settings(BATTERY, max_examples=80)
@given(drawn=st.lists(calls, min_size=1, max_size=6))
def test_postgres_store(dsn: str, drawn: list[tuple[str, dict[str, Any]]]) -> None:
    from interlock.stores import PostgresStore

    anyio.run(scenario, PostgresStore(dsn), drawn)


@pytest.mark.parametrize("drawn", [[("run", {"input": {}, "thread": "x"})]])
def test_the_scenario_checks_what_it_claims(
    tmp_path: Path, drawn: list[tuple[str, dict[str, Any]]]
) -> None:
    # The scenario fails on an untyped error, and on an error that names no argument.
    with pytest.raises(AssertionError, match="raised KeyError"):
        check_refusal(KeyError("x"), "run", {"thread": 1})
    with pytest.raises(AssertionError, match="raised TypeError: unhashable"):
        check_refusal(TypeError("unhashable type: 'list'"), "run", {"thread": []})
    check_refusal(TypeError("thread must be a str, not list"), "run", {"thread": []})
    anyio.run(scenario, SqliteStore(tmp_path / "t.db"), drawn)
