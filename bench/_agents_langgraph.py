"""LangChain v1's agents for the A scenarios of bench/compare.py, and the plain graph of Aovh.

Each mirrors its twin in ``_agents_interlock.py``: the same script (``_common``), the same tools
under the same gates. The agents are ``langchain.agents.create_agent`` graphs with
``HumanInTheLoopMiddleware`` on a scripted chat model (`ScriptedChatModel`, a small
``BaseChatModel`` that returns the script's ``AIMessage``s and accepts ``bind_tools``); the plain
graph (Aovh) does the same work as a ``StateGraph`` over dicts with one ``interrupt()``.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Final, Literal, TypedDict

from _common import (
    ALLOWED_TOOL,
    GATED_TOOL,
    ScriptReply,
    approval_script,
    lookup_result,
    parallel_script,
    parallel_tools,
)
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Interrupt, interrupt

HitlMode = Literal["batched", "per_call"]
APPROVE: Any = {"type": "approve"}
"""One approval, in ``HumanInTheLoopMiddleware``'s decision form."""
REJECT: Any = {"type": "reject"}


def agent_answer(out: Mapping[str, Any]) -> Any:
    """The text of an agent's last message."""
    return out["messages"][-1].content


def plain_answer(out: Mapping[str, Any]) -> Any:
    """The text of the plain graph's last message."""
    return out["messages"][-1]["content"]


def agent_approval(pending: Interrupt) -> Any:
    """The middleware's answer (batched mode) to a turn with one gated call: approve it."""
    return {"decisions": [APPROVE]}


def plain_approval(pending: Interrupt) -> Any:
    """The plain graph's answer to its approval."""
    return APPROVE


def approve_one(
    mode: HitlMode, held: Sequence[str], pending: Sequence[Interrupt], *, every: bool = False
) -> tuple[dict[str, Any], bool]:
    """A3's resume: ``(answer, rejects)``. It approves ``held[0]`` only (or, ``every``, all of
    ``pending``). ``batched`` takes every decision of the turn in one answer (a shorter list
    raises ValueError), so the other calls of the batch are rejected with it (``rejects``)."""
    if mode == "batched":
        (single,) = pending
        asked = [a["name"] for a in single.value["action_requests"]]
        if sorted(asked) != sorted(held):
            raise AssertionError(f"A3 expected approvals of {list(held)}, got {asked}")
        decisions = [APPROVE if every or name == held[0] else REJECT for name in asked]
        return {single.id: {"decisions": decisions}}, not every
    if sorted(i.value["name"] for i in pending) != sorted(held) and not every:
        raise AssertionError(f"A3 expected approvals of {list(held)}, got {pending}")
    chosen = [i for i in pending if every or i.value["name"] == held[0]]
    return {i.id: APPROVE for i in chosen}, False


class ScriptedChatModel(BaseChatModel):
    """A chat model that plays a script: reply ``n`` once the conversation holds ``n``
    assistant messages (the rule interlock's ScriptedModel follows)."""

    script: list[Any]
    """The replies, as ``AIMessage`` keyword arguments."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _reply(self, messages: Sequence[BaseMessage]) -> ChatResult:
        turn = sum(1 for m in messages if isinstance(m, AIMessage))
        message = AIMessage(**self.script[turn])
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        return self._reply(messages)

    async def _agenerate(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> ChatResult:
        # Overridden so that the async API does not hop to a thread pool for a script.
        return self._reply(messages)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self  # the script already knows which tools it calls


def scripted_model(script: Sequence[ScriptReply]) -> ScriptedChatModel:
    """The shared script as ``AIMessage`` arguments."""
    replies: list[Any] = []
    for r in script:
        calls = [
            {"id": c.id, "name": c.name, "args": c.arguments, "type": "tool_call"} for c in r.calls
        ]
        replies.append({"content": r.text, "tool_calls": calls})
    return ScriptedChatModel(script=replies)


def make_tool(name: str, description: str, fn: Callable[..., Any]) -> BaseTool:
    """A tool of ``fn`` (its schema inferred from the signature, as ``@tool`` does), with an
    async body too, so that neither API hops to a thread pool to run it."""

    async def coroutine(**kwargs: Any) -> Any:
        return fn(**kwargs)

    return StructuredTool.from_function(
        func=fn, coroutine=coroutine, name=name, description=description
    )


def assistant_bodies(entries: Counter[str], tool_bytes: int) -> dict[str, Callable[..., str]]:
    """A1, A2, Aovh: ``execute`` (gated) and ``lookup`` (allowed); ``entries`` counts bodies."""

    def execute(command: str) -> str:
        entries[GATED_TOOL] += 1
        return "exit 0"

    def lookup(query: str, turn: int) -> str:
        entries[ALLOWED_TOOL] += 1
        return lookup_result(turn, tool_bytes)

    return {GATED_TOOL: execute, ALLOWED_TOOL: lookup}


DESCRIPTIONS: Final = {GATED_TOOL: "Run a shell command.", ALLOWED_TOOL: "Look something up."}


def assistant_agent(
    script: Sequence[ScriptReply],
    entries: Counter[str],
    saver: BaseCheckpointSaver[Any],
    tool_bytes: int = 0,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A1, A2, Aovh: ``create_agent`` with both tools, ``execute`` behind the HITL middleware."""
    hitl: HumanInTheLoopMiddleware[Any, Any, Any] = HumanInTheLoopMiddleware({GATED_TOOL: True})
    bodies = assistant_bodies(entries, tool_bytes)
    return create_agent(
        scripted_model(script),
        [make_tool(name, DESCRIPTIONS[name], fn) for name, fn in bodies.items()],
        middleware=[hitl],
        checkpointer=saver,
    )


def parallel_agent(
    tools: int, gated: int, entries: Counter[str], saver: BaseCheckpointSaver[Any], mode: HitlMode
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A3: ``tools`` tools called in one reply; the last ``gated`` need an approval."""
    free, held = parallel_tools(tools, gated)

    def make(name: str) -> BaseTool:
        def body(item: int) -> str:
            entries[name] += 1
            return f"item {item} done"

        return make_tool(name, "Work on one item.", body)

    hitl: HumanInTheLoopMiddleware[Any, Any, Any] = HumanInTheLoopMiddleware(
        dict.fromkeys(held, True), interrupt_mode=mode
    )
    return create_agent(
        scripted_model(parallel_script(tools)),
        [make(n) for n in free + held],
        middleware=[hitl],
        checkpointer=saver,
    )


# -- Aovh: the same round trip as a plain graph --------------------------------------------------


class PlainState(TypedDict):
    messages: Annotated[list[dict[str, Any]], operator.add]


def plain_graph(entries: Counter[str]) -> StateGraph[PlainState]:
    """A model node playing A1's script over OpenAI-shaped dicts, and a tools node that asks
    for approval of the gated call with ``interrupt()``."""
    script = approval_script()
    bodies = assistant_bodies(entries, tool_bytes=0)

    def model(s: PlainState) -> dict[str, Any]:
        reply = script[sum(1 for m in s["messages"] if m["role"] == "assistant")]
        calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.calls]
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if calls:
            message["tool_calls"] = calls
        return {"messages": [message]}

    def tools(s: PlainState) -> dict[str, Any]:
        out = []
        for c in s["messages"][-1]["tool_calls"]:
            if c["name"] == GATED_TOOL:
                answer = interrupt(approval_question(c))
                if answer != APPROVE:
                    out.append({"role": "tool", "tool_call_id": c["id"], "content": "rejected"})
                    continue
            content = bodies[c["name"]](**c["arguments"])
            out.append({"role": "tool", "tool_call_id": c["id"], "content": content})
        return {"messages": out}

    def route(s: PlainState) -> str:
        return "tools" if s["messages"][-1].get("tool_calls") else END

    g = StateGraph(PlainState)
    g.add_node("model", model)
    g.add_node("tools", tools)
    g.add_edge(START, "model")
    g.add_conditional_edges("model", route, ["tools", END])
    g.add_edge("tools", "model")
    return g


def approval_question(c: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "tool_approval",
        "question": f"Allow assistant to call {c['name']}?",
        "tool": c["name"],
        "call_id": c["id"],
        "arguments": c["arguments"],
    }
