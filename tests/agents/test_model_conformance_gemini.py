"""`GeminiChatModel` passes the model conformance suite, against llmock's Gemini routes."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pydantic
import pytest
from _fake_gemini import FakeGemini, response, streamed, whole
from _model_servers import (
    LLMockServer,
    check_request,
)
from google.genai import types
from llmock.pytest_plugin import LLMock

from interlock.agents import (
    AssistantMessage,
    GeminiChatModel,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from interlock.testing import ModelConformance, ModelServer, ScriptedCalls, ScriptedReply
from interlock.testing._model_conformance import HELLO, LOOKUP, _essence, _generate


class GeminiRequest(pydantic.BaseModel):
    """The body of a ``generateContent`` (or ``streamGenerateContent``) request on the wire.

    google-genai has no type for this body: its ``GenerateContentParameters`` is what its own
    ``generate_content`` takes (a model, contents, a config), which the SDK rewrites before
    sending. The parts of the body are the SDK's own models, though (``Content``, ``Tool``,
    ``ToolConfig``, ``GenerationConfig``), which read the wire's camelCase names and refuse
    any field they do not know; this model only adds the body's top level, as strict.
    """

    model_config = pydantic.ConfigDict(extra="forbid")

    contents: list[types.Content]
    systemInstruction: types.Content | None = None
    tools: list[types.Tool] | None = None
    toolConfig: types.ToolConfig | None = None
    generationConfig: types.GenerationConfig | None = None


class GeminiServer(LLMockServer):
    """llmock's Gemini routes, and the canned endpoint for the one reply llmock cannot give.

    llmock sends a call whose arguments it was told to break as a call without arguments
    (Gemini's ``args`` is an object, never text). What Gemini sends instead, a reply that
    ends with ``MALFORMED_FUNCTION_CALL`` and says what the model tried, comes from the
    canned endpoint: once such a reply is scripted, the models built go there.
    """

    def __init__(self, llmock: LLMock, canned: FakeGemini) -> None:
        super().__init__(llmock, "gemini", GeminiRequest, GeminiRequest)
        self.canned = canned
        self._to_canned = False

    def script(self, *replies: ScriptedReply) -> None:
        for reply in replies:
            if isinstance(reply, ScriptedCalls) and reply.broken:
                self._to_canned = True
                self.canned.script(malformed_call(reply.calls[0], stream=False))
                self.canned.script(malformed_call(reply.calls[0], stream=True))
            else:
                super().script(reply)

    def requests(self) -> Sequence[Any]:
        if not self._to_canned:
            return super().requests()
        bodies = [record.body for record in self.canned.requests]
        for body in bodies:
            check_request(self._plain, body)
        return bodies

    def model(
        self, *, stream: bool = False, timeout: float | None = None, max_retries: int = 0
    ) -> GeminiChatModel:
        return GeminiChatModel(
            "gemini-2.5-flash",
            base_url=self.canned.base_url if self._to_canned else self.base_url,
            api_key="test-key",
            stream=stream,
            timeout=timeout,
            max_retries=max_retries,
        )

    def read_request(self, body: Any) -> list[Message]:
        return from_gemini(body)


def malformed_call(call: tuple[str, dict[str, Any]], *, stream: bool) -> Any:
    """Gemini's answer when the model could not write a call: no part, a reason, a message."""
    name, arguments = call
    start = ", ".join(f"{k}={v!r}" for k, v in arguments.items())[:-4]  # cut short
    body = response(finish="MALFORMED_FUNCTION_CALL", usage={"promptTokenCount": 9})
    body["candidates"][0]["finishMessage"] = (
        f"Malformed function call: print(default_api.{name}({start}"
    )
    return streamed(body) if stream else whole(body)


def from_gemini(body: dict[str, Any]) -> list[Message]:
    """The conversation of a ``generateContent`` request, read back into interlock's messages.

    Gemini's function calls and responses carry no ids: a response answers the call of the
    same position in the model turn before it. Each call read gets its position as its id.
    """
    out: list[Message] = []
    system = body.get("systemInstruction")
    if system is not None:
        out.append(SystemMessage(content="".join(p["text"] for p in system["parts"])))
    open_calls: list[ToolCall] = []
    seen = 0  # the calls read so far: each gets its position as its id
    for turn in body["contents"]:
        parts = turn["parts"]
        if turn["role"] == "model":
            text = "".join(p["text"] for p in parts if "text" in p)
            calls = tuple(
                ToolCall(
                    id=f"position {seen + n}",
                    name=p["functionCall"]["name"],
                    arguments=p["functionCall"].get("args", {}),
                )
                for n, p in enumerate(p for p in parts if "functionCall" in p)
            )
            seen += len(calls)
            out.append(AssistantMessage(content=text or None, tool_calls=calls))
            open_calls = list(calls)
            continue
        answered = 0
        for part in parts:
            if "functionResponse" in part:
                response = part["functionResponse"]["response"]
                call = open_calls[answered]
                answered += 1
                failed = "error" in response
                out.append(
                    ToolMessage(
                        content=response["error" if failed else "result"],
                        tool_call_id=call.id,
                        status="error" if failed else "ok",
                    )
                )
            else:
                out.append(UserMessage(content=part["text"]))
    return out


@pytest.fixture(scope="module")
def endpoint() -> Iterator[FakeGemini]:
    with FakeGemini() as fake:
        yield fake


@pytest.fixture
def canned(endpoint: FakeGemini) -> Iterator[FakeGemini]:
    endpoint.reset()
    yield endpoint
    endpoint.reset()


# Under trio, the SDK leaves the inner async generator of a stream given up early to the
# garbage collector, which trio reports as a ResourceWarning (see GeminiChatModel).
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
class TestGeminiChatModel(ModelConformance):
    call_ids_on_the_wire = False  # Gemini pairs a function response with its call by position

    @pytest.fixture
    def model_server(self, llmock: LLMock, canned: FakeGemini) -> GeminiServer:
        return GeminiServer(llmock, canned)

    @pytest.mark.anyio
    async def test_arguments_that_are_not_json_are_kept_raw(
        self, model_server: ModelServer
    ) -> None:
        """A call Gemini could not write is not taken for a finished reply.

        The suite's own version expects a call whose raw text is the start of the arguments'
        JSON, which Gemini never sends: its ``args`` is an object. A call the model could not
        write comes as a reply with no part that ends with ``MALFORMED_FUNCTION_CALL`` (and a
        ``finishMessage`` the SDK does not pass on), served here by the canned endpoint: the
        model returns an empty reply without a finish reason, whole or streamed, not a
        ``stop`` an agent would take for a final answer, and not an error.
        """
        model_server.script(ScriptedCalls((("lookup", {"word": "interlock"}),), broken=True))
        for stream in (False, True):
            reply = await _generate(model_server.model(stream=stream), HELLO, [LOOKUP])
            assert (reply.content, reply.tool_calls, reply.finish_reason) == ("", (), None)
            assert reply.usage is not None and reply.usage.input_tokens == 9
        assert len(model_server.requests()) == 2


def test_a_result_answering_the_wrong_call_fails_the_suite() -> None:
    """Without ids on the wire, the conversation check still pairs results with calls."""
    calls = (ToolCall(id="a", name="lookup", arguments={}), ToolCall(id="b", name="lookup"))
    sent: list[Message] = [
        AssistantMessage(content=None, tool_calls=calls),
        ToolMessage(content="x", tool_call_id="a"),
    ]
    swapped = [sent[0], ToolMessage(content="x", tool_call_id="b")]
    assert _essence(swapped, ids=False) != _essence(sent, ids=False)
