"""A remote A2A agent as a tool: its question reaches the local inbox, is decided once, and
continues the remote task (the remote is served by the official SDK, see ``_remote.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _remote import APPROVAL, QUESTION, REQUEST, Remote, local_agent, respond, serve_remote

from interlock import (
    App,
    Authority,
    InterruptAlreadyResolved,
    NotAuthorized,
    ToolError,
)
from interlock.a2a import remote_agent
from interlock.agents import (
    ApprovalPolicy,
    AssistantMessage,
    ScriptedModel,
    ToolAgent,
    ToolMessage,
    conversation,
)

pytestmark = pytest.mark.anyio

CALL = "node:tools/agent:ops/tool:deployer:call_0_0"
"""Where the local agent's call of the remote deployer lives."""


@pytest.fixture
def remote() -> Iterator[Remote]:
    with serve_remote() as running:
        yield running


def _last(values: dict[str, Any]) -> AssistantMessage:
    last = conversation(values["messages"])[-1]
    assert isinstance(last, AssistantMessage)
    return last


async def _asked(app: App[Any], remote: Remote, thread: str) -> str:
    """Start ``thread``; check the remote's question is in the inbox; return its id."""
    result = await app.run({"messages": [REQUEST]}, thread=thread)
    assert result.status == "interrupted"
    ((task, context, request),) = remote.deployer.created
    assert request == REQUEST
    (question,) = await app.inbox(thread=thread)
    assert [i.id for i in result.interrupts] == [question.id]
    # The full address: the local call, then the remote task it waits on.
    assert str(question.address) == f"{CALL}/a2a:{task}"
    info = question.info
    assert info["type"] == "a2a" and info["state"] == "auth-required"
    assert (info["agent"], info["url"], info["task"], info["context"]) == (
        "deployer",
        remote.url,
        task,
        context,
    )
    assert info["question"] == QUESTION and info["text"] == [QUESTION]
    assert info["data"] == [APPROVAL]  # the remote approval's tool and arguments, intact
    assert info["address"] == str(question.address)
    # The inbox files it under the remote agent's tool, as any question inside a tool call.
    assert [i.id for i in await app.inbox(tool="deployer")] == [question.id]
    return question.id


async def test_the_remote_question_is_decided_in_the_local_inbox_and_the_task_completes(
    remote: Remote, sqlite_files: Any, tmp_path: Path
) -> None:
    app = local_agent(remote.url).compile(store=sqlite_files(tmp_path / "local.db"))
    question = await _asked(app, remote, "t1")
    ((task, _, _),) = remote.deployer.created
    assert remote.deployer.answers == []  # nothing is sent before a person decides

    (decision,) = await app.decide("t1", {question: True}, actor="ana")
    assert decision.actor == "ana"
    with pytest.raises(InterruptAlreadyResolved):  # decided once
        await app.decide("t1", {question: False}, actor="ben")
    done = await app.resume("t1")

    assert done.status == "done"
    assert _last(done.values).content == "Remote says: deployed web to prod"
    # One task, continued by exactly one answer: the person's.
    assert len(remote.deployer.created) == 1
    assert remote.deployer.answers == [(task, [], [True])]
    assert await app.inbox(thread="t1") == []


async def test_a_second_remote_question_is_a_new_question_at_the_same_task(
    sqlite_files: Any, tmp_path: Path
) -> None:
    with serve_remote(ask_version=True) as remote:
        app = local_agent(remote.url).compile(store=sqlite_files(tmp_path / "local.db"))
        first = await _asked(app, remote, "t7")
        ((task, _, _),) = remote.deployer.created
        again = await app.resume("t7", {first: True}, actor="ana")
        (second,) = again.interrupts
        assert second.id != first
        assert str(second.address) == f"{CALL}/a2a:{task}"
        assert second.info["state"] == "input-required"
        assert second.info["question"] == "Which version?" and second.info["data"] == []
        done = await app.resume("t7", {second.id: "v42"}, actor="ben")
    assert _last(done.values).content == "Remote says: deployed web v42 to prod"
    # Each answer sent once, in order, to the one task.
    assert remote.deployer.answers == [(task, [], [True]), (task, ["v42"], [])]
    assert len(remote.deployer.created) == 1


async def test_a_rejected_remote_task_is_a_tool_error_the_model_reads(
    remote: Remote, sqlite_files: Any, tmp_path: Path
) -> None:
    app = local_agent(remote.url).compile(store=sqlite_files(tmp_path / "local.db"))
    question = await _asked(app, remote, "t2")
    ((task, _, _),) = remote.deployer.created

    done = await app.resume("t2", {question: "not on a Friday"}, actor="ana")

    assert remote.deployer.answers == [(task, ["not on a Friday"], [])]  # sent as text
    tool_message = conversation(done.values["messages"])[-2]
    assert isinstance(tool_message, ToolMessage) and tool_message.status == "error"
    assert tool_message.content == (
        f"Error: RemoteTaskFailed: the remote agent 'deployer' ({remote.url}) ended task {task} "
        "rejected: refused: not on a Friday"
    )
    assert _last(done.values).content.startswith("Remote says: Error: RemoteTaskFailed")


async def test_a_failed_remote_task_raises_for_an_agent_told_to_raise(
    remote: Remote, sqlite_files: Any, tmp_path: Path
) -> None:
    agent = ToolAgent(
        "ops",
        ScriptedModel(respond),
        [remote_agent("deployer", remote.url, poll_interval=0.05)],
        tool_errors="raise",
    )
    app = agent.compile(store=sqlite_files(tmp_path / "local.db"))
    question = await _asked(app, remote, "t3")
    with pytest.raises(ToolError) as raised:
        await app.resume("t3", {question: {"approved": False}}, actor="ana")
    ((task, _, _),) = remote.deployer.created
    assert remote.deployer.answers == [(task, [], [{"approved": False}])]  # sent as data
    assert str(raised.value) == (
        f"tool 'deployer' of agent 'ops' failed: Error: RemoteTaskFailed: the remote agent "
        f"'deployer' ({remote.url}) ended task {task} rejected: refused: no reason given"
    )


async def test_only_the_authority_given_may_answer_the_remote_question(
    remote: Remote, sqlite_files: Any, tmp_path: Path
) -> None:
    app = local_agent(remote.url, authority=Authority(principals=("ana",))).compile(
        store=sqlite_files(tmp_path / "local.db")
    )
    question = await _asked(app, remote, "t4")
    with pytest.raises(NotAuthorized):
        await app.decide("t4", {question: True}, actor="ben")
    assert remote.deployer.answers == []  # a refused decider sends nothing
    done = await app.resume("t4", {question: "approve"}, actor="ana")
    assert _last(done.values).content == "Remote says: deployed web to prod"


async def test_the_call_is_under_the_local_policy_before_anything_is_sent(
    remote: Remote, sqlite_files: Any, tmp_path: Path
) -> None:
    policy = ApprovalPolicy({"deployer": "require_approval"})
    app = local_agent(remote.url, policy=policy).compile(store=sqlite_files(tmp_path / "l.db"))
    asked = await app.run({"messages": [REQUEST]}, thread="t5")
    (gate,) = asked.interrupts
    assert str(gate.address) == CALL and gate.info["tool"] == "deployer"
    assert remote.deployer.created == []  # the remote hears nothing until the call is approved

    again = await app.resume("t5", {gate.id: {"action": "approve"}}, actor="ana")
    ((task, _, _),) = remote.deployer.created
    (question,) = again.interrupts
    assert str(question.address) == f"{CALL}/a2a:{task}"
    done = await app.resume("t5", {question.id: True}, actor="ana")
    assert _last(done.values).content == "Remote says: deployed web to prod"
    assert len(remote.deployer.created) == 1


async def test_an_unreachable_remote_is_an_error_saying_what_to_do(
    sqlite_files: Any, tmp_path: Path
) -> None:
    with serve_remote() as stopped:
        url = stopped.url  # a loopback port nothing listens on once it stopped
    app = local_agent(url, unreachable_after=0.2).compile(store=sqlite_files(tmp_path / "l.db"))
    done = await app.run({"messages": [REQUEST]}, thread="t6")
    tool_message = conversation(done.values["messages"])[-2]
    assert isinstance(tool_message, ToolMessage) and tool_message.status == "error"
    assert tool_message.content.startswith(
        f"Error: RemoteAgentUnreachable: the remote agent 'deployer' at {url} could not be "
        "reached for 0.2 s"
    )
    assert tool_message.content.endswith(
        "check that it runs and the URL is right, then call it again"
    )


def test_remote_agent_refuses_bad_settings() -> None:
    with pytest.raises(ValueError, match="http:// or https://"):
        remote_agent("deployer", "deployer.example")
    with pytest.raises(ValueError, match="poll_interval"):
        remote_agent("deployer", "http://127.0.0.1:1", poll_interval=0)
    with pytest.raises(ValueError, match="tool name"):
        remote_agent("the deployer", "http://127.0.0.1:1")
