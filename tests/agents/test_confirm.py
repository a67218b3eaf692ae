"""A confirmation step before a risky approval: ``require_approval(confirm=True)``.

The rule's ``confirm`` goes into the question a person is shown (``"confirm": true``, part of
its payload hash), where each surface of the approval server asks for the extra step. An edit
into arguments a confirming rule covers is asked again, so the step cannot be skipped by
editing a harmless call into a dangerous one.
"""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from _agents import Shell, ops_agent

from interlock import END, START, Graph, Store, approve
from interlock.agents import (
    ApprovalPolicy,
    Approve,
    Edit,
    Rule,
    UserMessage,
    Verdict,
    call,
    matches,
    require_approval,
)
from interlock.agents._agent import AGENT_TYPES
from interlock.agents._policy import strictest
from interlock.runtime import needs_confirmation
from interlock.serde import Codec

pytestmark = pytest.mark.anyio


class Dropped(TypedDict, total=False):
    ok: bool


def ask(text: str) -> dict[str, Any]:
    return {"messages": [UserMessage(content=text)]}


def _policy() -> ApprovalPolicy:
    return ApprovalPolicy(
        {
            "execute": [
                require_approval(when=matches("command", r"\brm\b"), confirm=True),
                require_approval(),
            ]
        }
    )


def test_the_rule_carries_confirm_into_its_verdict_and_checkpoints() -> None:
    risky = _policy().verdict("execute", {"command": "rm -rf /tmp/x"})
    plain = _policy().verdict("execute", {"command": "ls"})
    assert risky.confirm and not plain.confirm
    codec = Codec(types=AGENT_TYPES)
    assert codec.decode(codec.encode(risky)) == risky
    # A verdict stored before the field existed reads as not confirming.
    old = codec.encode(Verdict(action="require_approval", rule="r"))
    assert codec.decode(old).confirm is False


def test_confirm_is_refused_where_it_means_nothing() -> None:
    with pytest.raises(ValueError, match="require_approval"):
        Rule("allow", confirm=True)
    with pytest.raises(ValueError, match="require_approval"):
        Rule("deny", confirm=True)
    with pytest.raises(TypeError, match="True or False"):
        Rule("require_approval", confirm="yes")  # type: ignore[arg-type]


def test_the_strictest_of_several_policies_keeps_a_confirmation() -> None:
    two = Verdict(action="require_approval", rule="a", approvals=2)
    confirming = Verdict(action="require_approval", rule="b", confirm=True)
    chosen = strictest([two, confirming])
    assert chosen.approvals == 2 and chosen.confirm
    denied = Verdict(action="deny", rule="c")
    assert not strictest([denied, confirming]).confirm


def test_a_policy_that_fails_closed_asks_for_the_confirmation_its_rules_might() -> None:
    def broken(arguments: dict[str, Any]) -> bool:
        raise RuntimeError("no")

    policy = ApprovalPolicy(
        {"execute": [require_approval(when=broken), require_approval(confirm=True)]}
    )
    verdict = policy.verdict("execute", {"command": "ls"})
    assert verdict.action == "require_approval" and "fail closed" in verdict.rule
    assert verdict.confirm


async def test_the_question_asks_for_confirmation_only_under_a_confirming_rule(
    store: Store,
) -> None:
    shell = Shell()
    agent, _ = ops_agent(shell, call("execute", {"command": "rm -rf /tmp/x"}), policy=_policy())
    app = agent.compile(store=store)
    risky = (await app.run(ask("clean"), thread="risky")).interrupt()
    assert risky.info["confirm"] is True
    shell2 = Shell()
    agent2, _ = ops_agent(shell2, call("execute", {"command": "ls"}), policy=_policy())
    app2 = agent2.compile(store=store)
    plain = (await app2.run(ask("list"), thread="plain")).interrupt()
    assert "confirm" not in plain.info
    # The runtime records what it is given; the step is the surfaces' to show.
    done = await app.resume("risky", {risky.id: Approve()}, actor="ana")
    assert done.status == "done" and shell.commands == ["rm -rf /tmp/x"]


async def test_an_edit_into_a_confirming_rule_is_asked_again(store: Store) -> None:
    shell = Shell()
    agent, _ = ops_agent(shell, call("execute", {"command": "ls"}), policy=_policy())
    app = agent.compile(store=store)
    first = (await app.run(ask("x"), thread="t")).interrupt()
    assert "confirm" not in first.info
    edited = {"command": "rm -rf /"}
    second = (
        await app.resume("t", {first.id: Edit(arguments=edited)}, actor="mallory")
    ).interrupt()
    assert second.info["confirm"] is True and second.info["arguments"] == edited
    assert shell.commands == []


def test_which_answers_need_the_step() -> None:
    info = {"type": "tool_approval", "confirm": True}
    for answer in (True, "approve", " YES ", "ok", {"action": "approve"}, {"action": "edit"}):
        assert needs_confirmation(info, answer), answer
    for answer in (False, "reject", {"action": "reject"}, {"action": "respond"}, None, 1):
        assert not needs_confirmation(info, answer), answer
    for unasked in ({"type": "tool_approval"}, {"confirm": "true"}, "confirm", None):
        assert not needs_confirmation(unasked, True)


async def test_approve_can_ask_for_confirmation(store: Store) -> None:
    def review(state: Dropped) -> Dropped:
        return {"ok": approve("Drop the table?", confirm=True)}

    g = Graph(Dropped, name="drop")
    g.add_node("review", review).add_edge(START, "review").add_edge("review", END)
    app = g.compile(store=store)
    question = (await app.run({}, thread="d")).interrupt()
    assert question.info["confirm"] is True
    assert needs_confirmation(question.info, "yes")
