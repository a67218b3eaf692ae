"""Composition: sequence, parallel, loop, supervisor, plan-execute; deep questions reach the top."""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec
import pytest
from _agents import replies_to_tool_results

from interlock import (
    InvalidResume,
    PostgresStore,
    ReplyCutShort,
    SqliteStore,
    Store,
    interrupt,
)
from interlock.agents import (
    Agent,
    ApprovalPolicy,
    Approve,
    AssistantMessage,
    Runner,
    ScriptedModel,
    ToolAgent,
    UserMessage,
    call,
    conversation,
    loop,
    parallel,
    plan_execute,
    sequential,
    supervisor,
    tool,
)

pytestmark = pytest.mark.anyio


def ask(text: str) -> dict[str, Any]:
    return {"messages": [UserMessage(content=text)]}


def says(name: str, text: str) -> ToolAgent:
    return ToolAgent(name, ScriptedModel(lambda m, t: text, name=name))


def answers(result: Any) -> list[tuple[str | None, str | None]]:
    return [
        (m.name, m.content)
        for m in conversation(result.values["messages"])
        if isinstance(m, AssistantMessage) and m.content
    ]


class Budget:
    """An executor with a gated ``allocate_budget`` and the models around it, counted."""

    def __init__(self) -> None:
        self.allocated: list[tuple[str, int]] = []

        @tool
        def allocate_budget(project: str, amount: int) -> str:
            """Allocate budget to a project."""
            self.allocated.append((project, amount))
            return f"allocated {amount} to {project}"

        self.executor_model = ScriptedModel(
            replies_to_tool_results(
                call("allocate_budget", {"project": "apollo", "amount": 5000}), "executor"
            ),
            name="executor",
        )
        self.executor = ToolAgent(
            "executor",
            self.executor_model,
            [allocate_budget],
            policy=ApprovalPolicy({"allocate_budget": "require_approval"}),
        )
        self.planner = ScriptedModel(
            [call("plan", {"steps": ["allocate budget to apollo"]})], name="planner"
        )
        self.replanner = ScriptedModel(
            [call("respond", {"answer": "Budget allocated."})], name="replanner"
        )
        self.plan = plan_execute(self.planner, self.executor, self.replanner, name="budget")


async def test_sequential_agents_share_the_conversation(store: Store) -> None:
    seen: list[int] = []

    def second(messages: Any, tools: Any) -> str:
        seen.append(len(messages))
        return "second"

    flow = sequential([says("a", "first"), ToolAgent("b", ScriptedModel(second, name="b"))])
    done = await flow.compile(store=store).run(ask("go"), thread="t")
    assert answers(done) == [("a", "first"), ("b", "second")]
    assert seen == [2]  # b saw the user's message and a's answer


async def test_parallel_children_that_finished_never_run_again(store: Store) -> None:
    fast_model = ScriptedModel(lambda m, t: "fast done", name="fast")
    budget = Budget()
    flow = parallel([ToolAgent("fast", fast_model), budget.executor])
    app = flow.compile(store=store)
    first = await app.run(ask("go"), thread="t")
    assert first.status == "interrupted" and len(fast_model.requests) == 1
    done = await app.resume("t", {first.interrupts[0].id: Approve()})
    assert done.status == "done" and len(fast_model.requests) == 1  # not re-run
    assert budget.allocated == [("apollo", 5000)]
    assert ("fast", "fast done") in answers(done)


async def test_a_loop_runs_until_its_bound_or_its_condition() -> None:
    counter = Counter[str]()

    def count(messages: Any, tools: Any) -> str:
        counter["n"] += 1
        return f"pass {counter['n']}"

    flow = loop([ToolAgent("w", ScriptedModel(count, name="w"))], max_iterations=3)
    done = await flow.compile().run(ask("go"), thread="t")
    assert [text for _, text in answers(done)] == ["pass 1", "pass 2", "pass 3"]
    counter.clear()
    until = loop(
        [ToolAgent("w", ScriptedModel(count, name="w"))],
        max_iterations=10,
        until=lambda messages: "pass 2" in (messages[-1].content or ""),  # type: ignore[union-attr]
    )
    done = await until.compile().run(ask("go"), thread="t")
    assert counter["n"] == 2
    with pytest.raises(ValueError, match="max_iterations"):
        loop([says("w", "x")], max_iterations=0)


async def test_a_supervisor_transfers_and_gets_control_back(store: Store) -> None:
    research = says("research", "the answer is 42")
    boss = supervisor(
        ScriptedModel(
            lambda m, t: "Final: 42" if len(m) > 2 else call("transfer_to_research"), name="boss"
        ),
        [research],
        name="boss",
    )
    runner = Runner(boss, store)
    kinds: list[tuple[str, str]] = []
    async with runner.run("what is it?", session="s") as events:
        async for event in events:
            if event.kind == "transfer":
                kinds.append((event.source, event.target))
    assert kinds == [("boss", "research"), ("research", "boss")]
    assert events.finished is not None and events.finished.answer == "Final: 42"
    # The transfer tool was offered, and its call was answered before research ran.
    messages = events.finished.messages
    assert [type(m).__name__ for m in messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
        "AssistantMessage",
        "AssistantMessage",
    ]


async def test_a_transfer_to_nobody_is_an_error_the_supervisor_reads() -> None:
    def script(messages: Any, tools: Any) -> Any:
        return "gave up" if len(messages) > 1 else call("transfer_to_ghost")

    boss = supervisor(ScriptedModel(script, name="boss"), [says("real", "x")], name="boss")
    done = await boss.compile().run(ask("go"), thread="t")
    tool_message = conversation(done.values["messages"])[2]
    assert "No agent named 'ghost'" in tool_message.content  # type: ignore[union-attr]


async def _deep(store: Store) -> None:
    budget = Budget()
    pm_model = ScriptedModel(
        lambda m, t: (
            "The budget is done."
            if any(getattr(x, "name", None) == "budget" and x.content for x in m[2:])  # type: ignore[union-attr]
            else call("transfer_to_budget")
        ),
        name="pm",
    )
    pm = supervisor(pm_model, [budget.plan], name="pm")
    app = pm.compile(store=store)
    first = await app.run(ask("Give apollo 5000"), thread="t")
    (question,) = first.interrupts
    # Every agent on the path: the supervisor, the plan-execute agent, the executor.
    assert str(question.address) == (
        "node:budget/agent:pm/node:execute/agent:budget/node:tools/agent:executor/"
        "tool:allocate_budget:call_executor_0_0"
    )
    assert (question.info["agent"], question.info["tool"]) == ("executor", "allocate_budget")
    assert budget.allocated == [] and len(budget.planner.requests) == 1
    # A resume that targets nothing is refused, and the question stays pending with its id.
    with pytest.raises(InvalidResume, match="need an answer"):
        await app.resume("t")
    assert [i.id for i in await app.inbox(thread="t")] == [question.id]
    # Answered from the top, by id.
    done = await app.resume("t", {question.id: Approve()})
    assert done.status == "done"
    assert budget.allocated == [("apollo", 5000)]
    assert len(budget.planner.requests) == 1  # the planner was not called again
    assert answers(done)[-1] == ("pm", "The budget is done.")


async def test_a_deep_interrupt_reaches_the_top_and_is_answered_there(store: Store) -> None:
    await _deep(store)


async def test_the_deep_scenario_on_postgres(dsn: str) -> None:
    async with PostgresStore(dsn) as store:
        await _deep(store)


async def test_nested_supervisors_answer_from_the_top(store: Store) -> None:
    budget = Budget()

    def boss_of(target: str, name: str) -> ScriptedModel:
        def script(messages: Any, tools: Any) -> Any:
            last = messages[-1]
            if isinstance(last, AssistantMessage) and last.name != name:
                return f"{name} done"
            return call(f"transfer_to_{target}")

        return ScriptedModel(script, name=name)

    inner = supervisor(boss_of("executor", "inner"), [budget.executor], name="inner")
    outer = supervisor(boss_of("inner", "outer"), [inner], name="outer")
    app = outer.compile(store=store)
    first = await app.run(ask("go"), thread="t")
    (question,) = first.interrupts
    assert str(question.address) == (
        "node:inner/agent:outer/node:executor/agent:inner/node:tools/agent:executor/"
        "tool:allocate_budget:call_executor_0_0"
    )
    done = await app.resume("t", {question.id: Approve()})
    assert budget.allocated == [("apollo", 5000)] and answers(done)[-1] == ("outer", "outer done")


COMPOSITIONS = ["sequential", "parallel", "loop", "supervisor", "plan_execute", "as_tool"]


def _coordinator(kind: str, sa1: Agent) -> Agent:
    """``sa1`` composed under an agent named ``coordinator`` by ``kind``."""
    if kind == "sequential":
        return sequential([says("sa0", "first"), sa1], name="coordinator")
    if kind == "parallel":
        return parallel([says("sa0", "beside"), sa1], name="coordinator")
    if kind == "loop":
        return loop([sa1], max_iterations=1, name="coordinator")
    if kind == "supervisor":

        def boss(messages: Any, tools: Any) -> Any:
            last = messages[-1]
            if isinstance(last, AssistantMessage) and last.name == "sa1":
                return "all done"
            return call("transfer_to_sa1")

        return supervisor(ScriptedModel(boss, name="coordinator"), [sa1], name="coordinator")
    if kind == "plan_execute":
        planner = ScriptedModel([call("plan", {"steps": ["write the report"]})], name="p")
        return plan_execute(planner, sa1, name="coordinator")
    assert kind == "as_tool"
    model = ScriptedModel(
        replies_to_tool_results(call("sa1", {"request": "write the report"}), "coordinator"),
        name="coordinator",
    )
    return ToolAgent("coordinator", model, [sa1.as_tool()])


# Where each composition runs its child: the node of the coordinator's graph above it.
_ABOVE = {
    "sequential": "node:sa1/agent:coordinator",
    "parallel": "node:sa1/agent:coordinator",
    "loop": "node:sa1/agent:coordinator",
    "supervisor": "node:sa1/agent:coordinator",
    "plan_execute": "node:execute/agent:coordinator",
    "as_tool": "node:tools/agent:coordinator/tool:sa1:call_coordinator_0_0",
}


@pytest.mark.parametrize("kind", COMPOSITIONS)
async def test_an_address_names_every_agent_on_the_path(kind: str, tmp_path: Any) -> None:
    written: list[str] = []

    def build() -> Agent:
        @tool
        def write_file(path: str) -> str:
            """Write a file."""
            written.append(path)
            return f"wrote {path}"

        sa1 = ToolAgent(
            "sa1",
            ScriptedModel(
                replies_to_tool_results(call("write_file", {"path": "report.txt"}), "sa1"),
                name="sa1",
            ),
            [write_file],
            policy=ApprovalPolicy({"write_file": "require_approval"}),
        )
        return _coordinator(kind, sa1)

    async with SqliteStore(tmp_path / "agents.db") as store:
        first = await build().compile(store=store).run(ask("write the report"), thread="t")
        (question,) = first.interrupts
        address = question.address
        # The same form for every composition: each agent once, outermost first.
        assert [s.name for s in address if s.kind == "agent"] == ["coordinator", "sa1"]
        assert str(address) == (f"{_ABOVE[kind]}/node:tools/agent:sa1/tool:write_file:call_sa1_0_0")
        assert question.info["address"] == str(address)
        # The inbox, which spans threads, shows the whole chain.
        (row,) = await build().compile(store=store).inbox()
        assert row.address == address
        assert written == []
        # Answered by id from a new agent tree, as another process would.
        done = await build().compile(store=store).resume("t", {question.id: Approve()})
    assert done.status == "done" and written == ["report.txt"]


async def test_a_keyed_question_deep_in_a_composition_is_answered_by_its_key() -> None:
    @tool
    def pick_file() -> str:
        """Ask a person which file to open."""
        return f"opened {interrupt('Which file?', key='file')}"

    sa1 = ToolAgent(
        "sa1",
        ScriptedModel(replies_to_tool_results(call("pick_file", {}), "sa1"), name="sa1"),
        [pick_file],
    )
    app = sequential([says("sa0", "first"), sa1], name="coordinator").compile()
    first = await app.run(ask("open a file"), thread="t")
    (question,) = first.interrupts
    assert question.key == "file"
    assert str(question.address) == (
        "node:sa1/agent:coordinator/node:tools/agent:sa1/tool:pick_file:call_sa1_0_0"
    )
    done = await app.resume("t", {"file": "report.txt"})
    assert answers(done)[-1] == ("sa1", "sa1: opened report.txt")


async def test_an_edit_at_the_top_loses_nothing_a_waiting_child_adds(store: Store) -> None:
    from interlock.agents import ReplaceMessage, ToolMessage

    budget = Budget()
    runner = Runner(sequential([says("sa0", "first"), budget.executor], name="coordinator"), store)
    async with runner.run(UserMessage(content="give apollo 5000", id="u1"), session="s") as ev:
        async for event in ev:
            if event.kind == "interrupt":
                iid = event.interrupt.id
    # The top's conversation grows by an edit while the executor waits with its own copy.
    edit = ReplaceMessage(id="u1", message=UserMessage(content="give apollo 5000, today"))
    finished = await runner.decide("s", {iid: Approve()}, edits=[edit])
    assert finished.result.status == "done" and budget.allocated == [("apollo", 5000)]
    messages = finished.messages
    # Everything the executor added came back: its call, the tool's answer, its reply.
    (asked,) = [m for m in messages if isinstance(m, AssistantMessage) and m.tool_calls]
    assert asked.name == "executor" and asked.tool_calls[0].name == "allocate_budget"
    assert [m.content for m in messages if isinstance(m, ToolMessage)] == [
        "allocated 5000 to apollo"
    ]
    assert messages[0].content == "give apollo 5000, today"  # type: ignore[union-attr]
    assert answers(finished.result)[-1] == ("executor", "executor: allocated 5000 to apollo")


async def test_a_supervisor_policy_covers_the_tools_of_its_agents() -> None:
    entered = Counter[str]()

    @tool
    def publish(text: str) -> str:
        """Publish."""
        entered["publish"] += 1
        return "published"

    writer = ToolAgent(
        "writer",
        ScriptedModel(replies_to_tool_results(call("publish", {"text": "hi"})), name="writer"),
        [publish],
    )
    boss = supervisor(
        ScriptedModel(lambda m, t: "ok" if len(m) > 2 else call("transfer_to_writer"), name="b"),
        [writer],
        name="b",
        policy=ApprovalPolicy({"publish": "require_approval"}, default="allow"),
    )
    first = await boss.compile().run(ask("go"), thread="t")
    assert [i.info["tool"] for i in first.interrupts] == ["publish"] and entered == {}


async def test_resume_may_edit_the_conversation_in_the_same_call(store: Store) -> None:
    from interlock.agents import ReplaceMessage

    budget = Budget()
    runner = Runner(budget.executor, store)
    async with runner.run(UserMessage(content="give apollo 5000", id="u1"), session="s") as ev:
        async for event in ev:
            if event.kind == "interrupt":
                iid = event.interrupt.id
    edit = ReplaceMessage(id="u1", message=UserMessage(content="give apollo 5000, politely"))
    finished = await runner.decide("s", {iid: Approve()}, edits=[edit])
    assert finished.messages[0].content == "give apollo 5000, politely"  # type: ignore[union-attr]
    # The model's next request saw the edited conversation.
    assert budget.executor_model.requests[-1].messages[0] == finished.messages[0]
    assert budget.allocated == [("apollo", 5000)]


async def test_a_plan_cut_by_the_token_limit_is_not_run(store: Store) -> None:
    budget = Budget()
    cut = AssistantMessage(
        content="Steps: 1. allocate budget to apo", finish_reason="length", name="planner"
    )
    replies = iter([cut, call("plan", {"steps": ["allocate budget to apollo"]})])
    planner = ScriptedModel(lambda messages, tools: next(replies), name="planner")
    app = plan_execute(planner, budget.executor, name="budget").compile(store=store)
    with pytest.raises(ReplyCutShort, match=r"planner of 'budget'.*token limit") as raised:
        await app.run(ask("fund apollo"), thread="t")
    assert (raised.value.agent, raised.value.content) == ("budget", cut.content)
    assert budget.executor_model.requests == []  # no step of the cut plan ran
    # The thread stays where it was: a resume asks the planner again.
    again = await app.resume("t")
    assert again.status == "interrupted" and again.interrupt().info["tool"] == "allocate_budget"
    assert len(planner.requests) == 2


def test_compositions_refuse_bad_children() -> None:
    for bad in ([], [object()], "agents"):
        with pytest.raises(TypeError):
            sequential(bad)  # type: ignore[arg-type]
    with pytest.raises(Exception, match="two agents named"):
        parallel([says("a", "x"), says("a", "y")])
    assert isinstance(sequential([says("a", "x")]), Agent)


async def test_a_decision_edits_the_conversation_of_the_agent_that_asked(store: Store) -> None:
    from interlock.agents import ReplaceMessage

    budget = Budget()
    pm = supervisor(
        ScriptedModel(
            lambda m, t: (
                "pm done" if isinstance(m[-1], AssistantMessage) else call("transfer_to_executor")
            ),
            name="pm",
        ),
        [budget.executor],
        name="pm",
    )
    app = pm.compile(store=store)
    first = await app.run(
        {"messages": [UserMessage(content="give apollo 5000", id="u1")]}, thread="t"
    )
    (question,) = first.interrupts
    assert str(question.address).startswith("node:executor/agent:pm/")  # in the sub-agent
    edit = ReplaceMessage(id="u1", message=UserMessage(content="give apollo 5000, today"))
    answer = {"action": "approve", "conversation": [msgspec.to_builtins(edit)]}
    done = await app.resume("t", {question.id: answer})
    assert done.status == "done" and budget.allocated == [("apollo", 5000)]
    # The executor's next turn was shown the edited message; so was the supervisor's.
    assert budget.executor_model.requests[-1].messages[0].content == "give apollo 5000, today"  # type: ignore[union-attr]
    assert conversation(done.values["messages"])[0].content == "give apollo 5000, today"  # type: ignore[union-attr]


async def test_a_decision_with_a_bad_conversation_edit_changes_nothing(store: Store) -> None:
    budget = Budget()
    app = budget.executor.compile(store=store)
    first = await app.run({"messages": [UserMessage(content="x", id="u1")]}, thread="t")
    iid = first.interrupts[0].id
    for bad in (
        [{"type": "replace", "id": "u1", "message": {"role": "tool", "content": "x"}}],
        [{"type": "rename", "id": "u1"}],
        [{"type": "remove"}],
        "u1",
    ):
        with pytest.raises(InvalidResume):
            await app.resume("t", {iid: {"action": "approve", "conversation": bad}})
    assert [i.id for i in await app.inbox(thread="t")] == [iid] and budget.allocated == []
