"""Who may approve a tool call: ``require_approval(authority=...)``, checked by the runtime.

The rule's `Authority` is stored with the question; `App.decide` refuses anyone outside it,
and an edit into arguments a rule with another authority covers is asked again under it.
"""

from __future__ import annotations

from typing import Any

import pytest
from _agents import Shell, ops_agent

from interlock import Authority, NotAuthorized, Principal, Store
from interlock.agents import (
    ApprovalPolicy,
    Approve,
    Edit,
    Rule,
    ScriptedModel,
    ToolAgent,
    ToolMessage,
    UserMessage,
    Verdict,
    call,
    matches,
    require_approval,
)
from interlock.agents._agent import AGENT_TYPES
from interlock.serde import Codec

pytestmark = pytest.mark.anyio

SRE = Authority(groups=("sre",), not_starter=True)
FINANCE = Authority(groups=("finance",))


def ask(text: str) -> dict[str, Any]:
    return {"messages": [UserMessage(content=text)]}


def _policy() -> ApprovalPolicy:
    return ApprovalPolicy(
        {
            "execute": [
                require_approval(when=matches("command", r"\bdeploy\b"), authority=SRE),
                require_approval(when=matches("command", r"\bpay\b"), authority=FINANCE),
                require_approval(),
            ]
        }
    )


def test_a_rule_carries_its_authority_into_the_verdict_and_checkpoints() -> None:
    verdict = _policy().verdict("execute", {"command": "deploy prod"})
    assert verdict.authority == SRE
    codec = Codec(types=AGENT_TYPES)
    assert codec.decode(codec.encode(verdict)) == verdict
    old = Verdict(action="require_approval", rule="execute: require_approval")
    assert codec.decode(codec.encode(old)).authority is None
    with pytest.raises(ValueError, match="require_approval"):
        Rule("deny", authority=SRE)


async def test_only_the_named_group_approves_the_call(store: Store) -> None:
    shell = Shell()
    agent, _ = ops_agent(shell, call("execute", {"command": "deploy prod"}), policy=_policy())
    app = agent.compile(store=store)
    question = (
        await app.run(ask("ship it"), thread="t", metadata={"started_by": "sam"})
    ).interrupt()
    assert question.authority == SRE
    for outsider in ("dev", Principal(name="sam", groups=("sre",))):
        with pytest.raises(NotAuthorized):
            await app.resume("t", {question.id: Approve()}, actor=outsider)
    assert shell.commands == []
    done = await app.resume(
        "t", {question.id: Approve()}, actor=Principal(name="sue", groups=("sre",))
    )
    assert done.status == "done" and shell.commands == ["deploy prod"]


async def test_an_edit_into_another_authority_is_asked_again_under_it(store: Store) -> None:
    shell = Shell()
    agent, _ = ops_agent(shell, call("execute", {"command": "ls"}), policy=_policy())
    app = agent.compile(store=store)
    first = (await app.run(ask("x"), thread="t")).interrupt()
    assert first.authority is None
    # Anyone may approve `ls`; an edit into `pay` is not theirs to approve.
    second = (
        await app.resume("t", {first.id: Edit(arguments={"command": "pay 9000"})}, actor="mallory")
    ).interrupt()
    assert second.authority == FINANCE and second.info["arguments"] == {"command": "pay 9000"}
    assert shell.commands == []
    with pytest.raises(NotAuthorized):
        await app.resume("t", {second.id: Approve()}, actor="mallory")
    done = await app.resume(
        "t", {second.id: Approve()}, actor=Principal(name="fay", groups=("finance",))
    )
    assert done.status == "done" and shell.commands == ["pay 9000"]


async def test_who_approved_a_tool_call_may_be_kept_from_the_next_one(store: Store) -> None:
    shell = Shell()
    policy = ApprovalPolicy({"execute": require_approval(authority=Authority(not_approvers=True))})

    def script(messages: Any, tools: Any) -> Any:
        done = sum(isinstance(m, ToolMessage) for m in messages)
        steps = [call("execute", {"command": "ls"}), call("execute", {"command": "rm x"})]
        return steps[done] if done < len(steps) else "done"

    agent = ToolAgent("ops", ScriptedModel(script), shell.tools, policy=policy)
    app = agent.compile(store=store)
    first = (await app.run(ask("x"), thread="t")).interrupt()
    second = (await app.resume("t", {first.id: Approve()}, actor="bob")).interrupt()
    with pytest.raises(NotAuthorized) as refused:
        await app.resume("t", {second.id: Approve()}, actor="Bob")
    assert refused.value.rule == "approver"
    done = await app.resume("t", {second.id: Approve()}, actor="carol")
    assert done.status == "done" and shell.commands == ["ls", "rm x"]
