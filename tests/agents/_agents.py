"""Tools that count their entries, and the agents the agent tests share."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from interlock.agents import (
    ApprovalPolicy,
    Message,
    ScriptedModel,
    Tool,
    ToolAgent,
    ToolMessage,
    ToolSpec,
    allow,
    matches,
    require_approval,
    tool,
)


class Shell:
    """An ops toolbox whose tool bodies count every entry and record their arguments."""

    def __init__(self) -> None:
        self.entered: Counter[str] = Counter()
        self.commands: list[str] = []

        @tool
        def execute(command: str) -> str:
            """Run a shell command."""
            self.entered["execute"] += 1
            self.commands.append(command)
            return f"ran: {command}"

        @tool
        def read_file(path: str) -> str:
            """Read a file."""
            self.entered["read_file"] += 1
            return f"contents of {path}"

        self.execute = execute
        self.read_file = read_file

    @property
    def tools(self) -> list[Tool]:
        return [self.execute, self.read_file]


SHELL_POLICY = ApprovalPolicy(
    {
        "read_file": "allow",
        "execute": [require_approval(when=matches("command", r"\brm\b")), allow()],
    }
)


def last_tool_result(messages: Sequence[Message]) -> ToolMessage | None:
    """The last tool message, not counting a supervisor's transfers."""
    for m in reversed(messages):
        if isinstance(m, ToolMessage) and not (m.name or "").startswith("transfer_to_"):
            return m
    return None


def replies_to_tool_results(first: Any, final: str = "done") -> Any:
    """A script: ``first`` on the user's message, then ``final`` quoting the last tool result."""

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        result = last_tool_result(messages)
        if result is None:
            return first
        return f"{final}: {result.content}"

    return script


def ops_agent(shell: Shell, first: Any, **kw: Any) -> tuple[ToolAgent, ScriptedModel]:
    model = ScriptedModel(replies_to_tool_results(first))
    kw.setdefault("policy", SHELL_POLICY)
    return ToolAgent("ops", model, shell.tools, **kw), model
