"""What an agent reports while it runs (read through `Runner`, or `App.stream(modes=["custom"])`).

Agents report through `interlock.emit_event`, from any depth: a sub-agent's events reach the
reader of the outermost run. They are live news, not records: a task that re-runs after a
resume reports what it does again, but a finished tool call is never re-run, so its result is
reported once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..runtime import Interrupt, RunResult, UsageTotals
from ._messages import AssistantMessage, Message, ToolCall, ToolStatus

__all__ = [
    "AgentEvent",
    "AgentFinished",
    "AgentInterrupt",
    "AssistantTurn",
    "TextDelta",
    "ToolCallEvent",
    "ToolChunk",
    "ToolResult",
    "Transfer",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class TextDelta:
    """A piece of an assistant's text as the model streams it."""

    kind: Literal["text"] = "text"
    agent: str
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class AssistantTurn:
    """A model finished a reply (text, tool calls or both)."""

    kind: Literal["assistant"] = "assistant"
    agent: str
    message: AssistantMessage
    """The reply; its ``usage`` is what this call used, as the provider reported it."""
    cost: float | None = None
    """What this call cost at the App's prices (None: its model has no price)."""
    totals: UsageTotals | None = None
    """What the thread and its run used so far, this call included."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallEvent:
    """A tool call is about to be served (checked by the policy, maybe waiting for a person)."""

    kind: Literal["tool_call"] = "tool_call"
    agent: str
    call: ToolCall


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolChunk:
    """A streaming tool yielded a chunk."""

    kind: Literal["tool_chunk"] = "tool_chunk"
    agent: str
    call_id: str
    tool: str
    chunk: Any


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResult:
    """A tool call ended: what the model is told, and how it ended."""

    kind: Literal["tool_result"] = "tool_result"
    agent: str
    call_id: str
    tool: str
    content: str
    status: ToolStatus


@dataclass(frozen=True, kw_only=True, slots=True)
class Transfer:
    """Control passed from one agent to another (a supervisor's transfer, or back)."""

    kind: Literal["transfer"] = "transfer"
    source: str
    target: str


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentInterrupt:
    """A question waits for a person (reported after its checkpoint is committed).

    ``interrupt`` has the full address; ``agent``, ``tool`` and ``call_id`` are the agent's
    view of it: the innermost agent that asked, and the tool call it is about (None when the
    question is not about a tool call).
    """

    kind: Literal["interrupt"] = "interrupt"
    interrupt: Interrupt
    agent: str | None
    tool: str | None
    call_id: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentFinished:
    """The run stopped: done, interrupted (questions wait), paused or failed."""

    kind: Literal["finished"] = "finished"
    result: RunResult[Any]
    messages: tuple[Message, ...]
    """The conversation as the model sees it now (edits folded in)."""

    @property
    def answer(self) -> str | None:
        """The last assistant text of the conversation, if it has one."""
        for m in reversed(self.messages):
            if isinstance(m, AssistantMessage) and m.content:
                return m.content
        return None


AgentEvent = (
    TextDelta
    | AssistantTurn
    | ToolCallEvent
    | ToolChunk
    | ToolResult
    | Transfer
    | AgentInterrupt
    | AgentFinished
)
"""Any event a `Runner` yields."""


def agent_view(interrupt: Interrupt) -> tuple[str | None, str | None, str | None]:
    """``(agent, tool, call_id)`` of an interrupt's address: the innermost agent, its call."""
    agent = tool = call_id = None
    for seg in interrupt.address:
        if seg.kind == "agent":
            agent, tool, call_id = seg.name, None, None
        elif seg.kind == "tool":
            tool, call_id = seg.name, seg.sub_id or None
    return agent, tool, call_id
