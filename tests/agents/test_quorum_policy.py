"""Quorum rules: ``require_approval(approvals=N)`` makes a tool call wait for N distinct people.

Every approving form counts as one person's approval; a rejection or an answer in place of the
tool ends the call at once; an edit makes a new call that the quorum must approve again.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from _agents import Shell, last_tool_result, ops_agent

from interlock import InvalidResume, Store, verify_audit
from interlock.agents import (
    ApprovalPolicy,
    Approve,
    Edit,
    Message,
    Reject,
    Respond,
    Rule,
    Runner,
    ToolMessage,
    UserMessage,
    Verdict,
    allow,
    call,
    conversation,
    deny,
    matches,
    require_approval,
)
from interlock.agents._agent import AGENT_TYPES
from interlock.agents._policy import strictest
from interlock.serde import Codec

pytestmark = pytest.mark.anyio

RM = call("execute", {"command": "rm -rf /tmp/x"})

QUORUM = ApprovalPolicy(
    {
        "read_file": "allow",
        "execute": [
            deny("Never the root.", when=matches("command", r"rm\s+-rf\s+/$")),
            require_approval(when=matches("command", r"\bsudo\b"), approvals=3),
            require_approval(when=matches("command", r"\brm\b"), approvals=2),
            allow(),
        ],
    }
)


def ask(text: str) -> dict[str, Any]:
    return {"messages": [UserMessage(content=text)]}


def shown(result: Any) -> list[Message]:
    return conversation(result.values["messages"])


def answer_of(result: Any) -> tuple[str, str]:
    found = last_tool_result(shown(result))
    assert found is not None
    return found.content, found.status


# -- the policy -------------------------------------------------------------------------------


def test_a_quorum_rule_gives_a_verdict_that_carries_it() -> None:
    verdict = QUORUM.verdict("execute", {"command": "rm -rf /tmp/x"})
    assert (verdict.action, verdict.approvals) == ("require_approval", 2)
    assert verdict.rule == r"execute: require_approval by 2 when matches('command', '\\brm\\b')"
    assert QUORUM.verdict("execute", {"command": "sudo rm x"}).approvals == 3
    assert QUORUM.verdict("execute", {"command": "ls"}).approvals == 1
    named = ApprovalPolicy({"x": require_approval(approvals=2, name="two people")})
    assert named.verdict("x", {}).rule == "two people"


def test_a_callable_rule_may_ask_for_a_quorum() -> None:
    policy = ApprovalPolicy({"pay": lambda a: require_approval(approvals=1 + (a["eur"] > 100))})
    assert policy.verdict("pay", {"eur": 500}).approvals == 2
    assert policy.verdict("pay", {"eur": 5}).approvals == 1


def test_the_strictest_verdict_is_the_largest_quorum_and_deny_still_wins() -> None:
    one = Verdict(action="require_approval", rule="a")
    three = Verdict(action="require_approval", rule="b", approvals=3)
    no = Verdict(action="deny", rule="c")
    assert strictest([one, three]) is three
    assert strictest([three, one]) is three
    assert strictest([three, no]) is no


def test_failing_closed_asks_for_the_largest_quorum_the_rules_could_have_asked() -> None:
    def broken(arguments: dict[str, Any]) -> bool:
        raise RuntimeError("cannot read")

    policy = ApprovalPolicy(
        {"x": [deny(when=broken), require_approval(approvals=4, when=matches("a", "b"))]}
    )
    verdict = policy.verdict("x", {})
    assert (verdict.action, verdict.approvals) == ("require_approval", 4)
    assert "fail closed" in verdict.rule

    def broken_rule(arguments: dict[str, Any]) -> Rule | None:
        raise RuntimeError("cannot decide")

    dynamic = ApprovalPolicy({"x": broken_rule}, default=require_approval(approvals=2))
    assert dynamic.verdict("x", {}).approvals == 2


@pytest.mark.parametrize(
    ("build", "error"),
    [
        (lambda: require_approval(approvals=0), ValueError),
        (lambda: require_approval(approvals="2"), TypeError),  # type: ignore[arg-type]
        (lambda: require_approval(approvals=True), TypeError),
        (lambda: Rule("allow", approvals=2), ValueError),
        (lambda: Rule("deny", approvals=3), ValueError),
    ],
)
def test_a_bad_quorum_is_refused_when_the_rule_is_built(build: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="approvals"):
        build()


def test_a_verdict_with_a_quorum_round_trips_and_an_old_one_reads_as_one() -> None:
    codec = Codec()
    for t in AGENT_TYPES:
        codec.register(t)
    verdict = Verdict(action="require_approval", rule="r", approvals=3)
    assert codec.decode(codec.encode(verdict)) == verdict
    plain = Verdict(action="require_approval", rule="r")
    assert codec.decode(codec.encode(plain)).approvals == 1
    assert len(codec.encode(plain)) < len(codec.encode(verdict))  # 1 is not written


# -- the agent --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "forms",
    [
        (Approve(), {"action": "approve"}),
        (True, "approve"),
        ({"action": "approve"}, Approve()),
    ],
    ids=["typed-plain", "bool-word", "plain-typed"],
)
async def test_the_tool_runs_once_only_after_two_distinct_approvals(
    store: Store, forms: tuple[Any, Any]
) -> None:
    shell = Shell()
    agent, model = ops_agent(shell, RM, policy=QUORUM)
    app = agent.compile(store=store)
    first = await app.run(ask("clean up"), thread="t")
    question = first.interrupt()
    assert (question.approvals, question.approved_by) == (2, ())

    (vote,) = await app.decide("t", {question.id: forms[0]}, actor="alice")
    assert not vote.final and vote.approved_by == ("alice",)
    still = await app.get_state("t")  # nothing to run yet: the call waits on its quorum
    assert still.status == "interrupted" and still.interrupts[0].approved_by == ("alice",)
    assert shell.entered == {} and len(model.requests) == 1
    (shown_,) = await app.inbox(tool="execute")
    assert (shown_.approvals, shown_.approved_by) == (2, ("alice",))

    done = await app.resume("t", {question.id: forms[1]}, actor="bob")
    assert done.status == "done" and shell.commands == ["rm -rf /tmp/x"]
    assert shell.entered == {"execute": 1} and len(model.requests) == 2
    assert answer_of(done) == ("ran: rm -rf /tmp/x", "ok")
    entries = [(e.kind, e.actor) for e in await store.audit_log(thread="t")]
    assert [e for e in entries if e[0] in ("approval", "decision")] == [
        ("approval", "alice"),
        ("approval", "bob"),
        ("decision", "bob"),
    ]
    assert (await verify_audit(store)).ok


async def test_the_same_person_approving_twice_is_one_approval(store: Store) -> None:
    shell = Shell()
    agent, _ = ops_agent(shell, RM, policy=QUORUM)
    app = agent.compile(store=store)
    question = (await app.run(ask("clean up"), thread="t")).interrupt()
    await app.resume("t", {question.id: Approve()}, actor="alice")
    with pytest.raises(InvalidResume, match="'alice' already approved"):
        await app.resume("t", {question.id: True}, actor="alice")
    with pytest.raises(InvalidResume, match="actor="):
        await app.resume("t", {question.id: True})
    assert shell.entered == {}
    (waiting,) = await app.inbox()
    assert waiting.approved_by == ("alice",)


@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        (Reject(message="Not on a Friday."), ("Not on a Friday.", "rejected")),
        ({"action": "reject"}, ("The user rejected this tool call.", "rejected")),
        (False, ("The user rejected this tool call.", "rejected")),
        (Respond(content="already clean"), ("already clean", "responded")),
    ],
    ids=["reject", "plain-reject", "false", "respond"],
)
async def test_a_rejection_or_an_answer_ends_the_call_at_once(
    store: Store, decision: Any, expected: tuple[str, str]
) -> None:
    shell = Shell()
    agent, _ = ops_agent(shell, RM, policy=QUORUM)
    app = agent.compile(store=store)
    question = (await app.run(ask("clean up"), thread="t")).interrupt()
    await app.resume("t", {question.id: Approve()}, actor="alice")
    done = await app.resume("t", {question.id: decision}, actor="bob")
    assert done.status == "done" and shell.entered == {}
    assert answer_of(done) == expected


async def test_an_approval_cannot_carry_conversation_edits_to_a_quorum(store: Store) -> None:
    shell = Shell()
    agent, _ = ops_agent(shell, RM, policy=QUORUM)
    app = agent.compile(store=store)
    first = await app.run({"messages": [UserMessage(content="clean up", id="u1")]}, thread="t")
    question = first.interrupt()
    edit = {"type": "replace", "id": "u1", "message": {"role": "user", "content": "clean /tmp"}}
    head = (await app.get_state("t")).checkpoint_id
    # A vote could not apply them, and the last approval must be a vote like the others.
    for bad in (
        {"action": "approve", "conversation": [edit]},
        {"action": "approve", "conversation": []},
    ):
        with pytest.raises(InvalidResume, match="conversation"):
            await app.decide("t", {question.id: bad}, actor="alice")
    assert (await app.get_state("t")).checkpoint_id == head
    # A rejection still may: it ends the call, and the edit is applied with its answer.
    rejected = {"action": "reject", "conversation": [edit]}
    done = await app.resume("t", {question.id: rejected}, actor="alice")
    assert shown(done)[0].content == "clean /tmp" and shell.entered == {}


async def test_an_edit_is_a_new_question_for_the_same_quorum(store: Store) -> None:
    shell = Shell()
    agent, _ = ops_agent(shell, RM, policy=QUORUM)
    app = agent.compile(store=store)
    first = (await app.run(ask("clean up"), thread="t")).interrupt()
    await app.decide("t", {first.id: Approve()}, actor="alice")

    # One person's edit does not run the call: the edited call is asked again, anew.
    edited = Edit(arguments={"command": "rm -rf /tmp/x/cache"})
    (decision,) = await app.decide("t", {first.id: edited}, actor="bob")
    assert decision.final and decision.details["after"] == {"command": "rm -rf /tmp/x/cache"}
    again = await app.resume("t")
    assert again.status == "interrupted" and shell.entered == {}
    second = again.interrupt()
    assert second.id != first.id
    assert (second.approvals, second.approved_by) == (2, ())  # alice's approval does not count
    assert second.info["arguments"] == {"command": "rm -rf /tmp/x/cache"}
    assert second.info["edited_from"] == {"command": "rm -rf /tmp/x"}
    assert second.info["call_id"] == first.info["call_id"]

    # Bob, who edited, is one approver of his edit; it takes one more.
    await app.resume("t", {second.id: True}, actor="bob")
    assert shell.entered == {}
    done = await app.resume("t", {second.id: True}, actor="alice")
    assert done.status == "done" and shell.commands == ["rm -rf /tmp/x/cache"]
    assert answer_of(done) == ("ran: rm -rf /tmp/x/cache", "ok")
    kinds = [(e.kind, e.actor) for e in await store.audit_log(thread="t")]
    assert [k for k in kinds if k[0] != "effect_started" and k[0] != "effect_done"] == [
        ("interrupt", None),
        ("approval", "alice"),
        ("decision", "bob"),
        ("interrupt", None),
        ("approval", "bob"),
        ("approval", "alice"),
        ("decision", "alice"),
    ]


async def test_an_edit_asks_for_the_larger_quorum_the_edited_call_needs(store: Store) -> None:
    shell = Shell()
    agent, _ = ops_agent(shell, RM, policy=QUORUM)
    app = agent.compile(store=store)
    first = (await app.run(ask("clean up"), thread="t")).interrupt()
    await app.decide("t", {first.id: Edit(arguments={"command": "sudo rm x"})}, actor="bob")
    second = (await app.resume("t")).interrupt()
    assert second.approvals == 3
    assert second.info["rule"].startswith("execute: require_approval by 3")

    # An edit to what the policy would allow is still an edit of a quorum call: asked again.
    third_edit = Edit(arguments={"command": "ls /tmp/x"})
    await app.decide("t", {second.id: third_edit}, actor="carl")
    third = (await app.resume("t")).interrupt()
    assert third.approvals == 3 and shell.entered == {}
    for actor in ("ana", "ben", "cid"):
        result = await app.resume("t", {third.id: Approve()}, actor=actor)
    assert result.status == "done" and shell.commands == ["ls /tmp/x"]


async def test_an_edit_into_a_quorum_rule_is_asked_again_with_that_quorum(store: Store) -> None:
    shell = Shell()
    policy = ApprovalPolicy(
        {
            "execute": [
                require_approval(when=matches("command", r"\bsudo\b"), approvals=2),
                require_approval(),
            ]
        }
    )
    agent, _ = ops_agent(shell, call("execute", {"command": "ls"}), policy=policy)
    app = agent.compile(store=store)
    first = (await app.run(ask("x"), thread="t")).interrupt()
    assert first.approvals == 1
    edited = Edit(arguments={"command": "sudo ls"})
    second = (await app.resume("t", {first.id: edited}, actor="mallory")).interrupt()
    assert (second.approvals, second.info["arguments"]) == (2, {"command": "sudo ls"})
    assert shell.entered == {}
    await app.resume("t", {second.id: True}, actor="mallory")
    done = await app.resume("t", {second.id: True}, actor="trent")
    assert done.status == "done" and shell.commands == ["sudo ls"]
    # An edit the policy still gives one approval is that person's approval, as before.
    first = (await app.run(ask("x"), thread="u")).interrupt()
    done = await app.resume("u", {first.id: Edit(arguments={"command": "pwd"})}, actor="ana")
    assert done.status == "done" and shell.commands == ["sudo ls", "pwd"]


async def test_an_edit_of_a_quorum_call_cannot_get_past_a_deny_rule(store: Store) -> None:
    shell = Shell()
    agent, _ = ops_agent(shell, RM, policy=QUORUM)
    app = agent.compile(store=store)
    first = (await app.run(ask("clean up"), thread="t")).interrupt()
    done = await app.resume("t", {first.id: Edit(arguments={"command": "rm -rf /"})}, actor="b")
    assert done.status == "done" and shell.entered == {}
    assert answer_of(done) == ("The edited call is refused: Never the root.", "denied")


async def test_a_quorum_call_keeps_its_votes_while_a_parallel_call_runs(store: Store) -> None:
    shell = Shell()
    policy = ApprovalPolicy(
        {"execute": require_approval(approvals=2), "read_file": "require_approval"}
    )
    agent, _ = ops_agent(shell, [RM, call("read_file", {"path": "/a"})], policy=policy)
    app = agent.compile(store=store)
    quorum, plain = (await app.run(ask("x"), thread="t")).interrupts
    assert (quorum.approvals, plain.approvals) == (2, 1)
    await app.decide("t", {quorum.id: Approve()}, actor="alice")
    after = await app.resume("t", {plain.id: Approve()}, actor="carl")
    assert shell.entered == {"read_file": 1}
    assert after.interrupt().id == quorum.id and after.interrupt().approved_by == ("alice",)
    done = await app.resume("t", {quorum.id: Approve()}, actor="bob")
    assert done.status == "done" and shell.entered == {"read_file": 1, "execute": 1}
    results = [m for m in shown(done) if isinstance(m, ToolMessage)]
    assert sorted(r.status for r in results) == ["ok", "ok"]


async def test_an_outer_quorum_policy_covers_the_agents_tools(store: Store) -> None:
    shell = Shell()
    agent, _ = ops_agent(shell, RM)  # its own policy asks one person for rm
    strict = agent.with_policy(ApprovalPolicy({"execute": require_approval(approvals=2)}))
    app = strict.compile(store=store)
    question = (await app.run(ask("x"), thread="t")).interrupt()
    assert question.approvals == 2


async def test_a_runner_passes_each_deciders_name(store: Store) -> None:
    shell = Shell()
    agent, _ = ops_agent(shell, RM, policy=QUORUM)
    runner = Runner(agent, store)
    started = await runner.invoke("clean up", session="s")
    (question,) = started.result.interrupts
    waiting = await runner.decide("s", {question.id: Approve()}, actor="alice")
    assert waiting.result.interrupt().approved_by == ("alice",) and shell.entered == {}
    done = await runner.decide("s", {question.id: Approve()}, actor="bob")
    assert done.result.status == "done" and shell.commands == ["rm -rf /tmp/x"]
    rows = [e for e in await store.audit_log(thread="s") if e.kind == "approval"]
    assert [json.loads(r.data)["answer"] for r in rows] == [{"action": "approve"}] * 2
