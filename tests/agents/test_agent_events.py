"""An agent's events reach whoever streams its run, every one of them; a run nobody streams
does not build them (`interlock.runtime.listening`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

import pytest

from interlock import END, START, Graph, append
from interlock.agents import (
    AssistantMessage,
    AssistantTurn,
    Message,
    ScriptedModel,
    ToolAgent,
    ToolCallEvent,
    ToolMessage,
    ToolResult,
    ToolSpec,
    call,
    tool,
)
from interlock.graph import Usage
from interlock.runtime import emit_event, listening

pytestmark = pytest.mark.anyio


def adder() -> ToolAgent:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> AssistantMessage:
        used = Usage(input_tokens=10, output_tokens=2)
        if not any(isinstance(m, ToolMessage) for m in messages):
            return AssistantMessage(
                tool_calls=(call("add", {"a": 1, "b": 2}, id="c1"),), usage=used
            )
        return AssistantMessage(content="3", usage=used)

    return ToolAgent("adder", ScriptedModel(script, name="m"), [add])


async def test_a_streamed_agent_run_emits_every_event() -> None:
    app = adder().compile()
    async with app.stream({"messages": ["add"]}, thread="t", modes=["custom"]) as stream:
        seen = [e.data async for e in stream if getattr(e, "data", None) is not None]
    assert [type(d).__name__ for d in seen] == [
        "AssistantTurn",
        "ToolCallEvent",
        "ToolResult",
        "AssistantTurn",
    ]
    first, asked, answered, last = seen
    assert isinstance(first, AssistantTurn) and first.totals is not None
    assert first.totals.run.calls == 1
    assert isinstance(asked, ToolCallEvent) and asked.call.id == "c1"
    assert isinstance(answered, ToolResult) and answered.content == "3"
    assert isinstance(last, AssistantTurn) and last.totals is not None
    assert last.totals.run.calls == 2 and last.message.content == "3"


class S(TypedDict):
    log: Annotated[list[Any], append]


async def test_listening_says_whether_the_run_is_streamed() -> None:
    def node(state: S) -> dict[str, Any]:
        emit_event("news")
        return {"log": [listening()]}

    g: Graph[S] = Graph(S)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    app = g.compile()
    assert (await app.run({"log": []}, thread="quiet")).values["log"] == [False]
    async with app.stream({"log": []}, thread="streamed", modes=["custom"]) as stream:
        events = [e async for e in stream]
    assert [getattr(e, "data", None) for e in events if type(e).__name__ == "CustomEvent"] == [
        "news"
    ]
    assert listening() is False  # outside a run
    assert (await app.get_state("streamed")).values["log"] == [True]
