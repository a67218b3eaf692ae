"""`AnthropicChatModel` passes the model conformance suite, against llmock's Anthropic routes."""

from __future__ import annotations

from typing import Any

import pytest
from _model_servers import LLMockServer
from anthropic.types.message_create_params import (
    MessageCreateParamsNonStreaming,
    MessageCreateParamsStreaming,
)
from llmock.pytest_plugin import LLMock

from interlock.agents import (
    AnthropicChatModel,
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from interlock.testing import ModelConformance


class AnthropicServer(LLMockServer):
    def __init__(self, llmock: LLMock) -> None:
        super().__init__(
            llmock, "anthropic", MessageCreateParamsNonStreaming, MessageCreateParamsStreaming
        )

    def model(
        self, *, stream: bool = False, timeout: float | None = None, max_retries: int = 0
    ) -> AnthropicChatModel:
        return AnthropicChatModel(
            "claude-sonnet-4-5",
            base_url=self.base_url,
            api_key="sk-ant-test",
            stream=stream,
            timeout=timeout,
            max_retries=max_retries,
        )

    def read_request(self, body: Any) -> list[Message]:
        return from_anthropic(body)


def from_anthropic(body: dict[str, Any]) -> list[Message]:
    """The conversation of a Messages API request, read back into interlock's messages."""
    out: list[Message] = []
    system = body.get("system") or []
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    out.extend(SystemMessage(content=block["text"]) for block in system)
    for turn in body["messages"]:
        content = turn["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if turn["role"] == "assistant":
            text = "".join(b["text"] for b in content if b["type"] == "text")
            calls = tuple(
                ToolCall(id=b["id"], name=b["name"], arguments=b["input"])
                for b in content
                if b["type"] == "tool_use"
            )
            out.append(AssistantMessage(content=text or None, tool_calls=calls))
            continue
        for block in content:
            if block["type"] == "tool_result":
                out.append(
                    ToolMessage(
                        content=block["content"],
                        tool_call_id=block["tool_use_id"],
                        status="error" if block.get("is_error") else "ok",
                    )
                )
            else:
                out.append(UserMessage(content=block["text"]))
    return out


class TestAnthropicChatModel(ModelConformance):
    @pytest.fixture
    def model_server(self, llmock: LLMock) -> AnthropicServer:
        return AnthropicServer(llmock)
