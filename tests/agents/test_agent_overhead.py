"""What a ToolAgent skips on its hot path, and that skipping it changes nothing a caller sees:
decisions read by their action, a reconcile text built only when asked, the conversation
read without copies, a named reply kept as it is."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from interlock import SqliteStore
from interlock.agents import (
    ApprovalPolicy,
    Approve,
    AssistantMessage,
    Edit,
    Reject,
    RemoveMessage,
    ScriptedModel,
    ToolAgent,
    ToolCall,
    ToolMessage,
    UserMessage,
    call,
    conversation,
    tool,
)
from interlock.agents._agent import ToolAgent as _ToolAgent
from interlock.agents._agent import _ReconcileInfo, route_tools
from interlock.agents._decisions import ToolDecision, parse_decision
from interlock.agents._messages import folded, folded_shown, shown_to_model
from interlock.runtime import Address, Segment

pytestmark = pytest.mark.anyio


# -- decisions ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        {"action": "approve"},
        {"action": "approve", "conversation": [{"type": "remove", "id": "m1"}]},
        {"action": "reject"},
        {"action": "reject", "message": "not today"},
        {"action": "edit", "arguments": {"command": "ls"}},
        {"action": "respond", "content": "it is 3"},
        {"action": "approve", "note": "extra keys are ignored, as before"},
    ],
)
def test_a_plain_json_decision_reads_as_the_union_reads_it(answer: dict[str, Any]) -> None:
    expected = msgspec.convert(answer, ToolDecision)  # the reading before the fast path
    got = parse_decision(answer)
    assert type(got) is type(expected) and got == expected


def test_plain_approvals_all_read_as_approve() -> None:
    for answer in ({"action": "approve"}, True, "approve", Approve()):
        assert parse_decision(answer) == Approve()
    for answer in (False, "reject"):
        assert isinstance(parse_decision(answer), Reject)
    typed = Edit(arguments={"command": "ls"})
    assert parse_decision(typed) is typed


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ({"action": "edit"}, "missing required field `arguments`"),
        ({"action": "respond", "content": 3}, "Expected `str`, got `int`"),
        ({"action": "bogus"}, "Invalid value 'bogus'"),
        ({"action": ["approve"]}, "Expected `str`, got `list`"),
        ({}, "missing required field `action`"),
        ("maybe", "is no tool decision"),
    ],
)
def test_an_answer_that_is_no_decision_is_refused_with_the_unions_reason(
    answer: Any, says: str
) -> None:
    with pytest.raises(ValueError, match="is no tool decision") as err:
        parse_decision(answer)
    assert says in str(err.value)


# -- the reconcile text ---------------------------------------------------------------------


def _agent(entries: Counter[str]) -> ToolAgent:
    @tool
    async def execute(command: str) -> str:
        """Run a shell command.

        Args:
            command: The command line.
        """
        entries["execute"] += 1
        return "exit 0"

    return ToolAgent(
        "ops",
        ScriptedModel([call("execute", {"command": "rm -rf /tmp/x"}, id="c1"), "done"]),
        [execute],
        policy=ApprovalPolicy({"execute": "require_approval"}),
    )


async def test_an_approved_call_that_records_its_outcome_never_builds_its_reconcile_text(
    tmp_path: Path,
    sqlite_files: Callable[[Path], SqliteStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[str] = []
    eager = _ToolAgent._reconcile_info

    def counted(self: ToolAgent, *args: Any) -> dict[str, Any]:
        built.append(args[1].id)
        return eager(self, *args)

    monkeypatch.setattr(_ToolAgent, "_reconcile_info", counted)
    entries: Counter[str] = Counter()
    app = _agent(entries).compile(store=sqlite_files(tmp_path / "agent.db"))
    asked = await app.run({"messages": ["clean up"]}, thread="t")
    done = await app.resume("t", {asked.interrupt().id: {"action": "approve"}})
    assert done.status == "done" and entries["execute"] == 1
    assert built == []  # the call ran once and its outcome was recorded: nobody read it


def test_the_reconcile_text_read_is_the_one_built_eagerly() -> None:
    agent = _agent(Counter())
    execute = agent.tools["execute"]
    served = ToolCall(id="c1", name="execute", arguments={"command": "ls -l"})
    where = Address((Segment("node", "tools"), Segment("agent", "ops"), Segment("tool", "x")))
    lazy = _ReconcileInfo(agent, execute, served, where)
    expected = agent._reconcile_info(execute, served, where)
    assert dict(lazy) == expected and len(lazy) == len(expected)
    assert lazy["address"] == "node:tools/agent:ops/tool:x"
    assert {**lazy}["question"].startswith('ops called execute({"command":"ls -l"}) (call c1)')
    with pytest.raises(KeyError):
        lazy["nothing"]


# -- the conversation, read without copies --------------------------------------------------


def test_the_agents_reads_see_what_conversation_and_shown_to_model_return() -> None:
    items: list[Any] = [
        UserMessage(content="hi", id="u1"),
        AssistantMessage(tool_calls=(ToolCall(id="c1", name="x", arguments={}),), id="a1"),
        UserMessage(content="never mind", id="u2"),  # c1 is left unanswered
    ]
    assert list(folded(items)) == conversation(items)
    assert list(folded_shown(items)) == shown_to_model(items)
    copy = conversation(items)
    copy.append(UserMessage(content="only in the copy"))
    assert len(folded(items)) == 3  # a caller's copy is its own
    items.append(RemoveMessage(id="u2"))  # an edit: folded whole again
    assert list(folded(items)) == conversation(items) == items[:2]


def test_route_tools_follows_the_growing_conversation() -> None:
    items: list[Any] = [UserMessage(content="hi", id="u1")]
    assert route_tools({"messages": items}) == "__end__"
    items.append(AssistantMessage(tool_calls=(ToolCall(id="c1", name="x", arguments={}),), id="a1"))
    assert route_tools({"messages": items}) == "tools"
    items.append(ToolMessage(content="ok", tool_call_id="c1", id="t1"))
    assert route_tools({"messages": items}) == "__end__"


# -- the model's reply --------------------------------------------------------------------


async def test_a_reply_with_a_name_and_an_id_is_kept_as_it_is() -> None:
    named = AssistantMessage(content="hello", name="ops", id="m1")
    agent = ToolAgent("ops", ScriptedModel([named, "bare"]))
    assert await agent.reply([UserMessage(content="hi")], []) is named
    bare = await agent.reply([UserMessage(content="hi"), named], [])
    assert bare.name == "ops" and bare.id and bare.content == "bare"
