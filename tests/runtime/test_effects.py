"""Side effects: dangerous calls at most once (reconcile, never a silent retry), idempotent keys."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any, TypedDict

import pytest

from interlock import (
    END,
    START,
    App,
    Graph,
    GraphDefinitionError,
    InvalidResume,
    NodeError,
    Store,
    StoreError,
    append,
    approve,
    effect,
    effect_key,
)

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    log: Annotated[list[str], append]
    ok: bool


class Flaky:
    """An outside system that fails (after acting, or not) when told to."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.fail_next = False
        self.keys: list[str] = []

    def send(self, what: str) -> str:
        self.calls[what] += 1
        if self.fail_next:
            self.fail_next = False
            raise ConnectionError("the line dropped before the answer came back")
        return f"receipt:{what}"


def pay_graph(world: Flaky) -> Graph[S]:
    g = Graph(S)
    g.add_node("approve", lambda s: {"ok": approve("pay ¥5000?")})

    def pay(s: S) -> dict[str, Any]:
        return {"log": [world.send("pay")]}

    g.add_node("pay", pay, dangerous=True)
    g.add_edge(START, "approve")
    g.add_conditional_edges("approve", lambda s: "pay" if s["ok"] else END)
    return g


async def test_dangerous_node_runs_once_and_records_its_result(store: Store) -> None:
    world = Flaky()
    app = pay_graph(world).compile(store=store)
    r = await app.run({}, thread="t")
    done = await app.resume("t", {r.interrupt().id: True})
    assert done.status == "done" and done.values["log"] == ["receipt:pay"]
    assert world.calls["pay"] == 1
    log = await store.audit_log(thread="t")
    assert [e.kind for e in log] == ["interrupt", "decision", "effect_started", "effect_done"]


async def test_a_started_effect_becomes_a_reconcile_interrupt_not_a_retry(store: Store) -> None:
    world = Flaky()
    app = pay_graph(world).compile(store=store)
    r = await app.run({}, thread="t")
    world.fail_next = True
    with pytest.raises(NodeError):
        await app.resume("t", {r.interrupt().id: True})
    assert world.calls["pay"] == 1
    # Continuing the failed thread does not call again: a person must say what happened.
    r = await app.resume("t")
    assert r.status == "interrupted" and world.calls["pay"] == 1
    (question,) = r.interrupts
    assert question.kind == "reconcile"
    assert question.info["effect"] == "pay" and question.info["attempt"] == 1
    (row,) = await app.inbox(thread="t")
    assert row.kind == "reconcile"
    with pytest.raises(InvalidResume):
        await app.resume("t", {question.id: "maybe"})
    # "It went through; here is what it returned": no second call, the thread goes on.
    done = await app.resume("t", {question.id: {"result": {"log": ["receipt:checked"]}}})
    assert done.status == "done" and done.values["log"] == ["receipt:checked"]
    assert world.calls["pay"] == 1
    kinds = [e.kind for e in await store.audit_log(thread="t")]
    assert kinds[-3:] == ["interrupt", "decision", "effect_reconciled"]


def _paying(store: Store, world: Flaky, info: Any) -> App[Any]:
    """A one-node graph that pays through ``world`` with ``reconcile_info=info``."""

    async def pay(s: S) -> dict[str, Any]:
        return {"log": [await effect("pay", world.send, "pay", reconcile_info=info)]}

    g = Graph(S)
    g.add_node("pay", pay)
    g.add_edge(START, "pay")
    return g.compile(store=store)


async def test_a_reconcile_question_shows_what_its_caller_says_of_the_call(store: Store) -> None:
    world = Flaky()
    about = {"account": "ACME-7", "amount": 5000, "type": "not mine to set", "attempt": 99}
    app = _paying(store, world, about)
    world.fail_next = True
    with pytest.raises(NodeError):
        await app.run({}, thread="t")
    question = (await app.resume("t")).interrupt()
    info = question.info
    assert (info["account"], info["amount"]) == ("ACME-7", 5000)
    # What every reconcile question holds is the runtime's to say.
    assert (info["type"], info["effect"], info["attempt"]) == ("reconcile", "pay", 1)
    assert info["question"].startswith("'pay' was started (attempt 1)")
    other = _paying(store, world, {**about, "question": "Did ACME-7 get its 5000?"})
    world.fail_next = True
    with pytest.raises(NodeError):
        await other.run({}, thread="u")
    assert (await other.resume("u")).interrupt().info["question"] == "Did ACME-7 get its 5000?"


async def test_reconcile_info_must_be_a_mapping(store: Store) -> None:
    with pytest.raises(NodeError) as err:
        await _paying(store, Flaky(), ["ACME-7"]).run({}, thread="t")
    assert isinstance(err.value.__cause__, TypeError)
    assert "reconcile_info must be a mapping" in str(err.value.__cause__)


async def test_reconcile_retry_calls_again_exactly_once(store: Store) -> None:
    world = Flaky()
    app = pay_graph(world).compile(store=store)
    r = await app.run({}, thread="t")
    world.fail_next = True
    with pytest.raises(NodeError):
        await app.resume("t", {r.interrupt().id: True})
    question = (await app.resume("t")).interrupt()
    done = await app.resume("t", {question.id: "retry"})
    assert done.status == "done" and world.calls["pay"] == 2
    record = await store.get_effect("t", next(iter(await _effect_keys(store, "t"))))
    assert record is not None and record.attempt == 2 and record.status == "done"


async def _effect_keys(store: Store, thread: str) -> list[str]:
    import json

    return [
        json.loads(e.data)["effect"]
        for e in await store.audit_log(thread=thread)
        if e.kind.startswith("effect")
    ]


async def test_effect_inside_a_node_is_not_repeated_when_the_node_re_runs(store: Store) -> None:
    world = Flaky()
    g = Graph(S)

    async def node(s: S) -> dict[str, Any]:
        receipt = await effect("send", world.send, "mail")
        ok = approve(f"mail went out ({receipt}); also close the ticket?")
        return {"log": [receipt, f"closed={ok}"]}

    g.add_node("work", node)
    g.add_edge(START, "work")
    app = g.compile(store=store)
    r = await app.run({}, thread="t")
    assert world.calls["mail"] == 1
    done = await app.resume("t", {r.interrupt().id: True})
    assert done.values["log"] == ["receipt:mail", "closed=True"]
    assert world.calls["mail"] == 1


async def test_loop_passes_are_different_effects(store: Store) -> None:
    world = Flaky()

    class L(TypedDict, total=False):
        n: int

    g = Graph(L)

    async def tick(s: L) -> dict[str, Any]:
        await effect("send", world.send, "tick")
        return {"n": s.get("n", 0) + 1}

    g.add_node("tick", tick)
    g.add_edge(START, "tick")
    g.add_conditional_edges("tick", lambda s: END if s["n"] >= 3 else "tick")
    await g.compile(store=store).run({}, thread="t")
    assert world.calls["tick"] == 3


async def test_idempotent_effect_reruns_with_the_same_key(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys: list[str] = []
    g = Graph(S)

    def charge(amount: int, *, effect_key: str) -> str:
        keys.append(effect_key)
        return f"charged {amount}"

    async def node(s: S) -> dict[str, Any]:
        out = await effect("charge", charge, 5, idempotent=True)
        return {"log": [out, effect_key()]}

    g.add_node("bill", node)
    g.add_edge(START, "bill")
    app = g.compile(store=store)
    # The commit after the call is lost (the disk failed): the task's work is not recorded.
    real = store.append_checkpoint
    calls = Counter[str]()

    async def lose_the_second(*args: Any, **kwargs: Any) -> int | None:
        calls["append"] += 1
        if calls["append"] == 2:
            raise StoreError("disk full")
        return await real(*args, **kwargs)

    monkeypatch.setattr(store, "append_checkpoint", lose_the_second)
    with pytest.raises(StoreError):
        await app.run({}, thread="t")
    done = await app.resume("t")
    assert len(keys) == 2 and keys[0] == keys[1] and keys[0].startswith("t/")
    assert done.values["log"][0] == "charged 5"
    assert await store.audit_log(thread="t") == []  # idempotent calls write nothing up front


def test_a_streaming_node_cannot_be_dangerous() -> None:
    g = Graph(S)

    async def streams(s: S) -> Any:
        yield "a"

    with pytest.raises(GraphDefinitionError, match="streams"):
        g.add_node("y", streams, dangerous=True)


async def test_effect_outside_a_node_is_explained() -> None:
    with pytest.raises(GraphDefinitionError, match="while a node"):
        await effect("x", print)


async def test_a_retry_answer_covers_one_attempt_only(store: Store) -> None:
    world = Flaky()
    fails = [2]

    def pay(s: S) -> dict[str, Any]:
        world.calls["pay"] += 1
        if fails[0] > 0:
            fails[0] -= 1
            raise ConnectionError("no answer from the bank")
        return {"log": ["paid"]}

    g = Graph(S)
    g.add_node("pay", pay, dangerous=True)
    g.add_edge(START, "pay")
    app = g.compile(store=store)
    with pytest.raises(NodeError):
        await app.run({}, thread="t")
    first = (await app.resume("t")).interrupt()
    with pytest.raises(NodeError):
        await app.resume("t", {first.id: "retry"})  # the retried call fails too
    assert world.calls["pay"] == 2
    # The answer was for attempt 1; attempt 2 is a new question, not a silent third call.
    second = (await app.resume("t")).interrupt()
    assert world.calls["pay"] == 2
    assert second.kind == "reconcile" and second.id != first.id and second.info["attempt"] == 2
    done = await app.resume("t", {second.id: "retry"})
    assert done.values["log"] == ["paid"] and world.calls["pay"] == 3


async def test_a_reconciled_effect_survives_a_lost_step_commit(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = Flaky()
    app = pay_graph(world).compile(store=store)
    r = await app.run({}, thread="t")
    world.fail_next = True
    with pytest.raises(NodeError):
        await app.resume("t", {r.interrupt().id: True})
    question = (await app.resume("t")).interrupt()
    real = store.append_checkpoint
    calls = Counter[str]()

    async def lose_the_step(*args: Any, **kwargs: Any) -> int | None:
        calls["append"] += 1
        if calls["append"] == 2:  # the decision commits, the step after it is lost
            raise StoreError("the process died")
        return await real(*args, **kwargs)

    monkeypatch.setattr(store, "append_checkpoint", lose_the_step)
    with pytest.raises(StoreError):
        await app.resume("t", {question.id: {"result": {"log": ["paid, says the bank"]}}})
    monkeypatch.undo()
    done = await app.resume("t")
    assert done.status == "done" and done.values["log"] == ["paid, says the bank"]
    assert world.calls["pay"] == 1


def test_ids_drawn_in_a_forked_child_differ_from_the_parent_s() -> None:
    import multiprocessing

    from interlock.runtime._level import new_id

    ctx = multiprocessing.get_context("fork")
    parent_end, child_end = ctx.Pipe()
    child = ctx.Process(target=lambda: child_end.send(new_id()))
    child.start()
    theirs = parent_end.recv()
    child.join()
    ours = new_id()
    assert theirs[:12] != ours[:12]
