"""A caller's mistake is a TypeError or ValueError (an id: InvalidId) naming the argument;
nothing is stored."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict, get_args

import pytest

from interlock import (
    START,
    App,
    CheckpointNotFound,
    Command,
    Graph,
    InvalidId,
    InvalidUpdate,
    MemoryStore,
    SqliteStore,
    Store,
    append,
    interrupt,
    verify_audit,
)
from interlock._args import DURABILITIES, check_id
from interlock.graph import Durability

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    log: Annotated[list[str], append]
    ok: bool


def build(store: Store) -> App[S]:
    g = Graph(S)
    g.add_node("ask", lambda s: {"ok": interrupt("approve?", key="approval")})
    g.add_node("note", lambda s: {"log": ["noted"]})
    g.add_edge(START, "ask").add_edge("ask", "note")
    return g.compile(store=store)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """The three backends: the poisoned audit chain showed on SQLite and PostgreSQL alike."""
    if request.param == "postgres":
        from interlock.stores import PostgresStore

        s: Store = PostgresStore(request.getfixturevalue("dsn"))
    elif request.param == "sqlite":
        s = SqliteStore(tmp_path / "t.db")
    else:
        s = MemoryStore()
    try:
        yield s
    finally:
        await s.close()


async def paused(app: App[S], thread: str = "t") -> str:
    return (await app.run({}, thread=thread)).interrupt().id


async def untouched(store: Store, before: int) -> None:
    """Nothing was written: the audit log is as long as it was, and its chain holds."""
    report = await verify_audit(store)
    assert report.ok, report.problems
    assert report.entries == before


@pytest.mark.parametrize("actor", [42, 1.5, b"ana", {"name": "ana"}, ["ana"], "", "a\ud800"])
async def test_an_actor_that_is_not_text_is_refused_and_the_audit_chain_holds(
    any_store: Store, actor: Any
) -> None:
    app = build(any_store)
    asked = await paused(app)
    entries = (await verify_audit(any_store)).entries
    error = TypeError if not isinstance(actor, str) else ValueError
    with pytest.raises(error, match=r"^actor "):
        await app.decide("t", {asked: True}, actor=actor)
    with pytest.raises(error, match=r"^actor "):
        await app.resume("t", {asked: True}, actor=actor)
    with pytest.raises(error, match=r"^actor "):
        await app.update_state("t", {"log": ["x"]}, actor=actor)
    await untouched(any_store, entries)
    # The thread is as it was: the same interrupt is still answerable.
    [decision] = await app.decide("t", {asked: True}, actor="ana")
    assert decision.actor == "ana"
    assert (await verify_audit(any_store)).ok


@pytest.mark.parametrize("thread", [7, None, b"t", ["t"], "", "t\ud800", "t\x00", "t" * 513])
async def test_a_thread_id_that_is_not_plain_text_is_refused_by_every_method(
    any_store: Store, thread: Any
) -> None:
    app = build(any_store)
    await paused(app, "real")
    entries = (await verify_audit(any_store)).entries
    error = TypeError if not isinstance(thread, str) else ValueError
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: app.run({}, thread=thread),
        lambda: app.resume(thread, {"approval": True}),
        lambda: app.decide(thread, {"approval": True}),
        lambda: app.get_state(thread),
        lambda: app.history(thread),
        lambda: app.update_state(thread, {"log": ["x"]}),
        lambda: app.fork("real", None, thread),
        lambda: app.fork(thread, None, "copy"),
        lambda: app.request_pause(thread),
    ]
    if thread is not None:  # None means "every thread" for these two
        calls += [lambda: app.inbox(thread=thread), lambda: verify_audit(any_store, thread=thread)]
    for call in calls:
        with pytest.raises(error, match=r"^(new_)?thread "):
            await call()
    await untouched(any_store, entries)
    assert [i.thread for i in await app.inbox()] == ["real"]
    with pytest.raises(CheckpointNotFound):
        await app.get_state("7")


async def test_a_memory_store_with_a_refused_thread_still_verifies(store: Store) -> None:
    # MemoryStore sorted thread ids of mixed types in verify_audit and crashed.
    app = build(store)
    await paused(app, "a")
    with pytest.raises(TypeError, match=r"^thread must be a str, not int"):
        await app.run({}, thread=7)
    report = await verify_audit(store)
    assert report.ok and report.threads == 1


@pytest.mark.parametrize(
    ("filters", "error", "named"),
    [
        ({"thread": "a\ud800"}, ValueError, "thread"),
        ({"key": "k\udfff"}, ValueError, "key"),
        ({"tool": "\ud83d"}, ValueError, "tool"),
        ({"after": "x\ud800"}, ValueError, "after"),
        ({"key": ["approval"]}, TypeError, "key"),
        ({"thread": 7}, TypeError, "thread"),
        ({"tool": {}}, TypeError, "tool"),
        ({"limit": "5"}, TypeError, "limit"),
        ({"limit": 5.0}, TypeError, "limit"),
        ({"limit": True}, TypeError, "limit"),
        ({"limit": 2**70}, ValueError, "limit"),
        ({"limit": -1}, ValueError, "limit"),
        ({"older_than": math.nan}, ValueError, "older_than"),
        ({"older_than": "yesterday"}, TypeError, "older_than"),
        ({"deadline_before": 10**400}, ValueError, "deadline_before"),
        ({"deadline_before": b"1"}, TypeError, "deadline_before"),
    ],
)
async def test_inbox_filters_are_checked(
    any_store: Store, filters: dict[str, Any], error: type[Exception], named: str
) -> None:
    app = build(any_store)
    await paused(app)
    with pytest.raises(error, match=f"^{named} "):
        await app.inbox(**filters)


async def test_inbox_takes_any_real_time_bound(store: Store) -> None:
    # A huge int is a time after everything (SQLite could not bind it); infinities are bounds.
    app = build(store)
    asked = await paused(app)
    assert [i.id for i in await app.inbox(older_than=2**70)] == [asked]
    assert [i.id for i in await app.inbox(older_than=math.inf)] == [asked]
    assert await app.inbox(older_than=-math.inf) == []


@pytest.mark.parametrize(
    ("kwargs", "error", "named"),
    [
        ({"answers": ["approval"]}, TypeError, "answers"),
        ({"answers": None}, TypeError, "answers"),
        ({"answers": {7: True}}, TypeError, "answers key"),
        ({"answers": {"": True}}, ValueError, "answers key"),
        ({"answers": {"a\ud800": True}}, ValueError, "answers key"),
        ({"seen": ["hash"]}, TypeError, "seen"),
        ({"seen": {"approval": 7}}, TypeError, r"seen\['approval'\]"),
        ({"seen": {None: "h"}}, TypeError, "seen key"),
        ({"nonce": 1}, TypeError, "nonce"),
        ({"nonce": ""}, ValueError, "nonce"),
        ({"reason": ["because"]}, TypeError, "reason"),
        ({"reason": "why\udc00"}, ValueError, "reason"),
        ({"reason": "x" * 65_537}, ValueError, "reason"),
    ],
)
async def test_decide_checks_its_arguments_before_recording(
    any_store: Store, kwargs: dict[str, Any], error: type[Exception], named: str
) -> None:
    app = build(any_store)
    await paused(app)
    entries = (await verify_audit(any_store)).entries
    call = {"answers": {"approval": True}} | kwargs
    with pytest.raises(error, match=f"^{named}"):
        await app.decide("t", **call)
    await untouched(any_store, entries)
    assert [i.key for i in await app.inbox()] == ["approval"]


async def test_decide_takes_empty_reasons_and_long_ones(store: Store) -> None:
    app = build(store)
    asked = await paused(app)
    [d] = await app.decide("t", {asked: True}, reason="", actor="ana", nonce="n")
    assert d.reason == ""
    asked = await paused(app, "u")
    [d] = await app.decide("u", {asked: True}, reason="x" * 65_536)
    assert len(d.reason or "") == 65_536


@pytest.mark.parametrize(
    ("targets", "error", "named"),
    [
        ({7: True}, TypeError, "targets key"),
        ({"": True}, ValueError, "targets key"),
        (Command(resume={b"approval": True}), TypeError, "targets key"),
    ],
)
async def test_resume_targets_are_checked(
    store: Store, targets: Any, error: type[Exception], named: str
) -> None:
    app = build(store)
    await paused(app)
    with pytest.raises(error, match=f"^{named}"):
        await app.resume("t", targets)
    assert [i.key for i in await app.inbox()] == ["approval"]


@pytest.mark.parametrize(
    ("call", "error", "named"),
    [
        (lambda app: app.run({}, thread="n", on_pending="drop"), ValueError, "on_pending"),
        (lambda app: app.run({}, thread="n", durability="fast"), ValueError, "durability"),
        (
            lambda app: app.run({}, thread="n", interrupt_before="ask"),
            TypeError,
            "interrupt_before",
        ),
        (lambda app: app.run({}, thread="n", interrupt_after=[1]), TypeError, "interrupt_after"),
        (lambda app: app.run({}, thread="n", metadata=[("a", 1)]), TypeError, "metadata"),
        (lambda app: app.run({}, thread="n", on_interrupt=True), TypeError, "on_interrupt"),
        (lambda app: app.run({}, thread="n", control="pause"), TypeError, "control"),
        (lambda app: app.resume("t", checkpoint_id=5), TypeError, "checkpoint_id"),
        (lambda app: app.get_state("t", "c\ud800"), ValueError, "checkpoint_id"),
        (lambda app: app.history("t", limit="20"), TypeError, "limit"),
        (lambda app: app.history("t", limit=-1), ValueError, "limit"),
        (lambda app: app.history("t", before=["c"]), TypeError, "before"),
        (lambda app: app.update_state("t", {}, as_node=["ask"]), TypeError, "as_node"),
        (lambda app: app.update_state("t", {}, on_pending=None), ValueError, "on_pending"),
        (lambda app: app.fork("t", b"c", "copy"), TypeError, "checkpoint_id"),
        (lambda app: app.request_pause("t", forced="yes"), TypeError, "forced"),
        (lambda app: app.sweep(now=math.nan), ValueError, "now"),
        (lambda app: app.sweep(now=10**400), ValueError, "now"),
        (lambda app: app.sweep(limit=None), TypeError, "limit"),
        (lambda app: verify_audit(app.store, page=0), ValueError, "page"),
    ],
)
async def test_every_entry_point_names_the_argument_it_refuses(
    store: Store, call: Callable[[App[S]], Awaitable[object]], error: type[Exception], named: str
) -> None:
    app = build(store)
    await paused(app)
    entries = (await verify_audit(store)).entries
    with pytest.raises(error, match=f"^{named} "):
        await call(app)
    await untouched(store, entries)
    assert (await app.get_state("t")).interrupts[0].key == "approval"


async def test_payload_hash_wants_an_interrupt(store: Store) -> None:
    app = build(store)
    with pytest.raises(TypeError, match=r"^interrupt must be Interrupt, not str"):
        app.payload_hash("approval")  # type: ignore[arg-type]


async def test_start_and_stream_check_their_arguments_when_called(store: Store) -> None:
    app = build(store)
    with pytest.raises(TypeError, match=r"^thread "):
        app.start({}, thread=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^poll_interval "):
        app.start({}, thread="t", poll_interval=0)
    with pytest.raises(TypeError, match=r"^resume key "):
        app.start(thread="t", resume={1: True})
    with pytest.raises(TypeError, match=r"^modes must be a list of names, not str; write"):
        app.stream({}, thread="t", modes="run")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^thread "):
        app.stream({}, thread="\ud800")
    assert await app.inbox() == []


@pytest.mark.parametrize("values", [True, 5, "log", ["log"], b"x"])
async def test_state_input_that_is_not_a_mapping_is_an_invalid_update(
    store: Store, values: Any
) -> None:
    # A TypedDict state refused the isinstance check with a bare TypeError.
    app = build(store)
    await paused(app)
    with pytest.raises(InvalidUpdate, match="expected a dict of state keys for S, got"):
        await app.run(values, thread="n")
    with pytest.raises(InvalidUpdate, match="expected a dict of state keys for S, got"):
        await app.update_state("t", values)
    assert (await app.get_state("t")).values == {"log": []}
    assert await app.inbox(thread="n") == []


def test_the_durabilities_checked_are_the_graph_s() -> None:
    assert get_args(Durability) == DURABILITIES


UNSAFE = [
    "t\r",
    "t\n",
    "a\r\nBcc: x",
    "\tt",
    "t\x1b[2J",
    "t\x7f",
    "t\x85",
    "t\u2028",
    "inv\u202egpj",
]
"""CR, LF, a header injection, TAB, an escape sequence, DEL, NEL (C1), a line separator and a
right-to-left override: none of them may be written into a new thread's id or an actor's name."""


@pytest.mark.parametrize("name", UNSAFE)
async def test_a_new_thread_id_with_a_control_character_is_refused_with_invalid_id(
    name: str,
) -> None:
    # The check comes before any store is touched: one store shows it.
    memory = MemoryStore()
    app = build(memory)
    await paused(app, "real")
    entries = (await verify_audit(memory)).entries
    refused = r"^(new_)?thread holds the character U\+"
    for call in (lambda: app.run({}, thread=name), lambda: app.fork("real", None, name)):
        with pytest.raises(InvalidId, match=refused) as caught:
            await call()
        assert isinstance(caught.value, ValueError)
        assert caught.value.argument in ("thread", "new_thread")
    # start and stream refuse when called, before their block is entered.
    with pytest.raises(InvalidId, match=refused):
        app.start({}, thread=name)
    with pytest.raises(InvalidId, match=refused):
        app.stream({}, thread=name)
    await untouched(memory, entries)
    assert [i.thread for i in await app.inbox()] == ["real"]


@pytest.mark.parametrize("actor", UNSAFE)
async def test_an_actor_with_a_control_character_is_refused_with_invalid_id(actor: str) -> None:
    # The check comes before any store is touched: one store shows it.
    memory = MemoryStore()
    app = build(memory)
    asked = await paused(app)
    entries = (await verify_audit(memory)).entries
    for call in (
        lambda: app.decide("t", {asked: True}, actor=actor),
        lambda: app.resume("t", {asked: True}, actor=actor),
        lambda: app.update_state("t", {"log": ["x"]}, actor=actor),
    ):
        with pytest.raises(InvalidId, match=r"^actor holds the character U\+"):
            await call()
    await untouched(memory, entries)
    [decision] = await app.decide("t", {asked: True}, actor="ana")
    assert decision.actor == "ana"


async def test_a_thread_stored_before_the_rule_stays_readable_decidable_and_resumable(
    any_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = "legacy\r\nthread"
    app = build(any_store)
    # A thread written by an earlier version, which only refused NUL.
    with monkeypatch.context() as m:
        m.setattr("interlock.runtime._app.check_name", check_id)
        asked = await paused(app, old)
    assert (await app.get_state(old)).status == "interrupted"
    assert [s.step for s in await app.history(old)]
    assert [i.thread for i in await app.inbox(thread=old)] == [old]
    assert (await verify_audit(any_store, thread=old)).ok
    await app.request_pause(old)
    [decision] = await app.decide(old, {asked: True}, actor="ana")
    assert decision.final
    assert (await app.resume(old)).status == "done"
    # New input is a new turn: it goes to a thread with a safe id, e.g. a fork.
    with pytest.raises(InvalidId, match=r"^thread "):
        await app.run({}, thread=old)
    await app.fork(old, None, "legacy-thread")
    assert (await app.get_state("legacy-thread")).values["ok"] is True
