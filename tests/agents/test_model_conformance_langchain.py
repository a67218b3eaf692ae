"""`LangChainChatModel` passes the model conformance suite, wrapping one real provider class:
langchain-openai's ``ChatOpenAI``, pointed at llmock's OpenAI routes."""

from __future__ import annotations

from typing import Any

import pytest
from _model_servers import LLMockServer
from langchain_openai import ChatOpenAI
from llmock.pytest_plugin import LLMock
from openai.types.chat.completion_create_params import (
    CompletionCreateParamsNonStreaming,
    CompletionCreateParamsStreaming,
)

from interlock.agents import LangChainChatModel, Message, from_openai
from interlock.testing import ModelConformance


class LangChainServer(LLMockServer):
    def __init__(self, llmock: LLMock) -> None:
        super().__init__(
            llmock, "openai", CompletionCreateParamsNonStreaming, CompletionCreateParamsStreaming
        )

    def chat(self, *, timeout: float | None = None, max_retries: int = 0) -> ChatOpenAI:
        """LangChain's OpenAI class as its users configure it: its own retries and timeout."""
        return ChatOpenAI(
            model="gpt-4o-mini",
            base_url=self.base_url,
            api_key="sk-test",  # type: ignore[arg-type]
            timeout=timeout,
            max_retries=max_retries,
            stream_usage=True,  # the usage of a streamed reply comes only when asked for
        )

    def model(
        self, *, stream: bool = False, timeout: float | None = None, max_retries: int = 0
    ) -> LangChainChatModel:
        return LangChainChatModel(
            self.chat(timeout=timeout, max_retries=max_retries), stream=stream
        )

    def read_request(self, body: Any) -> list[Message]:
        return [from_openai(m) for m in body["messages"]]


class TestLangChainChatModel(ModelConformance):
    @pytest.fixture
    def model_server(self, llmock: LLMock) -> LangChainServer:
        return LangChainServer(llmock)
