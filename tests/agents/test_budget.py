"""Budgets: an agent that reached a limit stops with a question to a person, decided like any
approval — across processes — and the usage its turns report reaches events and metadata."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from _budget_agent import PER_TURN, PRICES, agent, build

from _crashes import stops_with
from interlock import SqliteStore
from interlock.agents import (
    AgentInterrupt,
    AssistantMessage,
    AssistantTurn,
    Budget,
    Message,
    Runner,
    ScriptedModel,
    ToolAgent,
    ToolMessage,
    ToolSpec,
    UserMessage,
    call,
    supervisor,
    tool,
)
from interlock.runtime import usage_of

pytestmark = pytest.mark.anyio

Opener = Callable[[Path | str], SqliteStore]

SCRIPT = Path(__file__).with_name("_budget_agent.py")
TURN_COST = (14_000 * 2.5 + 1_000 * 1.25 + 5_000 * 10.0) / 1e6


async def test_a_budget_question_is_decided_in_another_process(
    sqlite_files: Opener, tmp_path: Path
) -> None:
    db = tmp_path / "b.db"
    out = await anyio.run_process([sys.executable, str(SCRIPT), str(db)], check=False)
    assert out.returncode == 0, out.stderr.decode()
    info = json.loads(out.stdout.decode().strip().splitlines()[-1])
    assert info["tool"] == "budget" and info["kind"] == "budget"
    assert info["question"] == (
        f"This run has used 40,000 tokens (${2 * TURN_COST:.2f}) of 40,000 tokens; "
        "continue with another 20,000 tokens?"
    )
    assert info["arguments"] == {"tokens": 60_000}  # what approving grants
    assert info["used"]["turns"] == 2 and info["over"] == ["tokens"]

    app = build(sqlite_files(db))  # this process: the store is all it shares with the first
    state = await app.get_state("b")
    assert usage_of(state.metadata).run.tokens == 40_000
    (question,) = state.interrupts
    result = await app.resume("b", {question.id: {"action": "approve"}})
    # Two more turns fit in 60,000 (the third reaches it): the run stops again, asking anew.
    assert result.status == "interrupted"
    again = result.interrupt().info
    assert again["question"].startswith("This run has used 60,000 tokens")
    assert again["arguments"] == {"tokens": 80_000}

    final = await app.resume(
        "b", {result.interrupt().id: {"action": "edit", "arguments": {"tokens": 100_000}}}
    )
    assert final.status == "done"
    assert final.values["messages"][-1].content == "added 4 times"
    totals = usage_of((await app.get_state("b")).metadata)
    assert totals.run.calls == 5 and totals.run.tokens == 5 * PER_TURN.input_tokens + 5 * 5_000
    assert totals.run.cost == pytest.approx(5 * TURN_COST)
    assert totals.grants == {"adder:run": {"tokens": 100_000}}


async def test_an_edit_sets_the_new_limits_and_they_hold_for_the_run(
    sqlite_files: Opener, tmp_path: Path
) -> None:
    app = build(sqlite_files(tmp_path / "b.db"), turns=6)
    first = await app.run({"messages": ["go"]}, thread="b")
    done = await app.resume(
        "b", {first.interrupt().id: {"action": "edit", "arguments": {"tokens": 200_000}}}
    )
    assert done.status == "done"  # no second question: the raised limit holds
    assert done.values["messages"][-1].content == "added 5 times"


async def test_a_rejection_stops_the_agent_and_says_why(
    sqlite_files: Opener, tmp_path: Path
) -> None:
    app = build(sqlite_files(tmp_path / "b.db"))
    first = await app.run({"messages": ["go"]}, thread="b")
    done = await app.resume(
        "b", {first.interrupt().id: {"action": "reject", "message": "too expensive"}}
    )
    assert done.status == "done"
    last = done.values["messages"][-1]
    assert last.content == ("I stopped: this run used its budget (tokens), and too expensive.")
    assert usage_of((await app.get_state("b")).metadata).run.calls == 2  # no third call


async def test_an_edit_below_what_was_used_stops_the_agent(
    sqlite_files: Opener, tmp_path: Path
) -> None:
    app = build(sqlite_files(tmp_path / "b.db"))
    first = await app.run({"messages": ["go"]}, thread="b")
    done = await app.resume(
        "b", {first.interrupt().id: {"action": "edit", "arguments": {"tokens": 30_000}}}
    )
    assert "already used up" in done.values["messages"][-1].content


async def test_an_edit_must_follow_the_limits_schema(sqlite_files: Opener, tmp_path: Path) -> None:
    from interlock import InvalidResume

    app = build(sqlite_files(tmp_path / "b.db"))
    first = await app.run({"messages": ["go"]}, thread="b")
    with pytest.raises(InvalidResume, match="tokens"):
        await app.resume(
            "b", {first.interrupt().id: {"action": "edit", "arguments": {"tokens": "lots"}}}
        )
    assert (await app.get_state("b")).interrupts  # nothing recorded: it still waits


async def test_turns_and_cost_budgets(sqlite_files: Opener, tmp_path: Path) -> None:
    turns = build(sqlite_files(tmp_path / "t.db"), budget=Budget(turns=3))
    asked = (await turns.run({"messages": ["go"]}, thread="b")).interrupt().info
    assert asked["used"]["turns"] == 3 and asked["over"] == ["turns"]
    assert asked["question"] == (
        "This run has used 3 turns of 3 turns; continue with another 2 turns?"
    )
    assert asked["arguments"] == {"turns": 5}

    cost = build(sqlite_files(tmp_path / "c.db"), budget=Budget(cost=0.1))
    asked = (await cost.run({"messages": ["go"]}, thread="b")).interrupt().info
    assert asked["over"] == ["cost"] and asked["used"]["turns"] == 2  # 2 × $0.08625
    assert asked["question"].startswith("This run has used $0.17 of $0.10;")


async def test_a_run_budget_starts_over_with_each_run_and_a_thread_budget_does_not(
    sqlite_files: Opener,
    tmp_path: Path,
) -> None:
    # Two turns in the first run (40,000 tokens), then one per run (20,000).
    run = build(sqlite_files(tmp_path / "r.db"), turns=2, budget=Budget(tokens=50_000))
    for text in ("go", "again", "and again"):
        assert (await run.run({"messages": [text]}, thread="b")).status == "done"

    thread = build(
        sqlite_files(tmp_path / "t.db"), turns=2, budget=Budget(tokens=50_000, per="thread")
    )
    assert (await thread.run({"messages": ["go"]}, thread="b")).status == "done"
    assert (await thread.run({"messages": ["again"]}, thread="b")).status == "done"
    third = await thread.run({"messages": ["and again"]}, thread="b")
    assert third.status == "interrupted"  # 60,000 over the thread's life
    assert third.interrupt().info["question"].startswith("This thread has used 60,000")


class Crash(BaseException):
    """Stands for the process ending mid-run: nothing more is committed."""


def crashing_agent(crash_at: int | None) -> ToolAgent:
    """`_budget_agent.agent`'s adder (40,000-token budget), whose model call number
    ``crash_at`` stops the process instead of answering."""

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    calls = 0

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> AssistantMessage:
        nonlocal calls
        calls += 1
        if calls == crash_at:
            raise Crash
        done = sum(isinstance(m, ToolMessage) for m in messages)
        return AssistantMessage(tool_calls=(call("add", {"a": done, "b": 1}),), usage=PER_TURN)

    return ToolAgent(
        "adder", ScriptedModel(script, name="gpt-4o"), [add], budget=Budget(tokens=40_000)
    )


async def test_a_budget_holds_for_a_run_continued_in_a_fresh_app_after_a_crash(
    sqlite_files: Opener, tmp_path: Path
) -> None:
    db = tmp_path / "b.db"
    first = crashing_agent(crash_at=2).compile(store=sqlite_files(db), prices=PRICES)
    # The second model call never returns: the thread stops after the first tool call.
    await stops_with(first.run({"messages": ["go"]}, thread="b"), Crash)
    stopped = await first.get_state("b")
    assert stopped.status == "ready" and len(stopped.values["messages"]) == 3

    app = crashing_agent(crash_at=None).compile(store=sqlite_files(db), prices=PRICES)
    result = await app.resume("b")  # continues the tasks the crash left
    # The turn before the crash counts: one more turn reaches 40,000 tokens, and the run asks.
    assert result.status == "interrupted"
    info = result.interrupt().info
    assert info["tool"] == "budget" and info["used"]["turns"] == 2
    assert info["question"].startswith("This run has used 40,000 tokens")
    assert sum(isinstance(m, ToolMessage) for m in result.values["messages"]) == 2
    totals = usage_of((await app.get_state("b")).metadata)
    assert (totals.run.calls, totals.thread.calls) == (2, 2)


async def test_each_turn_reports_its_usage_in_the_events(
    sqlite_files: Opener, tmp_path: Path
) -> None:
    app = build(sqlite_files(tmp_path / "b.db"), turns=2, budget=Budget(tokens=10**6))
    async with app.stream({"messages": ["go"]}, thread="b", modes=["custom"]) as stream:
        turns = [
            e.data async for e in stream if isinstance(getattr(e, "data", None), AssistantTurn)
        ]
    assert [t.message.usage for t in turns] == [PER_TURN, PER_TURN]
    assert [t.cost for t in turns] == pytest.approx([TURN_COST, TURN_COST])
    assert [t.totals.run.calls for t in turns if t.totals] == [1, 2]


async def test_a_supervisor_budget_counts_its_workers_calls() -> None:
    def worker_reply(messages: Any, tools: Any) -> AssistantMessage:
        return AssistantMessage(content="done", usage=PER_TURN)

    worker = ToolAgent("worker", ScriptedModel(worker_reply, name="w"))
    boss = supervisor(
        ScriptedModel(
            [
                AssistantMessage(
                    tool_calls=(call("transfer_to_worker", {}),),
                    usage=PER_TURN,
                ),
                AssistantMessage(content="all done", usage=PER_TURN),
            ],
            name="boss",
        ),
        [worker],
        name="boss",
        budget=Budget(tokens=30_000),
    )
    result = await boss.compile().run({"messages": [UserMessage(content="go")]}, thread="s")
    assert result.status == "interrupted"  # the worker's 20,000 count toward it
    assert result.interrupt().info["used"]["tokens"] == 40_000


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "at least one limit"),
        ({"tokens": 0}, "positive int"),
        ({"tokens": 1.5}, "positive int"),
        ({"cost": float("nan")}, "positive number"),
        ({"tokens": 10, "per": "day"}, "'run' or 'thread'"),
        ({"tokens": 10, "extend": 0}, "positive number"),
    ],
)
def test_a_budget_says_what_is_wrong_with_it(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Budget(**kwargs)


def test_an_agent_takes_only_a_budget() -> None:
    with pytest.raises(TypeError, match="must be a Budget"):
        ToolAgent("a", ScriptedModel(["x"]), budget={"tokens": 10})  # type: ignore[arg-type]


async def test_a_runner_shows_the_budget_question(sqlite_files: Opener, tmp_path: Path) -> None:
    runner = Runner(agent(), sqlite_files(tmp_path / "b.db"), prices=PRICES)
    async with runner.run("go", session="b") as stream:
        events = [e async for e in stream]
    asked = [e for e in events if isinstance(e, AgentInterrupt)]
    assert len(asked) == 1 and asked[0].interrupt.info["tool"] == "budget"
    turns = [e for e in events if isinstance(e, AssistantTurn)]
    assert [t.cost for t in turns] == pytest.approx([TURN_COST, TURN_COST])
