"""Runner: typed events in order, interrupts only once durable, sessions across runners."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from _agents import SHELL_POLICY, Shell, ops_agent, replies_to_tool_results

from interlock import SqliteStore, Store, ThreadInterrupted
from interlock.agents import (
    AgentEvent,
    ApprovalPolicy,
    Approve,
    Reject,
    Runner,
    ScriptedModel,
    ToolAgent,
    call,
    tool,
)

pytestmark = pytest.mark.anyio

RM = call("execute", {"command": "rm -rf /tmp/x"})


async def collect(stream: Any) -> list[AgentEvent]:
    out: list[AgentEvent] = []
    async with stream as events:
        async for event in events:
            out.append(event)
    return out


async def test_a_gated_run_yields_its_steps_then_a_durable_interrupt(store: Store) -> None:
    shell = Shell()
    agent, _ = ops_agent(shell, [call("read_file", {"path": "/a"}), RM])
    runner = Runner(agent, store)
    seen: list[str] = []
    async with runner.run("clean up", session="s") as events:
        async for event in events:
            seen.append(event.kind)
            if event.kind == "interrupt":
                # Yielded only once committed: the store has it pending already.
                stored = await store.get_interrupt(event.interrupt.id)
                assert stored is not None and stored.status == "pending"
                assert (event.agent, event.tool) == ("ops", "execute")
                assert event.call_id == event.interrupt.info["call_id"]
                assert str(event.interrupt.address).endswith(f"tool:execute:{event.call_id}")
    assert seen == [
        "assistant",
        "tool_call",
        "tool_call",
        "tool_result",
        "interrupt",
        "finished",
    ] or seen == ["assistant", "tool_call", "tool_result", "tool_call", "interrupt", "finished"]
    assert events.finished is not None and events.finished.result.status == "interrupted"


async def test_resume_yields_the_rest_and_the_answer(store: Store) -> None:
    shell = Shell()
    agent, _ = ops_agent(shell, RM)
    runner = Runner(agent, store)
    first = await runner.invoke("clean up", session="s")
    iid = first.result.interrupts[0].id
    events = await collect(runner.resume("s", {iid: Approve()}, actor="ann"))
    kinds = [e.kind for e in events]
    assert kinds == ["tool_call", "tool_result", "assistant", "finished"]
    result = events[1]
    assert result.kind == "tool_result" and result.status == "ok"
    assert result.content == "ran: rm -rf /tmp/x"
    final = events[-1]
    assert final.kind == "finished" and final.answer == "done: ran: rm -rf /tmp/x"
    decision = [e for e in await store.audit_log(thread="s") if e.kind == "decision"]
    assert [d.actor for d in decision] == ["ann"]


async def test_a_session_continues_in_another_runner_object(tmp_path: Path) -> None:
    # What another process does: a new store object on the same file, a new agent.
    path = tmp_path / "s.db"
    shell = Shell()
    async with SqliteStore(path) as store:
        first = await Runner(ops_agent(shell, RM)[0], store).invoke("clean", session="s")
    iid = first.result.interrupts[0].id
    async with SqliteStore(path) as store:
        again = Runner(ops_agent(shell, RM)[0], store)
        assert [i.id for i in await again.app.inbox()] == [iid]
        done = await again.decide("s", {iid: Reject(message="no")})
        assert done.result.status == "done" and shell.entered == {}
        assert (await again.messages("s"))[-1].content == "done: no"  # type: ignore[union-attr]


async def test_streamed_text_and_tool_chunks_arrive_as_events(store: Store) -> None:
    @tool
    async def tail(path: str) -> AsyncIterator[str]:
        """Stream a file."""
        yield "one\n"
        yield "two\n"

    model = ScriptedModel(replies_to_tool_results(call("tail", {"path": "x"})), chunk_size=4)
    runner = Runner(ToolAgent("logs", model, [tail], stream=True), store)
    events = await collect(runner.run("show", session="s"))
    chunks = [e.chunk for e in events if e.kind == "tool_chunk"]
    assert chunks == ["one\n", "two\n"]
    text = "".join(e.text for e in events if e.kind == "text")
    assert text == "done: one\ntwo\n"


async def test_new_input_while_questions_wait_is_refused_or_cancels_them(store: Store) -> None:
    shell = Shell()

    def script(messages: Any, tools: Any) -> Any:
        return "fine, nothing then" if messages[-1].content == "never mind" else RM

    model = ScriptedModel(script)
    runner = Runner(ToolAgent("ops", model, shell.tools, policy=SHELL_POLICY), store)
    first = await runner.invoke("clean", session="s")
    with pytest.raises(ThreadInterrupted):
        await runner.invoke("something else", session="s")
    assert [i.id for i in await runner.app.inbox()] == [first.result.interrupts[0].id]
    done = await runner.invoke("never mind", session="s", on_pending="cancel")
    assert done.answer == "fine, nothing then"
    assert await runner.app.inbox() == [] and shell.entered == {}
    # The model is never shown a call left without an answer.
    shown = model.requests[-1].messages
    assert [type(m).__name__ for m in shown] == [
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
        "UserMessage",
    ]
    assert "cancelled" in shown[2].content  # type: ignore[union-attr]


async def test_leaving_the_block_early_keeps_the_session_resumable(store: Store) -> None:
    shell = Shell()
    agent, _model = ops_agent(shell, call("execute", {"command": "ls"}))
    runner = Runner(agent, store)
    async with runner.run("list", session="s") as events:
        async for event in events:
            if event.kind == "assistant":
                break
    done = await runner.decide("s")
    # An allowed call is no effect: cut before its step was committed, it may run again.
    assert done.result.status == "done" and set(shell.commands) == {"ls"}
    assert done.answer == "done: ran: ls"


async def test_the_runner_takes_the_runtimes_settings() -> None:
    runner = Runner(
        ToolAgent("a", ScriptedModel(["x"]), policy=ApprovalPolicy()),
        durability="exit",
        lease_ttl=5,
        recursion_limit=7,
    )
    assert runner.app.durability == "exit" and runner.app.recursion_limit == 7
    assert runner.app.lease.ttl == 5


async def test_bad_arguments_are_typed_errors() -> None:
    runner = Runner(ops_agent(Shell(), RM)[0])
    with pytest.raises(TypeError):
        Runner(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="session"):
        runner.run("x", session="")
    with pytest.raises(TypeError):
        runner.run(3, session="s")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        runner.resume("s", ["approve"])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        runner.resume("s", {}, edits=["x"])  # type: ignore[list-item]
    assert SHELL_POLICY.tools == {"read_file", "execute"}
