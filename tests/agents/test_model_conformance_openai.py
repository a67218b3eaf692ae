"""`OpenAIChatModel` passes the model conformance suite, against llmock's OpenAI routes."""

from __future__ import annotations

from typing import Any

import pytest
from _model_servers import LLMockServer
from llmock.pytest_plugin import LLMock
from openai.types.chat.completion_create_params import (
    CompletionCreateParamsNonStreaming,
    CompletionCreateParamsStreaming,
)

from interlock.agents import Message, OpenAIChatModel, from_openai
from interlock.testing import ModelConformance


class OpenAIServer(LLMockServer):
    def __init__(self, llmock: LLMock) -> None:
        super().__init__(
            llmock, "openai", CompletionCreateParamsNonStreaming, CompletionCreateParamsStreaming
        )

    def model(
        self, *, stream: bool = False, timeout: float | None = None, max_retries: int = 0
    ) -> OpenAIChatModel:
        # A streamed request asks for its usage by default (stream_usage=True): the kit's
        # usage test checks it on streamed replies too.
        return OpenAIChatModel(
            "gpt-4o-mini",
            base_url=self.base_url,
            api_key="sk-test",
            stream=stream,
            timeout=timeout,
            max_retries=max_retries,
        )

    def read_request(self, body: Any) -> list[Message]:
        return [from_openai(m) for m in body["messages"]]


# Under trio, the openai SDK leaves the async generators of a finished stream to the garbage
# collector, which trio reports as a ResourceWarning (encode/httpx#3686; see OpenAIChatModel).
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
class TestOpenAIChatModel(ModelConformance):
    @pytest.fixture
    def model_server(self, llmock: LLMock) -> OpenAIServer:
        return OpenAIServer(llmock)
