"""interlock's agents for the A scenarios of bench/compare.py, and the plain graph of Aovh.

Each mirrors its twin in ``_agents_langgraph.py``: the same script (``_common``), the same tools
under the same gates. The agents are `ToolAgent`s on interlock's `ScriptedModel`; the plain
graph (Aovh) does the same work with dicts, a model node, a tools node and one ``interrupt()``,
so that the difference between the two is what the agents layer costs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, TypedDict

from _common import (
    ALLOWED_TOOL,
    GATED_TOOL,
    ScriptReply,
    approval_script,
    lookup_result,
    parallel_script,
    parallel_tools,
)

from interlock import END, START, Graph, append, effect, interrupt
from interlock.agents import ApprovalPolicy, ScriptedModel, Tool, ToolAgent, UserMessage, call, tool

APPROVE: Any = {"action": "approve"}
"""The decision every A scenario gives (interlock's plain-JSON form of `Approve`)."""


def agent_input(text: str) -> dict[str, Any]:
    """An agent's input: the user's message."""
    return {"messages": [UserMessage(content=text)]}


def agent_answer(values: Mapping[str, Any]) -> Any:
    """The text of an agent's last message."""
    return values["messages"][-1].content


def plain_input(text: str) -> dict[str, Any]:
    """The plain graph's input: the user's message as a dict."""
    return {"messages": [{"role": "user", "content": text}]}


def plain_answer(values: Mapping[str, Any]) -> Any:
    """The text of the plain graph's last message."""
    return values["messages"][-1]["content"]


def replies(script: Sequence[ScriptReply]) -> list[Any]:
    """The shared script in the form `ScriptedModel` plays."""
    return [
        [call(c.name, c.arguments, id=c.id) for c in r.calls] if r.calls else r.text for r in script
    ]


def assistant_tools(entries: Counter[str], tool_bytes: int) -> list[Tool]:
    """A1, A2, Aovh: ``execute`` (gated) and ``lookup`` (allowed); ``entries`` counts bodies."""

    @tool(name=GATED_TOOL)
    async def execute(command: str) -> str:
        """Run a shell command.

        Args:
            command: The command line.
        """
        entries[GATED_TOOL] += 1
        return "exit 0"

    @tool(name=ALLOWED_TOOL)
    async def lookup(query: str, turn: int) -> str:
        """Look something up.

        Args:
            query: What to look up.
            turn: Which turn of the conversation asks.
        """
        entries[ALLOWED_TOOL] += 1
        return lookup_result(turn, tool_bytes)

    return [execute, lookup]


def assistant_agent(
    script: Sequence[ScriptReply], entries: Counter[str], tool_bytes: int = 0
) -> ToolAgent:
    """A1, A2, Aovh: a `ToolAgent` with both tools, ``execute`` behind an approval."""
    policy = ApprovalPolicy({ALLOWED_TOOL: "allow", GATED_TOOL: "require_approval"})
    model = ScriptedModel(replies(script))
    return ToolAgent("assistant", model, assistant_tools(entries, tool_bytes), policy=policy)


def parallel_agent(tools: int, gated: int, entries: Counter[str]) -> ToolAgent:
    """A3: ``tools`` tools called in one reply; the last ``gated`` need an approval."""
    free, held = parallel_tools(tools, gated)

    def make(name: str) -> Tool:
        async def body(item: int) -> str:
            """Work on one item."""
            entries[name] += 1
            return f"item {item} done"

        return tool(name=name)(body)

    rules: dict[str, Any] = {n: "allow" for n in free} | {n: "require_approval" for n in held}
    return ToolAgent(
        "parallel",
        ScriptedModel(replies(parallel_script(tools))),
        [make(n) for n in free + held],
        policy=ApprovalPolicy(rules),
    )


# -- Aovh: the same round trip as a plain graph --------------------------------------------------


class PlainState(TypedDict):
    messages: Annotated[list[dict[str, Any]], append]


def plain_graph(entries: Counter[str], *, effects: bool = False) -> Graph[PlainState]:
    """A model node playing A1's script over OpenAI-shaped dicts, and a tools node that asks
    for approval of the gated call with ``interrupt()`` (the same question an agent asks).

    With ``effects`` the graph gives the agent's guarantees, written by hand: the approved call
    runs as an at-most-once `effect` (recorded before and after), and the question carries the
    same answer schema (approve / reject / edit with the tool's arguments / respond), checked
    before the answer is recorded. That is "a plain graph of the same shape" of the overhead
    row; without ``effects`` it is the bare minimum, for reference.
    """
    script = approval_script()
    bodies: dict[str, Callable[..., Any]] = {
        t.name: t.fn for t in assistant_tools(entries, tool_bytes=0)
    }

    async def model(s: PlainState) -> dict[str, Any]:
        reply = script[sum(1 for m in s["messages"] if m["role"] == "assistant")]
        calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.calls]
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if calls:
            message["tool_calls"] = calls
        return {"messages": [message]}

    async def tools(s: PlainState) -> dict[str, Any]:
        out = []
        for c in s["messages"][-1]["tool_calls"]:
            if c["name"] == GATED_TOOL:
                answer = interrupt(approval_question(c), schema=ANSWER if effects else None)
                if answer != APPROVE:
                    out.append({"role": "tool", "tool_call_id": c["id"], "content": "rejected"})
                    continue
            body = bodies[c["name"]]
            if effects and c["name"] == GATED_TOOL:
                content = await effect(f"tool:{c['name']}", body, **c["arguments"])
            else:
                content = await body(**c["arguments"])
            out.append({"role": "tool", "tool_call_id": c["id"], "content": content})
        return {"messages": out}

    def route(s: PlainState) -> str:
        return "tools" if s["messages"][-1].get("tool_calls") else END

    g = Graph(PlainState)
    g.add_node("model", model).add_node("tools", tools)
    g.add_edge(START, "model").add_conditional_edges("model", route)
    g.add_edge("tools", "model")
    return g


def _form(action: str, fields: dict[str, Any], *required: str) -> dict[str, Any]:
    return {
        "properties": {"action": {"const": action}, **fields},
        "required": ["action", *required],
        "additionalProperties": False,
    }


_COMMAND = {
    "type": "object",
    "properties": {"command": {"type": "string", "description": "The command line."}},
    "required": ["command"],
    "additionalProperties": False,
}
_FORMS = {
    "approve": _form("approve", {}),
    "reject": _form("reject", {"message": {"type": "string"}}),
    "edit": _form("edit", {"arguments": _COMMAND}, "arguments"),
    "respond": _form("respond", {"content": {"type": "string"}}, "content"),
}
ANSWER: dict[str, Any] = {
    "anyOf": [
        {
            "type": "object",
            "required": ["action"],
            "properties": {"action": {"enum": list(_FORMS)}},
            "allOf": [
                {"if": {"properties": {"action": {"const": n}}}, "then": f}
                for n, f in _FORMS.items()
            ],
        },
        {"type": "boolean"},
        {"enum": ["approve", "reject"]},
    ]
}
"""The answer schema a `ToolAgent` gives the gated ``execute`` call, written out by hand."""


def approval_question(c: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "tool_approval",
        "question": f"Allow assistant to call {c['name']}?",
        "tool": c["name"],
        "call_id": c["id"],
        "arguments": c["arguments"],
    }
