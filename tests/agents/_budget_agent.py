"""An agent with a token budget, run until its budget question, in a process of its own.

``python _budget_agent.py DB`` starts thread ``b`` on the SQLite file DB and prints the pending
question's ``info`` as JSON on one line, then the process ends. The test builds the same agent
with `build` in its own process, decides the question and resumes the thread there.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

import anyio

from interlock import Price, SqliteStore, Store
from interlock.agents import (
    AgentState,
    AssistantMessage,
    Budget,
    Message,
    ScriptedModel,
    ToolAgent,
    ToolMessage,
    ToolSpec,
    call,
    tool,
)
from interlock.graph import Usage
from interlock.runtime import App

PER_TURN = Usage(input_tokens=15_000, output_tokens=5_000, cached_tokens=1_000)
"""What each model call uses: 20,000 tokens."""
PRICES = {"gpt-4o": Price(input=2.5, output=10.0, cached=1.25)}


def agent(*, turns: int = 5, budget: Budget | None = None) -> ToolAgent:
    """An agent whose model calls ``add`` until it has replied ``turns`` times, then answers."""

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> AssistantMessage:
        done = sum(isinstance(m, ToolMessage) for m in messages)
        if done < turns - 1:
            return AssistantMessage(tool_calls=(call("add", {"a": done, "b": 1}),), usage=PER_TURN)
        return AssistantMessage(content=f"added {done} times", usage=PER_TURN)

    return ToolAgent(
        "adder",
        ScriptedModel(script, name="gpt-4o"),
        [add],
        budget=budget or Budget(tokens=40_000),
    )


def build(db: str | Store, *, turns: int = 5, budget: Budget | None = None) -> App[AgentState]:
    """`agent`, compiled on the SQLite file ``db`` (or a store) with its model's price."""
    store = SqliteStore(db) if isinstance(db, str) else db
    return agent(turns=turns, budget=budget).compile(store=store, prices=PRICES)


if __name__ == "__main__":
    app = build(sys.argv[1])
    result = app.run_sync({"messages": ["add some numbers"]}, thread="b")
    print(json.dumps(result.interrupt().info))
    anyio.run(app.store.close)
