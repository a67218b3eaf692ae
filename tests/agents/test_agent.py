"""ToolAgent: model ⇄ tools under an approval policy, counted by tool and model entries."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, get_args

import anyio
import anyio.lowlevel
import msgspec
import pytest
from _agents import SHELL_POLICY, Shell, last_tool_result, ops_agent, replies_to_tool_results
from llmock.pytest_plugin import LLMock
from llmock.scenarios import Reply

from interlock import (
    Codec,
    InvalidResume,
    MemoryStore,
    ModelError,
    ReplyCutShort,
    SqliteStore,
    Store,
    ToolError,
)
from interlock.agents import (
    AgentState,
    ApprovalPolicy,
    Approve,
    AssistantMessage,
    Edit,
    FinishReason,
    Message,
    Reject,
    Respond,
    ScriptedModel,
    ToolAgent,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
    call,
    conversation,
    deny,
    matches,
    tool,
)
from interlock.agents._agent import AGENT_TYPES
from interlock.agents._openai import OpenAIChatModel
from interlock.runtime._app import App

pytestmark = pytest.mark.anyio

RM = call("execute", {"command": "rm -rf /tmp/x"})
LS = call("execute", {"command": "ls"})


def ask(text: str) -> dict[str, Any]:
    return {"messages": [UserMessage(content=text)]}


def shown(result: Any) -> list[Message]:
    return conversation(result.values["messages"])


async def test_an_allowed_call_runs_and_the_model_answers(store: Store) -> None:
    shell = Shell()
    agent, model = ops_agent(shell, LS)
    result = await agent.compile(store=store).run(ask("list"), thread="t")
    assert result.status == "done"
    assert shell.entered == {"execute": 1} and shell.commands == ["ls"]
    assert len(model.requests) == 2
    assert shown(result)[-1] == AssistantMessage(
        content="done: ran: ls", name="ops", id=shown(result)[-1].id
    )
    # The model was offered both tools, with their schemas.
    assert model.requests[0].tool_names == ("execute", "read_file")


async def test_a_gated_call_stops_the_run_with_a_question_a_person_can_act_on(
    store: Store,
) -> None:
    shell = Shell()
    agent, _model = ops_agent(shell, RM)
    app = agent.compile(store=store)
    result = await app.run(ask("clean up"), thread="t")
    assert result.status == "interrupted" and shell.entered == {}
    (question,) = result.interrupts
    call_id = shown(result)[-1].tool_calls[0].id  # type: ignore[union-attr]
    assert str(question.address) == f"node:tools/agent:ops/tool:execute:{call_id}"
    info = question.info
    assert info["type"] == "tool_approval"
    assert (info["tool"], info["call_id"], info["agent"]) == ("execute", call_id, "ops")
    assert info["arguments"] == {"command": "rm -rf /tmp/x"}
    assert info["rule"] == "execute: require_approval when matches('command', '\\\\brm\\\\b')"
    assert info["schema"] == shell.execute.parameters
    assert info["address"] == str(question.address)
    # It is in the inbox of the store, durable.
    assert [i.id for i in await app.inbox()] == [question.id]


async def test_approve_runs_the_stored_arguments_and_never_asks_the_model_again(
    store: Store,
) -> None:
    shell = Shell()
    agent, model = ops_agent(shell, RM)
    app = agent.compile(store=store)
    first = await app.run(ask("clean up"), thread="t")
    before = len(model.requests)
    done = await app.resume("t", {first.interrupts[0].id: Approve()})
    assert done.status == "done"
    assert shell.commands == ["rm -rf /tmp/x"]  # exactly what the person was shown
    assert len(model.requests) == before + 1  # only the answer after the tool result
    assert shown(done)[-1].content == "done: ran: rm -rf /tmp/x"  # type: ignore[union-attr]


@pytest.mark.parametrize("form", ["typed", "json"])
async def test_reject_tells_the_model_which_carries_on(store: Store, form: str) -> None:
    shell = Shell()
    agent, model = ops_agent(shell, RM)
    app = agent.compile(store=store)
    first = await app.run(ask("clean up"), thread="t")
    decision: Any = (
        Reject(message="not on prod")
        if form == "typed"
        else {
            "action": "reject",
            "message": "not on prod",
        }
    )
    done = await app.resume("t", {first.interrupts[0].id: decision})
    assert done.status == "done" and shell.entered == {}
    result = last_tool_result(shown(done))
    assert result is not None and (result.content, result.status) == ("not on prod", "rejected")
    assert shown(done)[-1].content == "done: not on prod"  # type: ignore[union-attr]
    assert model.requests[-1].messages[-1] == result  # the model saw the reason


async def test_bare_answers_approve_and_reject() -> None:
    for answer, entered in ((True, 1), ("approve", 1), (False, 0), ("reject", 0)):
        shell = Shell()
        agent, _ = ops_agent(shell, RM)
        app = agent.compile()
        first = await app.run(ask("x"), thread="t")
        await app.resume("t", {first.interrupts[0].id: answer})
        assert shell.entered["execute"] == entered, answer


async def test_edit_runs_the_edited_arguments_and_the_diff_is_audited(store: Store) -> None:
    shell = Shell()
    agent, _ = ops_agent(shell, RM)
    app = agent.compile(store=store)
    first = await app.run(ask("clean up"), thread="t")
    iid = first.interrupts[0].id
    done = await app.resume(
        "t", {iid: {"action": "edit", "arguments": {"command": "rm -rf /tmp/x/cache"}}}
    )
    assert done.status == "done" and shell.commands == ["rm -rf /tmp/x/cache"]
    (entry,) = [e for e in await store.audit_log(thread="t") if e.kind == "decision"]
    details = json.loads(entry.data)["details"]
    assert details == {
        "tool": "execute",
        "call_id": first.interrupts[0].info["call_id"],
        "before": {"command": "rm -rf /tmp/x"},
        "after": {"command": "rm -rf /tmp/x/cache"},
        "diff": [
            {
                "op": "replace",
                "path": "/command",
                "before": "rm -rf /tmp/x",
                "after": "rm -rf /tmp/x/cache",
            }
        ],
    }


@pytest.mark.parametrize(
    "bad",
    [
        Edit(arguments={"command": 7}),
        Edit(arguments={"cmd": "ls"}),
        {"action": "edit"},
        {"action": "explode"},
        "maybe",
        None,
    ],
    ids=["wrong-type", "unknown-field", "no-arguments", "no-such-action", "word", "none"],
)
async def test_a_bad_decision_changes_nothing(store: Store, bad: Any) -> None:
    shell = Shell()
    agent, _ = ops_agent(shell, RM)
    app = agent.compile(store=store)
    first = await app.run(ask("clean up"), thread="t")
    iid = first.interrupts[0].id
    head = (await app.get_state("t")).checkpoint_id
    with pytest.raises(InvalidResume):
        await app.resume("t", {iid: bad})
    assert (await app.get_state("t")).checkpoint_id == head
    assert [i.id for i in await app.inbox(thread="t")] == [iid]  # still answerable
    done = await app.resume("t", {iid: Approve()})
    assert done.status == "done" and shell.commands == ["rm -rf /tmp/x"]


async def test_respond_answers_in_place_of_the_tool(store: Store) -> None:
    shell = Shell()
    agent, _ = ops_agent(shell, RM)
    app = agent.compile(store=store)
    first = await app.run(ask("clean up"), thread="t")
    done = await app.resume("t", {first.interrupts[0].id: Respond(content="already clean")})
    assert shell.entered == {}
    result = last_tool_result(shown(done))
    assert result is not None and (result.content, result.status) == (
        "already clean",
        "responded",
    )


async def test_deny_answers_the_model_without_asking_anyone(store: Store) -> None:
    shell = Shell()
    policy = ApprovalPolicy({"execute": deny("Not here.")}, default="allow")
    agent, _ = ops_agent(shell, RM, policy=policy)
    done = await agent.compile(store=store).run(ask("x"), thread="t")
    assert done.status == "done" and done.interrupts == [] and shell.entered == {}
    result = last_tool_result(shown(done))
    assert result is not None and (result.content, result.status) == ("Not here.", "denied")


async def test_parallel_calls_gated_wait_and_ungated_run_once(store: Store) -> None:
    shell = Shell()
    calls = [
        call("read_file", {"path": "/a"}),
        RM,
        LS,
        call("execute", {"command": "rm old.log"}),
    ]
    agent, _ = ops_agent(shell, calls)
    app = agent.compile(store=store)
    first = await app.run(ask("x"), thread="t")
    assert first.status == "interrupted" and len(first.interrupts) == 2
    assert shell.entered == {"read_file": 1, "execute": 1} and shell.commands == ["ls"]
    a, b = first.interrupts
    second = await app.resume("t", {b.id: Approve()})
    # Only the answered call ran; the other still waits with the same id; nothing re-ran.
    assert shell.commands == ["ls", "rm old.log"] and shell.entered["read_file"] == 1
    assert [i.id for i in second.interrupts] == [a.id]
    done = await app.resume("t", {a.id: Reject()})
    assert done.status == "done"
    assert shell.commands == ["ls", "rm old.log"] and shell.entered == {
        "read_file": 1,
        "execute": 2,
    }
    results = [m for m in shown(done) if isinstance(m, ToolMessage)]
    assert [r.tool_call_id for r in results] == [c.id for c in shown(done)[1].tool_calls]  # type: ignore[union-attr]


async def test_ten_parallel_calls_three_gated_approving_one_runs_exactly_it(
    store: Store,
) -> None:
    entered: Counter[str] = Counter()

    def make(n: int) -> Any:
        @tool(name=f"t{n}")
        async def body(x: int) -> int:
            """A tool."""
            entered[f"t{n}"] += 1
            await anyio.lowlevel.checkpoint()
            return x

        return body

    tools = [make(n) for n in range(10)]
    gated = {"t2", "t5", "t8"}
    policy = ApprovalPolicy({n: "require_approval" for n in gated}, default="allow")
    model = ScriptedModel(replies_to_tool_results([call(f"t{n}", {"x": n}) for n in range(10)]))
    app = ToolAgent("par", model, tools, policy=policy).compile(store=store)
    first = await app.run(ask("go"), thread="t")
    assert {i.info["tool"] for i in first.interrupts} == gated
    assert set(entered) == {f"t{n}" for n in range(10)} - gated
    assert all(v == 1 for v in entered.values())
    target = next(i for i in first.interrupts if i.info["tool"] == "t5")
    second = await app.resume("t", {target.id: Approve()})
    assert entered["t5"] == 1 and sum(entered.values()) == 8  # only t5 ran, once
    assert {i.info["tool"] for i in second.interrupts} == {"t2", "t8"}
    assert {i.id for i in second.interrupts} == {i.id for i in first.interrupts} - {target.id}


async def test_bad_calls_go_back_to_the_model_as_errors(store: Store) -> None:
    shell = Shell()
    calls = [
        call("nope", {}),
        call("execute", {"command": 3}),
        call("read_file", {}),
    ]
    agent, _ = ops_agent(shell, calls)
    done = await agent.compile(store=store).run(ask("x"), thread="t")
    assert done.status == "done" and shell.entered == {}
    errors = [m for m in shown(done) if isinstance(m, ToolMessage)]
    assert [e.status for e in errors] == ["error"] * 3
    assert "no tool named 'nope'" in errors[0].content
    assert "arguments.command: 3 is not of type 'string'" in errors[1].content
    assert "'path' is a required property" in errors[2].content


async def test_a_failing_tool_is_an_error_message_or_with_raise_a_tool_error() -> None:
    @tool
    def boom() -> str:
        """Fails."""
        raise RuntimeError("disk on fire")

    model = ScriptedModel(replies_to_tool_results(call("boom")))
    done = await ToolAgent("a", model, [boom]).compile().run(ask("x"), thread="t")
    result = last_tool_result(shown(done))
    assert result is not None and result.status == "error"
    assert result.content == "Error: RuntimeError: disk on fire"
    strict = ToolAgent("a", ScriptedModel([call("boom")]), [boom], tool_errors="raise")
    with pytest.raises(ToolError, match="disk on fire") as caught:
        await strict.compile().run(ask("x"), thread="t")
    assert caught.value.tool == "boom"


async def test_a_gated_call_is_dangerous_a_cut_call_becomes_a_reconcile_question(
    store: Store,
) -> None:
    entered: Counter[str] = Counter()
    started = anyio.Event()
    hang = {"yes": True}

    @tool
    async def transfer(amount: int) -> str:
        """Move money."""
        entered["transfer"] += 1
        started.set()
        if hang["yes"]:
            await anyio.sleep_forever()
        return "moved"

    policy = ApprovalPolicy({"transfer": "require_approval"})
    model = ScriptedModel(replies_to_tool_results(call("transfer", {"amount": 5})))
    app = ToolAgent("bank", model, [transfer], policy=policy).compile(store=store)
    first = await app.run(ask("pay"), thread="t")
    async with app.start(thread="t", resume={first.interrupts[0].id: Approve()}) as handle:
        await started.wait()
        paused = await handle.pause(timeout=0)  # cut mid-call, like a crash
    assert paused.status == "paused"
    hang["yes"] = False
    asked = await app.resume("t")
    (question,) = asked.interrupts
    assert question.kind == "reconcile" and entered["transfer"] == 1  # never retried blindly
    done = await app.resume("t", {question.id: {"result": "moved by hand"}})
    assert entered["transfer"] == 1
    assert last_tool_result(shown(done)).content == "moved by hand"  # type: ignore[union-attr]


async def test_an_allowed_call_is_not_an_effect_and_reruns_after_a_cut(store: Store) -> None:
    entered: Counter[str] = Counter()
    started = anyio.Event()
    hang = {"yes": True}

    @tool
    async def lookup(q: str) -> str:
        """Look up."""
        entered["lookup"] += 1
        started.set()
        if hang["yes"]:
            await anyio.sleep_forever()
        return "found"

    model = ScriptedModel(replies_to_tool_results(call("lookup", {"q": "x"})))
    app = ToolAgent("s", model, [lookup]).compile(store=store)
    async with app.start(ask("find"), thread="t") as handle:
        await started.wait()
        await handle.pause(timeout=0)
    hang["yes"] = False
    done = await app.resume("t")
    assert done.status == "done" and entered["lookup"] == 2


async def test_the_policy_covers_the_streaming_tool_path(store: Store) -> None:
    chunks_seen: list[Any] = []

    @tool
    async def tail(path: str) -> AsyncIterator[str]:
        """Stream a file."""
        for line in ("a\n", "b\n"):
            chunks_seen.append(line)
            yield line

    policy = ApprovalPolicy({"tail": "require_approval"})
    model = ScriptedModel(replies_to_tool_results(call("tail", {"path": "/var/log"})))
    app = ToolAgent("logs", model, [tail], policy=policy).compile(store=store)
    first = await app.run(ask("show"), thread="t")
    assert first.status == "interrupted" and chunks_seen == []  # nothing streamed before approval
    done = await app.resume("t", {first.interrupts[0].id: Approve()})
    assert chunks_seen == ["a\n", "b\n"]
    assert last_tool_result(shown(done)).content == "a\nb\n"  # type: ignore[union-attr]


async def test_max_turns_bounds_a_model_that_never_stops() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    model = ScriptedModel(lambda messages, tools: call("ping"))
    done = await ToolAgent("loop", model, [ping], max_turns=3).compile().run(ask("x"), thread="t")
    assert done.status == "done" and len(model.requests) == 3
    assert "stopped after 3 turns" in shown(done)[-1].content  # type: ignore[operator]


async def test_a_streaming_model_gives_the_same_conversation() -> None:
    shell = Shell()
    agent, _model = ops_agent(shell, LS, stream=True)
    done = await agent.compile().run(ask("x"), thread="t")
    assert shell.commands == ["ls"] and shown(done)[-1].content == "done: ran: ls"  # type: ignore[union-attr]


async def test_a_model_failure_is_a_typed_error() -> None:
    agent = ToolAgent("a", ScriptedModel([]), [])
    with pytest.raises(ModelError, match="no reply left") as caught:
        await agent.compile().run(ask("x"), thread="t")
    assert caught.value.endpoint == "scripted:model"


async def test_a_sub_agents_gated_tool_asks_from_inside_the_parent(store: Store) -> None:
    shell = Shell()
    ops, ops_model = ops_agent(shell, RM)
    ops_model.name = "ops"
    boss_model = ScriptedModel(
        replies_to_tool_results(call("ops", {"request": "clean up"}), "boss")
    )
    boss = ToolAgent("boss", boss_model, [ops.as_tool()])
    app = boss.compile(store=store)
    first = await app.run(ask("tidy"), thread="t")
    (question,) = first.interrupts
    assert str(question.address).startswith("node:tools/agent:boss/tool:ops:")
    assert str(question.address).endswith("/node:tools/agent:ops/tool:execute:call_ops_0_0")
    assert shell.entered == {} and len(boss_model.requests) == 1
    done = await app.resume("t", {question.id: Approve()})
    assert shell.commands == ["rm -rf /tmp/x"]
    assert shown(done)[-1].content == "boss: done: ran: rm -rf /tmp/x"  # type: ignore[union-attr]
    assert len(boss_model.requests) == 2  # the parent model was not asked again before


async def test_an_outer_policy_covers_every_tool_beneath(store: Store) -> None:
    shell = Shell()
    ops, _ = ops_agent(shell, LS, policy=None)  # its own policy allows everything
    boss_model = ScriptedModel(replies_to_tool_results(call("ops", {"request": "list"})))
    boss = ToolAgent("boss", boss_model, [ops.as_tool()]).with_policy(
        ApprovalPolicy({"execute": "require_approval"}, default="allow")
    )
    first = await boss.compile(store=store).run(ask("x"), thread="t")
    (question,) = first.interrupts
    assert question.info["tool"] == "execute" and shell.entered == {}


async def test_construction_refuses_what_cannot_work() -> None:
    model = ScriptedModel(["x"])
    for kwargs, error in (
        ({"model": object()}, TypeError),
        ({"tools": [print]}, TypeError),
        ({"tools": "execute"}, TypeError),
        ({"policy": {"x": "allow"}}, TypeError),
        ({"max_turns": 0}, ValueError),
        ({"tool_errors": "ignore"}, ValueError),
        ({"name": "has space"}, ValueError),
    ):
        args: dict[str, Any] = {"name": "a", "model": model, **kwargs}
        with pytest.raises(error):
            ToolAgent(**args)
    shell = Shell()
    with pytest.raises(Exception, match="two tools named"):
        ToolAgent("a", model, [shell.execute, shell.execute])


async def test_a_scripted_list_continues_in_a_fresh_model_object() -> None:
    # What another process sees: a new model object, the conversation from the store.
    store = MemoryStore()
    shell = Shell()

    def agent() -> App[AgentState]:
        model = ScriptedModel([RM, "all clean"])
        return ToolAgent("ops", model, shell.tools, policy=SHELL_POLICY).compile(store=store)

    first = await agent().run(ask("clean"), thread="t")
    done = await agent().resume("t", {first.interrupts[0].id: Approve()})
    assert shown(done)[-1].content == "all clean"  # type: ignore[union-attr]


async def test_an_edit_cannot_get_past_a_deny_rule(store: Store) -> None:
    shell = Shell()
    policy = ApprovalPolicy(
        {
            "execute": [
                deny("Never the root.", when=matches("command", r"rm -rf /$")),
                "require_approval",
            ]
        }
    )
    agent, _ = ops_agent(shell, LS, policy=policy)
    app = agent.compile(store=store)
    first = await app.run(ask("x"), thread="t")
    done = await app.resume("t", {first.interrupts[0].id: Edit(arguments={"command": "rm -rf /"})})
    assert shell.entered == {}
    result = last_tool_result(shown(done))
    assert result is not None and result.status == "denied"
    assert result.content == "The edited call is refused: Never the root."


async def test_a_bad_edit_is_refused_with_what_is_wrong(store: Store) -> None:
    shell = Shell()
    agent, _ = ops_agent(shell, RM)
    app = agent.compile(store=store)
    first = await app.run(ask("x"), thread="t")
    with pytest.raises(InvalidResume, match=r"answer\.arguments: 'command' is a required property"):
        await app.resume("t", {first.interrupts[0].id: Edit(arguments={})})


@pytest.mark.parametrize(
    "form",
    [
        {"action": "approve"},
        {"action": "reject", "message": "no"},
        {"action": "edit", "arguments": {"command": "ls"}},
        {"action": "respond", "content": "done"},
    ],
)
async def test_every_decision_form_checks_its_conversation_edits(
    store: Store, form: dict[str, Any]
) -> None:
    shell = Shell()
    agent, _ = ops_agent(shell, RM)
    app = agent.compile(store=store)
    first = await app.run(ask("x"), thread="t")
    schema = first.interrupts[0].schema
    assert schema is not None
    # The conversation's schema is stored once, not once per form.
    assert json.dumps(schema).count('"replace"') == 1
    bad = {**form, "conversation": [{"type": "replace", "id": "m1"}]}
    with pytest.raises(InvalidResume, match=r"conversation"):
        await app.resume("t", {first.interrupts[0].id: bad})
    assert shell.entered == {}
    good = {**form, "conversation": [{"type": "remove", "id": "m1"}]}
    done = await app.resume("t", {first.interrupts[0].id: good})
    assert done.status == "done"


async def test_the_inbox_finds_questions_by_tool(store: Store) -> None:
    shell = Shell()
    agent, _ = ops_agent(shell, [RM, call("read_file", {"path": "/a"})])
    app = agent.compile(store=store)
    first = await app.run(ask("x"), thread="t")
    assert [i.id for i in await app.inbox(tool="execute")] == [first.interrupts[0].id]
    assert await app.inbox(tool="read_file") == []


async def test_parallel_calls_run_concurrently() -> None:
    # Each waits for the other to start: run one after the other, they would never finish.
    started = {"a": anyio.Event(), "b": anyio.Event()}

    @tool
    async def meet(me: str, other: str) -> str:
        """Wait for the other call."""
        started[me].set()
        with anyio.fail_after(5):
            await started[other].wait()
        return f"{me} met {other}"

    model = ScriptedModel(
        replies_to_tool_results(
            [call("meet", {"me": "a", "other": "b"}), call("meet", {"me": "b", "other": "a"})]
        )
    )
    done = await ToolAgent("p", model, [meet]).compile().run(ask("x"), thread="t")
    results = [m.content for m in shown(done) if isinstance(m, ToolMessage)]
    assert results == ["a met b", "b met a"]


async def test_after_a_model_failure_resume_tries_the_model_again(store: Store) -> None:
    calls = Counter[str]()

    def flaky(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        calls["model"] += 1
        if calls["model"] == 1:
            raise ModelError("endpoint down", endpoint="http://model.invalid")
        return "hello"

    app = ToolAgent("a", ScriptedModel(flaky)).compile(store=store)
    with pytest.raises(ModelError, match="endpoint down"):
        await app.run(ask("hi"), thread="t")
    done = await app.resume("t")
    assert done.status == "done" and shown(done)[-1].content == "hello"  # type: ignore[union-attr]
    assert [type(m).__name__ for m in shown(done)] == ["UserMessage", "AssistantMessage"]


# -- a reply cut short, and the OpenAI model through the agent --------------------------------

SDK_LEAVES_GENERATORS = (
    "the openai SDK leaves the async generators of a finished stream to the garbage "
    "collector, which trio reports as a ResourceWarning (encode/httpx#3686)"
)
CUT = AssistantMessage(content="The answer is", finish_reason="length")


def openai_agent(llmock: LLMock, shell: Shell, **kw: Any) -> ToolAgent:
    """The ops agent on an OpenAI model at LLMock (its pytest fixture serves a mock OpenAI
    server on a free loopback port for the session)."""
    model = OpenAIChatModel(
        "gpt-4o-mini",
        base_url=llmock.base_url(),
        api_key="sk-test",
        max_retries=0,
        stream=kw.pop("stream_model", False),
    )
    return ToolAgent("ops", model, shell.tools, policy=SHELL_POLICY, **kw)


def test_run_sync_then_resume_sync_with_an_openai_model(llmock: LLMock, tmp_path: Path) -> None:
    # The documented flow: each sync call runs in an event loop of its own, one model serves both.
    llmock.call_tool("execute", {"command": "rm -rf /tmp/x"}).reply("Removed /tmp/x.")
    shell = Shell()
    store = SqliteStore(tmp_path / "agent.db")
    app = openai_agent(llmock, shell).compile(store=store)
    try:
        first = app.run_sync(ask("clean up /tmp/x"), thread="t")
        assert first.status == "interrupted" and shell.entered["execute"] == 0
        done = app.resume_sync("t", {first.interrupts[0].id: "approve"})
    finally:
        anyio.run(store.close)
    assert done.status == "done"
    assert shell.commands == ["rm -rf /tmp/x"]
    answer = shown(done)[-1]
    assert isinstance(answer, AssistantMessage)
    assert (answer.content, answer.finish_reason) == ("Removed /tmp/x.", "stop")
    assert len(llmock.requests) == 2


MODES = pytest.mark.parametrize(
    "mode",
    [
        "whole",
        pytest.param("model streams", marks=pytest.mark.asyncio_only(reason=SDK_LEAVES_GENERATORS)),
        pytest.param("agent streams", marks=pytest.mark.asyncio_only(reason=SDK_LEAVES_GENERATORS)),
    ],
)


def stream_kw(mode: str) -> dict[str, bool]:
    return {"stream_model": mode == "model streams", "stream": mode == "agent streams"}


@MODES
async def test_a_reply_cut_by_the_token_limit_fails_the_run(llmock: LLMock, mode: str) -> None:
    llmock.add(Reply(text="The answer is", finish_reason="length"))
    app = openai_agent(llmock, Shell(), **stream_kw(mode)).compile()
    with pytest.raises(ReplyCutShort, match="token limit") as caught:
        await app.run(ask("what is the answer?"), thread="t")
    assert isinstance(caught.value, ModelError)
    assert (caught.value.agent, caught.value.content) == ("ops", "The answer is")
    assert "max_tokens" in str(caught.value) and "cut_replies='keep'" in str(caught.value)
    state = await app.get_state("t")
    assert [type(m).__name__ for m in conversation(state.values["messages"])] == ["UserMessage"]


@MODES
async def test_a_cut_reply_is_kept_marked_when_the_agent_is_told_to(
    llmock: LLMock, mode: str
) -> None:
    llmock.add(Reply(text="The answer is", finish_reason="length"))
    app = openai_agent(llmock, Shell(), cut_replies="keep", **stream_kw(mode)).compile()
    done = await app.run(ask("what is the answer?"), thread="t")
    assert done.status == "done"
    answer = shown(done)[-1]
    assert isinstance(answer, AssistantMessage)
    assert (answer.content, answer.finish_reason) == ("The answer is", "length")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_after_a_cut_reply_resume_asks_the_model_again(store: Store, stream: bool) -> None:
    replies = iter([CUT, "The answer is 42."])
    model = ScriptedModel(lambda messages, tools: next(replies))
    app = ToolAgent("a", model, stream=stream).compile(store=store)
    with pytest.raises(ReplyCutShort):
        await app.run(ask("what is the answer?"), thread="t")
    done = await app.resume("t")
    assert done.status == "done"
    assert [m.content for m in shown(done)] == ["what is the answer?", "The answer is 42."]


async def test_why_a_reply_ended_is_stored_with_it(store: Store) -> None:
    agent = ToolAgent("a", ScriptedModel([CUT]), cut_replies="keep")
    await agent.compile(store=store).run(ask("what is the answer?"), thread="t")
    # Read back by another app on the same store: decoded from the checkpoint.
    state = await agent.compile(store=store).get_state("t")
    [_, answer] = conversation(state.values["messages"])
    assert isinstance(answer, AssistantMessage) and answer.finish_reason == "length"


# An assistant message as checkpoints encoded it before messages recorded why a reply ended.
OLD_MESSAGE = bytes.fromhex(
    "494c4b015a71bf5b9ac70005ba696e7465726c6f636b2e417373697374616e744d657373616765a7636f6e"
    "74656e74ad54686520616e73776572206973aa746f6f6c5f63616c6c7392c7000198c70005b2696e746572"
    "6c6f636b2e546f6f6c43616c6ca26964a26331a46e616d65a6736561726368a9617267756d656e747381a1"
    "71a178a46e616d65a161a26964a26d31"
)


def test_a_message_stored_before_finish_reasons_loads_without_one() -> None:
    codec = Codec(types=AGENT_TYPES)
    old = codec.decode(OLD_MESSAGE)
    assert old == AssistantMessage(
        content="The answer is",
        tool_calls=(ToolCall(id="c1", name="search", arguments={"q": "x"}),),
        name="a",
        id="m1",
    )
    assert old.finish_reason is None
    # One without a reason is written without one (trailing defaults are left out).
    stopped = msgspec.structs.replace(old, finish_reason="stop")
    assert len(codec.encode(old)) < len(codec.encode(stopped))
    for finish in get_args(FinishReason):
        marked = msgspec.structs.replace(old, finish_reason=finish)
        assert codec.decode(codec.encode(marked)) == marked
