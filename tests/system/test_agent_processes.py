"""A paused agent is resumed by another OS process: a sub-agent's gated tool, approved there."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

WORKER = textwrap.dedent(
    """
    import json, sys
    import anyio
    from interlock import SqliteStore
    from interlock.agents import (
        ApprovalPolicy, Approve, Runner, ScriptedModel, ToolAgent, ToolMessage, call, tool,
    )

    LEDGER = sys.argv[2]

    @tool
    def execute(command: str) -> str:
        '''Run a shell command.'''
        with open(LEDGER, "a") as f:
            f.write(command + "\\n")
        return "ran " + command

    def answer_after_tool(first, name):
        def script(messages, tools):
            if isinstance(messages[-1], ToolMessage):
                return f"{name}: {messages[-1].content}"
            return first
        return ScriptedModel(script, name=name)

    ops = ToolAgent(
        "ops",
        answer_after_tool(call("execute", {"command": "rm -rf /tmp/x"}), "ops"),
        [execute],
        policy=ApprovalPolicy({"execute": "require_approval"}),
    )
    boss = ToolAgent("boss", answer_after_tool(call("ops", {"request": "clean"}), "boss"),
                     [ops.as_tool()])

    async def main(path, mode):
        async with SqliteStore(path) as store:
            runner = Runner(boss, store)
            if mode == "start":
                done = await runner.invoke("tidy up", session="s")
            else:
                (waiting,) = await runner.app.inbox(thread="s")
                done = await runner.decide("s", {waiting.id: Approve()}, actor="ops-lead")
        print(json.dumps({
            "status": done.result.status,
            "answer": done.answer,
            "interrupts": [[i.id, str(i.address)] for i in done.result.interrupts],
        }))

    anyio.run(main, sys.argv[1], sys.argv[3])
    """
)


def test_a_paused_agent_is_resumed_by_another_process(tmp_path: Path) -> None:
    script = tmp_path / "agent_worker.py"
    script.write_text(WORKER)
    db, ledger = str(tmp_path / "agents.db"), tmp_path / "ledger"

    def run(mode: str) -> dict[str, Any]:
        out = subprocess.run(
            [sys.executable, str(script), db, str(ledger), mode],
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(out.stdout)  # type: ignore[no-any-return]

    first = run("start")
    assert first["status"] == "interrupted" and not ledger.exists()
    ((_, address),) = first["interrupts"]
    assert "/agent:boss/tool:ops:" in address and address.endswith(
        "/agent:ops/tool:execute:call_ops_0_0"
    )
    second = run("approve")
    assert second == {
        "status": "done",
        "answer": "boss: ops: ran rm -rf /tmp/x",
        "interrupts": [],
    }
    assert ledger.read_text() == "rm -rf /tmp/x\n"  # once, in the second process
