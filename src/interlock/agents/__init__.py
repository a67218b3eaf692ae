"""Agents: models that call tools, under approval policies, composed into larger agents.

An agent compiles to an ordinary graph (`Agent.compile` returns an `App`), so everything the
runtime guarantees — exact resume, exactly-once decisions, leases, reconcile after a crash,
audit, external pause, streaming — holds for agents with no second mechanism.
"""

import importlib
from typing import TYPE_CHECKING, Any

from .._public import publish

# isort: split
# Messages
from ._messages import AssistantMessage as AssistantMessage
from ._messages import ConversationItem as ConversationItem
from ._messages import FinishReason as FinishReason
from ._messages import Message as Message
from ._messages import RemoveMessage as RemoveMessage
from ._messages import ReplaceMessage as ReplaceMessage
from ._messages import SystemMessage as SystemMessage
from ._messages import ToolCall as ToolCall
from ._messages import ToolMessage as ToolMessage
from ._messages import Usage as Usage
from ._messages import UserMessage as UserMessage
from ._messages import conversation as conversation
from ._messages import from_openai as from_openai
from ._messages import to_messages as to_messages
from ._messages import to_openai as to_openai

# isort: split
# Models
from ._budget import Budget as Budget
from ._models import ChatModel as ChatModel
from ._models import ModelRequest as ModelRequest
from ._models import ScriptedModel as ScriptedModel
from ._models import ToolSpec as ToolSpec
from ._models import call as call

# isort: split
# Tools
from ._tools import Tool as Tool
from ._tools import current_tool_call as current_tool_call
from ._tools import tool as tool

# isort: split
# Policies and decisions
from ._decisions import APPROVAL as APPROVAL
from ._decisions import Approve as Approve
from ._decisions import Edit as Edit
from ._decisions import Reject as Reject
from ._decisions import Respond as Respond
from ._decisions import ToolDecision as ToolDecision
from ._policy import ApprovalPolicy as ApprovalPolicy
from ._policy import Rule as Rule
from ._policy import Verdict as Verdict
from ._policy import allow as allow
from ._policy import deny as deny
from ._policy import matches as matches
from ._policy import require_approval as require_approval

# isort: split
# Agents
from ._agent import Agent as Agent
from ._agent import AgentState as AgentState
from ._agent import AgentTool as AgentTool
from ._agent import ToolAgent as ToolAgent
from ._compose import Loop as Loop
from ._compose import Parallel as Parallel
from ._compose import PlanExecute as PlanExecute
from ._compose import Sequential as Sequential
from ._compose import Supervisor as Supervisor
from ._compose import loop as loop
from ._compose import parallel as parallel
from ._compose import plan_execute as plan_execute
from ._compose import sequential as sequential
from ._compose import supervisor as supervisor

# isort: split
# Running them
from ._runner import AgentStream as AgentStream
from ._runner import Runner as Runner

# isort: split
# Events
from ._events import AgentEvent as AgentEvent
from ._events import AgentFinished as AgentFinished
from ._events import AgentInterrupt as AgentInterrupt
from ._events import AssistantTurn as AssistantTurn
from ._events import TextDelta as TextDelta
from ._events import ToolCallEvent as ToolCallEvent
from ._events import ToolChunk as ToolChunk
from ._events import ToolResult as ToolResult
from ._events import Transfer as Transfer

if TYPE_CHECKING:
    from ._anthropic import AnthropicChatModel as AnthropicChatModel
    from ._choose import chat_model as chat_model
    from ._choose import chat_model_from_env as chat_model_from_env
    from ._gemini import GeminiChatModel as GeminiChatModel
    from ._langchain import LangChainChatModel as LangChainChatModel
    from ._langchain import from_langchain as from_langchain
    from ._mcp import MCPError as MCPError
    from ._mcp import MCPServer as MCPServer
    from ._mcp import MCPTimeout as MCPTimeout
    from ._mcp import MCPToolFailed as MCPToolFailed
    from ._openai import OpenAIChatModel as OpenAIChatModel

# Names whose modules need an extra (``openai``, ``anthropic``, ``gemini``, ``langchain``,
# ``mcp``): imported on first use, so that `import interlock.agents` works without them, and the
# ImportError names the extra.
_EXTRAS = {
    "OpenAIChatModel": "._openai",
    "AnthropicChatModel": "._anthropic",
    "GeminiChatModel": "._gemini",
    "MCPServer": "._mcp",
    "MCPError": "._mcp",
    "MCPTimeout": "._mcp",
    "MCPToolFailed": "._mcp",
    "LangChainChatModel": "._langchain",
    "from_langchain": "._langchain",
    "chat_model": "._choose",
    "chat_model_from_env": "._choose",
}


def __getattr__(name: str) -> Any:
    module = _EXTRAS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    publish(__name__, {name: value}, [name])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXTRAS})


__all__ = [
    "APPROVAL",
    "AssistantMessage",
    "ConversationItem",
    "FinishReason",
    "Message",
    "RemoveMessage",
    "ReplaceMessage",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "Usage",
    "UserMessage",
    "conversation",
    "from_openai",
    "to_messages",
    "to_openai",
    "Budget",
    "ChatModel",
    "ModelRequest",
    "ScriptedModel",
    "ToolSpec",
    "call",
    "Tool",
    "current_tool_call",
    "tool",
    "Approve",
    "Edit",
    "Reject",
    "Respond",
    "ToolDecision",
    "ApprovalPolicy",
    "Rule",
    "Verdict",
    "allow",
    "deny",
    "matches",
    "require_approval",
    "Agent",
    "AgentState",
    "AgentTool",
    "ToolAgent",
    "Loop",
    "Parallel",
    "PlanExecute",
    "Sequential",
    "Supervisor",
    "loop",
    "parallel",
    "plan_execute",
    "sequential",
    "supervisor",
    "AgentStream",
    "Runner",
    "AgentEvent",
    "AgentFinished",
    "AgentInterrupt",
    "AssistantTurn",
    "TextDelta",
    "ToolCallEvent",
    "ToolChunk",
    "ToolResult",
    "Transfer",
    "MCPError",
    "MCPServer",
    "MCPTimeout",
    "MCPToolFailed",
    "OpenAIChatModel",
    "GeminiChatModel",
    "LangChainChatModel",
    "from_langchain",
    "AnthropicChatModel",
    "chat_model",
    "chat_model_from_env",
]

publish(__name__, globals(), __all__)
