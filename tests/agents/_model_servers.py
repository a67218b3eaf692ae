"""Mock provider servers for `interlock.testing.ModelConformance`: llmock, scripted through
its scenarios, with every request body checked against the provider SDK's own request types."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llmock.pytest_plugin import LLMock
from llmock.scenarios import Delay, Fail, Reply, StreamFault, ToolFault
from llmock.scenarios import ToolCall as ScriptedCall
from pydantic import TypeAdapter

from interlock.testing import (
    ScriptedCalls,
    ScriptedDelay,
    ScriptedError,
    ScriptedMalformed,
    ScriptedReply,
    ScriptedText,
)


class LLMockServer:
    """llmock serving one provider's wire format; the model is built by a subclass.

    Args:
        llmock: The test's llmock (cleared for each test).
        provider: The provider whose routes the model calls (``openai``, ``anthropic``...).
        plain: The SDK's request type for a request that does not stream.
        streamed: The SDK's request type for a request that streams.
    """

    def __init__(self, llmock: LLMock, provider: str, plain: Any, streamed: Any) -> None:
        self.llmock = llmock
        self.provider = provider
        self.base_url = llmock.base_url(provider)
        self._plain = TypeAdapter(plain)
        self._streamed = TypeAdapter(streamed)

    def script(self, *replies: ScriptedReply) -> None:
        for reply in replies:
            if isinstance(reply, ScriptedText):
                self.llmock.add(Reply(text=reply.text, finish_reason=reply.finish))
            elif isinstance(reply, ScriptedCalls):
                calls = tuple(ScriptedCall(name, args) for name, args in reply.calls)
                if reply.broken:
                    self.llmock.add(ToolFault("malformed_arguments"))
                self.llmock.add(Reply(text=reply.text, tool_calls=calls))
            elif isinstance(reply, ScriptedError):
                self.llmock.add(Fail(reply.status, retry_after=reply.retry_after))
            elif isinstance(reply, ScriptedMalformed):
                self.llmock.add(StreamFault("malformed", after_chunks=1))
            elif isinstance(reply, ScriptedDelay):
                self.llmock.add(Delay(reply.seconds))
            else:
                raise TypeError(f"not a scripted reply: {reply!r}")

    def requests(self) -> Sequence[Any]:
        """The bodies received, each checked against the SDK's request type first."""
        bodies = [record.body for record in self.llmock.requests if record.method == "POST"]
        for body in bodies:
            check_request(self._streamed if body.get("stream") else self._plain, body)
        return bodies


def check_request(check: TypeAdapter[Any], body: Any) -> None:
    """Validate a request body against an SDK's request type, to the last nested item.

    Raises:
        pydantic.ValidationError: The body is not of that type.
    """
    _drain(check.validate_python(body))


def _drain(value: Any) -> None:
    """Walk a validated value: pydantic checks the items of an ``Iterable`` field only as they
    are iterated."""
    if isinstance(value, dict):
        for item in value.values():
            _drain(item)
    elif isinstance(value, list | tuple) or hasattr(value, "__next__"):
        for item in value:
            _drain(item)
