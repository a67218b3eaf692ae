"""Interrupts and exact resume: what re-runs, what never does, and every refusal."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Annotated, Any, TypedDict

import pytest

from interlock import (
    END,
    START,
    Child,
    Command,
    Graph,
    InterruptAlreadyResolved,
    InvalidResume,
    Segment,
    Send,
    Store,
    UnknownInterrupt,
    UnregisteredType,
    append,
    approve,
    ask,
    child_scope,
    choose,
    composite_interrupt,
    gather_children,
    interrupt,
    interrupt_state,
    resume_context,
    step,
    validator,
)
from interlock.runtime._signals import InterruptSignal

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    log: Annotated[list[str], append]
    answer: Any
    amount: int


def approval_graph(entries: Counter[str]) -> Graph[S]:
    """agent -> approve (interrupt) -> execute."""
    g = Graph(S)

    def agent(s: S) -> dict[str, Any]:
        entries["agent"] += 1
        return {"log": ["agent"]}

    def gate(s: S) -> dict[str, Any]:
        entries["approve"] += 1
        ok = approve(f"pay {s.get('amount', 0)}?", key="pay")
        return {"answer": ok, "log": ["approved" if ok else "rejected"]}

    def execute(s: S) -> dict[str, Any]:
        entries["execute"] += 1
        return {"log": ["executed"]}

    g.add_node("agent", agent).add_node("approve", gate).add_node("execute", execute)
    g.add_edge(START, "agent").add_edge("agent", "approve")
    g.add_conditional_edges("approve", lambda s: "execute" if s["answer"] else END)
    return g


async def test_interrupt_stops_and_resume_continues_exactly(store: Store) -> None:
    entries: Counter[str] = Counter()
    app = approval_graph(entries).compile(store=store)
    r = await app.run({"amount": 5000}, thread="t")
    assert r.status == "interrupted"
    (i,) = r.interrupts
    assert i.key == "pay" and i.kind == "dynamic"
    assert i.info["question"] == "pay 5000?"
    assert str(i.address) == "node:approve"
    assert entries == Counter(agent=1, approve=1)
    # The checkpoint is committed before the interrupt is reported.
    state = await app.get_state("t")
    assert state.status == "interrupted" and [x.id for x in state.interrupts] == [i.id]
    assert (await store.get_interrupt(i.id)) is not None

    done = await app.resume("t", {i.id: True})
    assert done.status == "done"
    assert done.values["log"] == ["agent", "approved", "executed"]
    # agent never re-ran; approve re-ran from its top once; execute ran exactly once.
    assert entries == Counter(agent=1, approve=2, execute=1)


async def test_resume_by_key_and_reject_path(store: Store) -> None:
    entries: Counter[str] = Counter()
    app = approval_graph(entries).compile(store=store)
    await app.run({}, thread="t")
    r = await app.resume("t", {"pay": "reject"})
    assert r.values["log"] == ["agent", "rejected"]
    assert entries["execute"] == 0


async def test_refusals_change_nothing(store: Store) -> None:
    entries: Counter[str] = Counter()
    app = approval_graph(entries).compile(store=store)
    r = await app.run({}, thread="t")
    iid = r.interrupt().id
    before = await store.get_checkpoint("t")
    with pytest.raises(UnknownInterrupt, match="no pending interrupt with id or key 'nope'"):
        await app.resume("t", {"nope": True})
    with pytest.raises(InvalidResume, match="42 is not of type 'boolean'"):
        await app.resume("t", {iid: 42})
    with pytest.raises(InvalidResume, match="need an answer"):
        await app.resume("t")  # nothing targeted, but the thread needs an answer
    assert await store.get_checkpoint("t") == before
    assert entries == Counter(agent=1, approve=1)
    await app.resume("t", {iid: True})
    with pytest.raises(InterruptAlreadyResolved) as info:
        await app.resume("t", {iid: False})
    assert info.value.status == "resolved"
    assert entries["execute"] == 1


async def test_command_resume_none_is_targeted_without_data(store: Store) -> None:
    seen: list[Any] = []
    g = Graph(S)

    def node(s: S) -> dict[str, Any]:
        value = interrupt("anything?")
        seen.append((value, resume_context()))
        return {"answer": value}

    g.add_node("n", node).add_edge(START, "n")
    app = g.compile(store=store)
    await app.run({}, thread="t")
    r = await app.resume("t", Command(resume=None))
    assert r.status == "done" and r.values["answer"] is None
    assert seen == [(None, (True, False, None))]


async def test_interrupts_in_a_loop_get_new_ids_and_never_replay(store: Store) -> None:
    g = Graph(S)

    def ask_again(s: S) -> dict[str, Any]:
        got = interrupt({"round": len(s.get("log", []))})
        return {"log": [got]}

    g.add_node("ask", ask_again).add_edge(START, "ask")
    g.add_conditional_edges("ask", lambda s: "ask" if len(s["log"]) < 3 else END)
    app = g.compile(store=store)
    r = await app.run({}, thread="t")
    ids = []
    for word in ("a", "b", "c"):
        (i,) = r.interrupts
        ids.append(i.id)
        assert i.info == {"round": len(ids) - 1}
        r = await app.resume("t", {i.id: word})
    assert r.status == "done" and r.values["log"] == ["a", "b", "c"]
    assert len(set(ids)) == 3


async def test_several_interrupts_in_one_node_match_by_order_and_key(store: Store) -> None:
    entries: Counter[str] = Counter()
    g = Graph(S)

    def form(s: S) -> dict[str, Any]:
        entries["form"] += 1
        name = ask("name?")
        color = choose("color?", ["red", "blue"], key="color")
        age = interrupt("age?", schema=int)
        return {"answer": (name, color, age)}

    g.add_node("form", form).add_edge(START, "form")
    app = g.compile(store=store)
    r = await app.run({}, thread="t")
    r = await app.resume("t", {r.interrupt().id: "Ada"})
    with pytest.raises(InvalidResume, match=r"'green' is not one of \['red', 'blue'\]"):
        await app.resume("t", {"color": "green"})
    r = await app.resume("t", {"color": "blue"})
    r = await app.resume("t", Command(resume=36))
    assert r.values["answer"] == ("Ada", "blue", 36)
    assert entries["form"] == 4


async def test_validators_and_defaults(store: Store) -> None:
    @validator
    def positive(v: Any) -> None:
        if v <= 0:
            raise ValueError("must be positive")

    g = Graph(S)
    g.add_node("n", lambda s: {"amount": interrupt("how much?", validator=positive)})
    g.add_node("m", lambda s: {"answer": approve("sure?", default=False)})
    g.add_edge(START, "n").add_edge("n", "m")
    app = g.compile(store=store)
    r = await app.run({}, thread="t")
    with pytest.raises(InvalidResume, match="refused by its validator: must be positive"):
        await app.resume("t", {r.interrupt().id: -5})
    r = await app.resume("t", {r.interrupt().id: 12})
    r = await app.resume("t", Command(resume=None))  # the default applies
    assert r.values == {"log": [], "amount": 12, "answer": False}


async def test_interrupt_state_and_resume_context(store: Store) -> None:
    seen: list[Any] = []
    g = Graph(S)

    def batch(s: S) -> dict[str, Any]:
        was, progress = interrupt_state()
        start = progress["next"] if was else 0
        seen.append((was, start, resume_context()))
        reviewed = []
        for i in range(start, 5):
            if i in (1, 3):
                reviewed.append(interrupt({"review": i}, key=f"review{i}", state={"next": i}))
        return {"log": reviewed}

    g.add_node("batch", batch).add_edge(START, "batch")
    app = g.compile(store=store)
    r = await app.run({}, thread="t")
    assert r.interrupt().info == {"review": 1}
    r = await app.resume("t", {r.interrupt().id: "ok"})
    assert r.interrupt().info == {"review": 3}
    r = await app.resume("t", {"review3": "fine"})
    assert r.status == "done" and r.values["log"] == ["fine"]
    assert [(w, s) for w, s, _ in seen] == [(False, 0), (True, 1), (True, 3)]
    assert seen[1][2] == (True, True, "ok")


async def test_durable_steps_run_once_across_resumes(store: Store) -> None:
    calls: Counter[str] = Counter()

    async def llm(prompt: str) -> str:
        calls[prompt] += 1
        return f"plan for {prompt}"

    g = Graph(S)

    async def node(s: S) -> dict[str, Any]:
        plan = await step("llm", llm, "refund")
        other = await step("llm", llm, "second")  # same name, told apart by order
        ok = approve(plan)
        return {"log": [plan, other, str(ok)]}

    g.add_node("n", node).add_edge(START, "n")
    app = g.compile(store=store)
    r = await app.run({}, thread="t")
    assert r.interrupt().info["question"] == "plan for refund"
    r = await app.resume("t", {r.interrupt().id: True})
    assert r.values["log"] == ["plan for refund", "plan for second", "True"]
    assert calls == Counter(refund=1, second=1)


async def test_parallel_interrupts_partial_resume_reenters_only_targets(store: Store) -> None:
    entries: Counter[str] = Counter()
    g = Graph(S)

    def fan(s: S) -> list[Send]:
        return [Send("worker", i) for i in range(4)]

    def worker(i: int) -> dict[str, Any]:
        entries[f"w{i}"] += 1
        if i % 2 == 0:
            entries[f"finished-early{i}"] += 1
            return {"log": [f"w{i}"]}
        ok = approve(f"item {i}?", key=f"item{i}")
        return {"log": [f"w{i}:{ok}"]}

    def left(s: S) -> dict[str, Any]:
        entries["left"] += 1
        return {"answer": interrupt("left?", key="left")}

    g.add_node("start", lambda s: {"log": ["start"]})
    g.add_node("worker", worker).add_node("left", left).add_node(
        "join", lambda s: {"log": ["join"]}
    )
    g.add_edge(START, "start").add_edge("start", "left")
    g.add_conditional_edges("start", fan)
    g.add_edge("worker", "join").add_edge("left", "join")
    app = g.compile(store=store)
    r = await app.run({}, thread="t")
    assert r.status == "interrupted"
    assert sorted(i.key for i in r.interrupts) == ["item1", "item3", "left"]
    assert len({i.id for i in r.interrupts}) == 3
    ids = {i.key: i.id for i in r.interrupts}

    r = await app.resume("t", {"item1": True})
    assert sorted(i.key for i in r.interrupts) == ["item3", "left"]
    assert {i.key: i.id for i in r.interrupts} == {"item3": ids["item3"], "left": ids["left"]}
    # Only item1's task re-ran; finished siblings (w0, w2) and waiting ones did not.
    assert entries == Counter(
        w0=1, w2=1, **{"finished-early0": 1, "finished-early2": 1}, w1=2, w3=1, left=1
    )

    r = await app.resume("t", {ids["item3"]: False, ids["left"]: "L"})
    assert r.status == "done"
    assert r.values["log"] == ["start", "w0", "w1:True", "w2", "w3:False", "join"]
    assert r.values["answer"] == "L"
    assert entries["w3"] == 2 and entries["left"] == 2 and entries["w0"] == 1


async def test_gather_children_reports_all_and_reruns_only_answered(store: Store) -> None:
    runs: Counter[str] = Counter()
    g = Graph(S)

    async def tools(s: S) -> dict[str, Any]:
        def call(name: str, gated: bool) -> Any:
            def run() -> str:
                runs[name] += 1
                if gated and not approve(f"run {name}?"):
                    return f"{name}:denied"
                return f"{name}:ok"

            return run

        children = [
            Child(Segment("tool", "ls", "c1"), call("ls", False)),
            Child(Segment("tool", "rm", "c2"), call("rm", True)),
            Child(Segment("tool", "mail", "c3"), call("mail", True)),
        ]
        results = await gather_children(children, info="tools need approval")
        return {"log": results}

    g.add_node("tools", tools).add_edge(START, "tools")
    app = g.compile(store=store)
    r = await app.run({}, thread="t")
    assert [str(i.address) for i in r.interrupts] == [
        "node:tools/tool:rm:c2",
        "node:tools/tool:mail:c3",
    ]
    rm, mail = r.interrupts
    r = await app.resume("t", {mail.id: False})
    assert [i.id for i in r.interrupts] == [rm.id]  # same id, still pending
    assert runs == Counter(ls=1, rm=1, mail=2)  # ls finished: never again; rm not re-entered
    r = await app.resume("t", {rm.id: True})
    assert r.values["log"] == ["ls:ok", "rm:ok", "mail:denied"]
    assert runs == Counter(ls=1, rm=2, mail=2)


async def test_interrupt_signal_is_not_swallowed_by_except_exception(store: Store) -> None:
    g = Graph(S)

    def careless(s: S) -> dict[str, Any]:
        try:
            return {"answer": interrupt("q")}
        except Exception:
            return {"answer": "swallowed"}

    g.add_node("n", careless).add_edge(START, "n")
    r = await g.compile(store=store).run({}, thread="t")
    assert r.status == "interrupted"
    assert issubclass(InterruptSignal, BaseException) and not issubclass(InterruptSignal, Exception)


async def test_on_interrupt_handler_answers_live(store: Store) -> None:
    entries: Counter[str] = Counter()
    app = approval_graph(entries).compile(store=store)
    asked: list[str] = []

    async def handler(i: Any) -> bool:
        asked.append(i.info["question"])
        # The wait is durable: the interrupt is committed before we are asked.
        assert (await store.get_interrupt(i.id)) is not None
        return True

    r = await app.run({"amount": 3}, thread="t", on_interrupt=handler)
    assert r.status == "done" and asked == ["pay 3?"]
    assert entries["execute"] == 1


async def test_user_composite_reports_every_child_and_keeps_its_state(store: Store) -> None:
    seen: list[Any] = []
    g = Graph(S)

    def reviewers(s: S) -> dict[str, Any]:
        seen.append(interrupt_state())
        signals: list[BaseException] = []
        answers = []
        for name in ("legal", "finance"):
            with child_scope(Segment("agent", name)):
                try:
                    answers.append(approve(f"{name} ok?"))
                except InterruptSignal as sig:
                    signals.append(sig)
        if signals:
            composite_interrupt("two reviews", {"asked": len(signals)}, signals)
        return {"answer": answers}

    g.add_node("review", reviewers).add_edge(START, "review")
    app = g.compile(store=store)
    r = await app.run({}, thread="t")
    assert [str(i.address) for i in r.interrupts] == [
        "node:review/agent:legal",
        "node:review/agent:finance",
    ]
    assert seen == [(False, None)]
    legal, finance = r.interrupts
    r = await app.resume("t", {legal.id: True})
    assert [i.id for i in r.interrupts] == [finance.id]
    assert seen[1] == (False, {"asked": 2})  # the composite's state, at the node's address
    r = await app.resume("t", {finance.id: False})
    assert r.values["answer"] == [True, False]


@dataclasses.dataclass(frozen=True)
class Job:
    name: str


async def test_types_outside_the_schema_are_registered_explicitly(store: Store) -> None:
    def build(types: list[type[Any]]) -> Any:
        g = Graph(S, types=types)
        g.add_node("plan", lambda s: {"log": ["plan"]})
        g.add_node("work", lambda job: {"log": [interrupt(job).name]})
        g.add_edge(START, "plan")
        g.add_conditional_edges("plan", lambda s: [Send("work", Job("a"))])
        return g.compile(store=store)

    with pytest.raises(UnregisteredType, match="Job is not registered"):
        await build([]).run({}, thread="t1")
    app = build([Job])
    r = await app.run({}, thread="t2")
    assert r.interrupt().info == Job("a")
    r = await app.resume("t2", {r.interrupt().id: Job("b")})
    assert r.values["log"] == ["plan", "b"]
