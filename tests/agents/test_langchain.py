"""`LangChainChatModel` and `from_langchain`: LangChain chat models and tools in agents.

Two models stand behind the wrapper here: a small `BaseChatModel` of the tests (`ScriptChat`,
which plays scripted ``AIMessage`` replies and streams them as LangChain's providers do,
usage and finish reasons included), and LangChain's own ``ChatOpenAI`` pointed at LLMock (a
mock OpenAI server on a free loopback port), which brings a real provider's clients, errors
and event-loop habits. The tests that hold for any chat model take a `Backend` (how to script a
reply on it, and the wrapped model), so that they can move onto a shared conformance kit.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import openai
import pytest
from _agents import SHELL_POLICY, Shell
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.messages import SystemMessage as LCSystemMessage
from langchain_core.messages import ToolMessage as LCToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import StructuredTool, ToolException
from langchain_core.tools import tool as langchain_tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_openai import ChatOpenAI
from llmock.pytest_plugin import LLMock
from llmock.scenarios import Reply
from llmock.scenarios import ToolCall as ScriptedCall
from pydantic import BaseModel, Field

from interlock import ModelError, Price
from interlock.agents import ApprovalPolicy as Policy
from interlock.agents import (
    AssistantMessage,
    ChatModel,
    LangChainChatModel,
    Message,
    Reject,
    SystemMessage,
    Tool,
    ToolAgent,
    ToolCall,
    ToolMessage,
    ToolSpec,
    Usage,
    UserMessage,
    conversation,
    from_langchain,
    require_approval,
)
from interlock.agents._messages import message_from_chunks
from interlock.runtime import usage_of
from interlock.stores import SqliteStore

pytestmark = pytest.mark.anyio

HELLO = [UserMessage(content="Hello")]
SEARCH = ToolSpec(
    name="search",
    description="Search the web.",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)


# -- a LangChain chat model of the tests -----------------------------------------------------


class ScriptChat(BaseChatModel):
    """A LangChain chat model that plays scripted replies, whole or streamed.

    Streamed, a reply comes as a provider's LangChain class sends it: the text in pieces, each
    tool call as ``tool_call_chunks`` (id and name first, the JSON arguments in pieces), the
    input tokens on the first chunk and the rest of the usage with ``response_metadata`` on
    the last.
    """

    replies: list[AIMessage] = Field(default_factory=list)
    failures: list[Exception] = Field(default_factory=list)
    """Raised by the next calls, before any reply."""
    fail_midstream: Exception | None = None
    """Raised by a stream after its first chunk."""
    seen: list[list[BaseMessage]] = Field(default_factory=list)
    bound: list[dict[str, Any]] = Field(default_factory=list)
    chunk_size: int = 4
    gate: Any = None
    """An asyncio.Event (of the loop the model runs in) a call waits for, when set."""
    started: Any = None
    model_name: str = "script-1"

    @property
    def _llm_type(self) -> str:
        return "script-chat"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_model_name"] = self.model_name
        return params

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        wire = [convert_to_openai_tool(t) for t in tools]
        self.bound.append({"tools": wire, **kwargs})
        return self.bind(tools=wire, **kwargs)

    async def _next(self, messages: list[BaseMessage]) -> AIMessage:
        self.seen.append(list(messages))
        if self.started is not None:
            self.started.append(contextvars.copy_context().get(CALLER))
        if self.gate is not None:
            await self.gate.wait()
        if self.failures:
            raise self.failures.pop(0)
        assert self.replies, "ScriptChat has no reply left"
        return self.replies.pop(0)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise AssertionError("the wrapper calls the async API")

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=await self._next(messages))])

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        reply = await self._next(messages)
        size = self.chunk_size
        usage = dict(reply.usage_metadata or {})
        first: dict[str, Any] = {"additional_kwargs": dict(reply.additional_kwargs)}
        if usage:
            first["usage_metadata"] = {
                "input_tokens": usage["input_tokens"],
                "output_tokens": 0,
                "total_tokens": usage["input_tokens"],
            }
        pieces: list[AIMessageChunk] = []
        text = reply.content if isinstance(reply.content, str) else ""
        for i in range(0, len(text), size):
            pieces.append(AIMessageChunk(content=text[i : i + size]))
        calls = [
            (c["id"], c["name"], msgspec.json.encode(c["args"]).decode()) for c in reply.tool_calls
        ] + [(c["id"], c["name"], c["args"] or "") for c in reply.invalid_tool_calls]
        for index, (call_id, name, arguments) in enumerate(calls):
            parts = [arguments[i : i + size] for i in range(0, len(arguments), size)] or [""]
            for n, part in enumerate(parts):
                head = n == 0
                pieces.append(
                    AIMessageChunk(
                        content="",
                        tool_call_chunks=[
                            {
                                "id": call_id if head else None,
                                "name": name if head else None,
                                "args": part,
                                "index": index,
                                "type": "tool_call_chunk",
                            }
                        ],
                    )
                )
        last: dict[str, Any] = {"response_metadata": dict(reply.response_metadata)}
        if usage:
            last["usage_metadata"] = {**usage, "input_tokens": 0}
            last["usage_metadata"]["total_tokens"] = usage["output_tokens"]
        for n, piece in enumerate(pieces or [AIMessageChunk(content="")]):
            extra = first if n == 0 else {}
            if extra:
                piece = piece.model_copy(update=extra)
            yield ChatGenerationChunk(message=piece)
            if n == 0 and self.fail_midstream is not None:
                raise self.fail_midstream
        yield ChatGenerationChunk(message=AIMessageChunk(content="", **last))


CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="none")


def ai(
    text: str = "",
    *calls: tuple[str, dict[str, Any]],
    finish: str | None = None,
    key: str = "finish_reason",
    usage: tuple[int, int, int] | None = None,
    **extra: Any,
) -> AIMessage:
    """An ``AIMessage`` as a provider's LangChain class returns it."""
    metadata = {key: finish} if finish is not None else {}
    fields: dict[str, Any] = {}
    if usage is not None:
        fields["usage_metadata"] = {
            "input_tokens": usage[0],
            "output_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
            "input_token_details": {"cache_read": usage[2]},
        }
    return AIMessage(
        content=text,
        tool_calls=[
            {"id": f"call_{i}", "name": name, "args": args, "type": "tool_call"}
            for i, (name, args) in enumerate(calls)
        ],
        response_metadata=metadata,
        **fields,
        **extra,
    )


# -- the two backends ------------------------------------------------------------------------


@dataclass
class Backend:
    """A LangChain chat model to test the wrapper on, and how to script its next reply."""

    name: str
    chat: BaseChatModel
    add: Callable[[str | None, Sequence[tuple[str, dict[str, Any]]], str | None], None]
    requests: Callable[[], int]
    options: dict[str, Any] = field(default_factory=dict)

    def model(self, **kwargs: Any) -> LangChainChatModel:
        return LangChainChatModel(self.chat, **{**self.options, **kwargs})


def script_backend() -> Backend:
    chat = ScriptChat()

    def add(text: str | None, calls: Sequence[tuple[str, dict[str, Any]]], finish: str | None):
        reason = finish or ("tool_calls" if calls else "stop")
        chat.replies.append(ai(text or "", *calls, finish=reason, usage=(12, 5, 3)))

    return Backend("script", chat, add, lambda: len(chat.seen))


def llmock_backend(llmock: LLMock) -> Backend:
    chat = ChatOpenAI(
        model="gpt-4o-mini",
        base_url=llmock.base_url(),
        api_key="sk-test",  # type: ignore[arg-type]
        max_retries=0,
        stream_usage=True,
    )

    def add(text: str | None, calls: Sequence[tuple[str, dict[str, Any]]], finish: str | None):
        scripted = tuple(ScriptedCall(name, args) for name, args in calls)
        llmock.add(Reply(text=text, tool_calls=scripted, finish_reason=finish))

    return Backend("ChatOpenAI", chat, add, lambda: len(llmock.requests))


@pytest.fixture(params=["script", "ChatOpenAI"])
def backend(request: pytest.FixtureRequest, llmock: LLMock) -> Backend:
    if request.param == "script":
        return script_backend()
    return llmock_backend(llmock)


async def joined(model: ChatModel, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    return message_from_chunks([c async for c in model.stream(messages, tools)])


def same(a: AssistantMessage, b: AssistantMessage) -> None:
    """The same reply, but for the ids a provider draws anew for each call."""
    assert (a.content, a.finish_reason, a.usage) == (b.content, b.finish_reason, b.usage)
    assert [(c.name, c.arguments, c.raw_arguments) for c in a.tool_calls] == [
        (c.name, c.arguments, c.raw_arguments) for c in b.tool_calls
    ]


# -- what holds on any backend ---------------------------------------------------------------


async def test_a_text_reply(backend: Backend) -> None:
    backend.add("The weather in Paris is sunny.", (), None)
    reply = await backend.model().generate(HELLO, [SEARCH])
    assert reply.content == "The weather in Paris is sunny."
    assert reply.tool_calls == ()
    assert reply.finish_reason == "stop"
    assert reply.usage is not None and reply.usage.output_tokens > 0


async def test_parallel_tool_calls_come_back_in_order(backend: Backend) -> None:
    backend.add(None, [("search", {"q": "Paris"}), ("search", {"q": "Rome"})], None)
    reply = await backend.model().generate(HELLO, [SEARCH])
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("search", {"q": "Paris"}),
        ("search", {"q": "Rome"}),
    ]
    assert len({c.id for c in reply.tool_calls}) == 2 and all(c.id for c in reply.tool_calls)
    assert reply.content is None
    assert reply.finish_reason == "tool_calls"


@pytest.mark.parametrize(
    ("text", "calls", "finish"),
    [
        ("A longer answer, in several pieces.", [], None),
        (None, [("search", {"q": "Paris"}), ("search", {"q": "Rome, Italy"})], None),
        ("Let me look.", [("search", {"q": "Paris"})], None),
        ("Cut sho", [], "length"),
    ],
    ids=["text", "parallel calls", "text and a call", "cut short"],
)
async def test_the_stream_joins_into_what_generate_returns(
    backend: Backend, text: str | None, calls: list[tuple[str, dict[str, Any]]], finish: str | None
) -> None:
    backend.add(text, calls, finish)
    backend.add(text, calls, finish)
    model = backend.model()
    whole = await model.generate(HELLO, [SEARCH])
    streamed = await joined(model, HELLO, [SEARCH])
    same(streamed, whole)
    assert whole.content == text
    assert whole.finish_reason == (finish or ("tool_calls" if calls else "stop"))
    # generate may stream too, and gives the same message.
    backend.add(text, calls, finish)
    same(await backend.model(stream=True).generate(HELLO, [SEARCH]), whole)


async def test_the_stream_yields_pieces_as_they_come(backend: Backend) -> None:
    backend.add("One two three four five six.", (), None)
    chunks = [c async for c in backend.model().stream(HELLO, [])]
    assert len([c for c in chunks if c.content]) > 1
    assert chunks[0].role == "assistant" and all(c.role is None for c in chunks[1:])


async def test_a_stream_closed_early_is_no_error(backend: Backend) -> None:
    backend.add("One two three four five six seven eight nine ten.", (), None)
    backend.add("Again.", (), None)
    model = backend.model()
    async with aclosing(model.stream(HELLO, [])) as chunks:
        async for _ in chunks:
            break
    assert (await model.generate(HELLO, [])).content == "Again."


def test_run_sync_then_resume_sync_with_a_tool_that_needs_approval(
    backend: Backend, tmp_path: Path
) -> None:
    # Each sync call runs in an event loop of its own; one model serves both.
    backend.add(None, [("execute", {"command": "rm -rf /tmp/x"})], None)
    backend.add("Removed /tmp/x.", (), None)
    shell = Shell()
    store = SqliteStore(tmp_path / "agent.db")
    app = ToolAgent("ops", backend.model(), shell.tools, policy=SHELL_POLICY).compile(store=store)
    try:
        first = app.run_sync({"messages": [UserMessage(content="clean up /tmp/x")]}, thread="t")
        assert first.status == "interrupted" and shell.entered["execute"] == 0
        assert first.interrupts[0].info["tool"] == "execute"
        done = app.resume_sync("t", {first.interrupts[0].id: "approve"})
    finally:
        anyio.run(store.close)
    assert done.status == "done"
    assert shell.commands == ["rm -rf /tmp/x"]
    answer = conversation(done.values["messages"])[-1]
    assert isinstance(answer, AssistantMessage)
    assert (answer.content, answer.finish_reason) == ("Removed /tmp/x.", "stop")
    assert backend.requests() == 2


# -- the conversation, both ways ---------------------------------------------------------------


async def test_the_conversation_reaches_the_model_as_langchain_messages() -> None:
    chat = ScriptChat(replies=[ai("Sunny.", finish="stop")])
    messages: list[Message] = [
        SystemMessage(content="Be brief."),
        UserMessage(content="Weather?", name="ada"),
        AssistantMessage(
            content="Looking.",
            tool_calls=(
                ToolCall(id="c1", name="search", arguments={"q": "Paris"}),
                ToolCall(id="c2", name="search", raw_arguments="{not json"),
            ),
        ),
        ToolMessage(content="sunny", tool_call_id="c1", name="search"),
        ToolMessage(content="Error: bad arguments", tool_call_id="c2", status="error"),
    ]
    await LangChainChatModel(chat, tool_choice="auto").generate(messages, [SEARCH])
    system, user, assistant, answer, failed = chat.seen[0]
    assert isinstance(system, LCSystemMessage) and system.content == "Be brief."
    assert isinstance(user, HumanMessage) and (user.content, user.name) == ("Weather?", "ada")
    assert isinstance(assistant, AIMessage) and assistant.content == "Looking."
    assert assistant.tool_calls == [
        {"id": "c1", "name": "search", "args": {"q": "Paris"}, "type": "tool_call"}
    ]
    assert [(c["id"], c["args"]) for c in assistant.invalid_tool_calls] == [("c2", "{not json")]
    assert isinstance(answer, LCToolMessage)
    assert (answer.tool_call_id, answer.content, answer.status) == ("c1", "sunny", "success")
    assert isinstance(failed, LCToolMessage) and failed.status == "error"
    # The tools were bound in the OpenAI shape, with the model's options.
    assert chat.bound == [{"tools": [SEARCH.to_openai()], "tool_choice": "auto"}]


async def test_without_tools_the_model_is_asked_as_it_is() -> None:
    chat = ScriptChat(replies=[ai("Hi.", finish="stop")])
    await LangChainChatModel(chat).generate(HELLO, [])
    assert chat.bound == []


async def test_arguments_that_are_not_json_are_kept_raw() -> None:
    bad = {"id": "c9", "name": "search", "args": '{"q": "Par', "error": "bad JSON"}
    chat = ScriptChat(
        replies=[
            AIMessage(content="", invalid_tool_calls=[{**bad, "type": "invalid_tool_call"}]),
            AIMessage(content="", invalid_tool_calls=[{**bad, "type": "invalid_tool_call"}]),
        ]
    )
    model = LangChainChatModel(chat)
    for reply in [await model.generate(HELLO, [SEARCH]), await joined(model, HELLO, [SEARCH])]:
        (call,) = reply.tool_calls
        assert (call.id, call.name, call.arguments, call.raw_arguments) == (
            "c9",
            "search",
            {},
            '{"q": "Par',
        )


async def test_a_call_without_an_id_gets_one() -> None:
    chat = ScriptChat(
        replies=[AIMessage(content="", tool_calls=[{"name": "search", "args": {}, "id": None}])]
    )
    (call,) = (await LangChainChatModel(chat).generate(HELLO, [SEARCH])).tool_calls
    assert call.id == "call_0"


async def test_text_in_content_blocks_is_read() -> None:
    blocks = [
        {"type": "thinking", "thinking": "hmm"},
        {"type": "text", "text": "Sunny "},
        {"type": "text", "text": "today."},
    ]
    chat = ScriptChat(replies=[AIMessage(content=blocks)])  # type: ignore[arg-type]
    assert (await LangChainChatModel(chat).generate(HELLO, [])).content == "Sunny today."


# -- why a reply ended, and what it cost -----------------------------------------------------


@pytest.mark.parametrize(
    ("key", "raw", "calls", "expected"),
    [
        ("finish_reason", "stop", False, "stop"),
        ("finish_reason", "length", False, "length"),
        ("finish_reason", "tool_calls", True, "tool_calls"),
        ("finish_reason", "content_filter", False, "content_filter"),
        ("stop_reason", "end_turn", False, "stop"),  # Anthropic
        ("stop_reason", "max_tokens", False, "length"),
        ("stop_reason", "tool_use", True, "tool_calls"),
        ("stop_reason", "refusal", False, "refusal"),
        ("stopReason", "guardrail_intervened", False, "content_filter"),  # Bedrock
        ("done_reason", "length", False, "length"),  # Ollama
        ("finish_reason", "MAX_TOKENS", False, "length"),  # Gemini
        ("finish_reason", "SAFETY", False, "content_filter"),
        ("finish_reason", "STOP", True, "tool_calls"),  # Gemini's calls "stop"
        ("finish_reason", "something_new", False, None),
        (None, None, False, None),
    ],
)
async def test_why_a_reply_ended_is_read_from_each_providers_metadata(
    key: str | None, raw: str | None, calls: bool, expected: str | None
) -> None:
    call = [("search", {"q": "x"})] if calls else []
    make = lambda: ai("Hi", *call, finish=raw, key=key or "finish_reason")  # noqa: E731
    model = LangChainChatModel(ScriptChat(replies=[make(), make()]))
    assert (await model.generate(HELLO, [SEARCH])).finish_reason == expected
    assert (await joined(model, HELLO, [SEARCH])).finish_reason == expected


async def test_a_refusal_is_a_reason_a_reply_ended() -> None:
    refusal = dict(additional_kwargs={"refusal": "I cannot help with that."})
    chat = ScriptChat(replies=[ai("", finish="stop", **refusal), ai("", finish="stop", **refusal)])
    model = LangChainChatModel(chat)
    for reply in [await model.generate(HELLO, []), await joined(model, HELLO, [])]:
        assert (reply.content, reply.finish_reason) == ("I cannot help with that.", "refusal")


async def test_a_reply_carries_the_tokens_its_call_used() -> None:
    chat = ScriptChat(replies=[ai("Hi.", usage=(120, 7, 100)), ai("Hi.", usage=(120, 7, 100))])
    model = LangChainChatModel(chat)
    expected = Usage(input_tokens=120, output_tokens=7, cached_tokens=100)
    assert (await model.generate(HELLO, [])).usage == expected
    # Streamed, the usage comes in pieces (input first, output last) that add up.
    chunks = [c async for c in model.stream(HELLO, [])]
    assert len([c for c in chunks if c.usage is not None]) == 2
    assert message_from_chunks(chunks).usage == expected


async def test_a_reply_without_usage_has_none() -> None:
    reply = await LangChainChatModel(ScriptChat(replies=[ai("Hi.")])).generate(HELLO, [])
    assert reply.usage is None and reply.finish_reason is None


async def test_chatopenai_reports_its_usage(llmock: LLMock) -> None:
    backend = llmock_backend(llmock)
    backend.add("Sunny.", (), None)
    backend.add("Sunny.", (), None)
    model = backend.model()
    whole = await model.generate(HELLO, [])
    streamed = await joined(model, HELLO, [])
    assert whole.usage is not None and whole.usage.input_tokens > 0
    assert streamed.usage == whole.usage


async def test_an_agent_counts_a_langchain_model_s_usage_under_its_name() -> None:
    reply = AIMessage(
        content="Hi.", usage_metadata={"input_tokens": 11, "output_tokens": 4, "total_tokens": 15}
    )
    agent = ToolAgent("greeter", LangChainChatModel(ScriptChat(replies=[reply])))
    app = agent.compile(prices={"script-1": Price(input=1.0, output=2.0)})
    await app.run({"messages": ["hello"]}, thread="t")
    totals = usage_of((await app.get_state("t")).metadata)
    assert set(totals.models) == {"script-1"}  # the LangChain model's name, not its object
    assert totals.thread.tokens == 15 and totals.thread.cost == pytest.approx(19 / 1e6)


# -- failures ---------------------------------------------------------------------------------


def openai_error(status: int, headers: dict[str, str]) -> openai.APIStatusError:
    request = httpx.Request("POST", "https://api.example.com/v1/chat/completions")
    response = httpx.Response(status, headers=headers, request=request)
    kind = openai.RateLimitError if status == 429 else openai.InternalServerError
    return kind("provider said no", response=response, body=None)


class ClientError(Exception):
    """The shape of botocore's ClientError (Bedrock): the response as a dict."""

    def __init__(self, status: int, headers: dict[str, str]) -> None:
        super().__init__("An error occurred (ThrottlingException): slow down")
        self.response = {
            "Error": {"Code": "ThrottlingException"},
            "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": headers},
        }


class ProviderWrapped(Exception):
    """A provider's class that wraps its SDK's error in one of its own."""


def wrapped() -> Exception:
    try:
        try:
            raise openai_error(503, {"retry-after-ms": "1500"})
        except openai.APIStatusError as inner:
            raise ProviderWrapped("the call failed") from inner
    except ProviderWrapped as outer:
        return outer


@pytest.mark.parametrize(
    ("error", "status", "retry_after", "says"),
    [
        (openai_error(429, {"retry-after": "7"}), 429, 7.0, "asks to wait 7s"),
        (openai_error(500, {}), 500, None, "the provider failed"),
        (ClientError(429, {"retry-after": "2"}), 429, 2.0, "rate limiting"),
        (wrapped(), 503, 1.5, "HTTP 503"),
        (TimeoutError("read timed out"), None, None, "did not answer in time"),
        (ConnectionRefusedError("refused"), None, None, "could not reach"),
        (ValueError("model 'x' not found in region"), None, None, "check the model's settings"),
    ],
    ids=["openai 429", "openai 500", "bedrock 429", "wrapped 503", "timeout", "refused", "other"],
)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_what_the_model_raises_is_a_model_error(
    error: Exception, status: int | None, retry_after: float | None, says: str, stream: bool
) -> None:
    model = LangChainChatModel(ScriptChat(failures=[error]), stream=stream)
    with pytest.raises(ModelError) as caught:
        await model.generate(HELLO, [SEARCH])
    assert caught.value.status == status
    assert caught.value.retry_after == retry_after
    assert says in str(caught.value)
    assert "LangChain model 'script-1' (ScriptChat)" in str(caught.value)
    assert caught.value.__cause__ is error


async def test_a_stream_that_fails_midway_is_a_model_error() -> None:
    chat = ScriptChat(replies=[ai("One two three four.")], fail_midstream=openai_error(500, {}))
    with pytest.raises(ModelError, match="HTTP 500") as caught:
        [c async for c in LangChainChatModel(chat).stream(HELLO, [])]
    assert caught.value.status == 500


async def test_a_reply_that_is_no_ai_message_is_a_model_error() -> None:
    class Echo(ScriptChat):
        async def _agenerate(self, messages: Any, *args: Any, **kwargs: Any) -> ChatResult:
            return ChatResult(generations=[ChatGeneration(message=HumanMessage(content="hm"))])

    with pytest.raises(ModelError, match="not an AIMessage; check that the object wrapped"):
        await LangChainChatModel(Echo()).generate(HELLO, [])


async def test_chatopenai_errors_carry_status_and_retry_after(llmock: LLMock) -> None:
    model = llmock_backend(llmock).model()
    llmock.rate_limit(retry_after=3)
    with pytest.raises(ModelError, match="HTTP 429") as caught:
        await model.generate(HELLO, [SEARCH])
    assert (caught.value.status, caught.value.retry_after) == (429, 3.0)
    assert caught.value.endpoint == llmock.base_url().rstrip("/")
    llmock.fail(500)
    with pytest.raises(ModelError, match="HTTP 500") as caught:
        [c async for c in model.stream(HELLO, [SEARCH])]
    assert caught.value.status == 500


async def test_chatopenai_timeout_is_a_model_error(llmock: LLMock) -> None:
    # A timeout of its own, so that ChatOpenAI's HTTP client (cached by base URL and
    # timeout) is not the one other tests share.
    chat = ChatOpenAI(
        model="gpt-4o-mini",
        base_url=llmock.base_url(),
        api_key="sk-test",  # type: ignore[arg-type]
        max_retries=0,
        timeout=0.3,
    )
    llmock.delay(3)
    with pytest.raises(ModelError, match="did not answer in time"):
        await LangChainChatModel(chat).generate(HELLO, [])


# -- event loops, cancellation, context ------------------------------------------------------


@pytest.mark.parametrize(
    "loops", [("asyncio", "asyncio"), ("trio", "trio"), ("asyncio", "trio")], ids="-then-".join
)
def test_chatopenai_serves_one_event_loop_after_another(
    llmock: LLMock, loops: tuple[str, str]
) -> None:
    llmock.add(Reply(text="First."), Reply(text="Second."))
    model = llmock_backend(llmock).model()
    replies = [anyio.run(model.generate, HELLO, [], backend=loop).content for loop in loops]
    assert replies == ["First.", "Second."]


# The connection the first loop left behind cannot be closed any more: the collector reports it.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_in_the_callers_loop_chatopenai_breaks_in_the_second_one(llmock: LLMock) -> None:
    # Why the wrapper runs models in a loop of their own: ChatOpenAI keeps one HTTP client
    # per base URL and timeout for the whole process, and its pooled connection belongs to
    # the first loop. (A timeout of its own keeps this client from the other tests.)
    llmock.add(Reply(text="First."), Reply(text="Second."))
    chat = ChatOpenAI(
        model="gpt-4o-mini",
        base_url=llmock.base_url(),
        api_key="sk-test",  # type: ignore[arg-type]
        max_retries=0,
        timeout=41.5,
    )
    model = LangChainChatModel(chat, own_loop=False)
    assert asyncio.run(model.generate(HELLO, [])).content == "First."
    with pytest.raises(ModelError, match="Event loop is closed"):
        asyncio.run(model.generate(HELLO, []))
    gc.collect()  # the abandoned connection is reported here, under this test's filters


async def test_a_cancelled_call_is_cancelled_in_the_models_loop() -> None:
    chat = ScriptChat(replies=[ai("never")])
    gate_holder: list[asyncio.Event] = []

    async def make_gate() -> None:
        gate_holder.append(asyncio.Event())

    from interlock.agents._langchain import _shared_loop

    await _shared_loop().call(make_gate)
    chat.gate = gate_holder[0]
    chat.started = []
    model = LangChainChatModel(chat)
    with anyio.move_on_after(0.3) as scope:
        await model.generate(HELLO, [])
    assert scope.cancelled_caught
    assert len(chat.seen) == 1
    # The gate never opened: the task in the model's loop was cancelled, not left waiting.
    tasks: list[int] = []

    async def count() -> None:
        tasks.extend(
            1 for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()
        )

    await _shared_loop().call(count)
    assert tasks == []


async def test_in_the_callers_loop_it_runs_on_asyncio_only(anyio_backend: str) -> None:
    model = LangChainChatModel(ScriptChat(replies=[ai("Hi.")]), own_loop=False)
    if anyio_backend == "asyncio":
        assert (await model.generate(HELLO, [])).content == "Hi."
    else:
        with pytest.raises(ModelError, match=r"own_loop=False.*LangChain runs only on asyncio"):
            await model.generate(HELLO, [])


async def test_context_variables_reach_the_model() -> None:
    chat = ScriptChat(replies=[ai("Hi.")], started=[])
    token = CALLER.set("agent-ops")
    try:
        await LangChainChatModel(chat).generate(HELLO, [])
    finally:
        CALLER.reset(token)
    assert chat.started == ["agent-ops"]


async def test_a_closed_model_says_so() -> None:
    model = LangChainChatModel(ScriptChat(replies=[ai("Hi.")]))
    async with model:
        pass
    with pytest.raises(ModelError, match=r"was closed \(aclose\(\)\)"):
        await model.generate(HELLO, [])


# -- what it is --------------------------------------------------------------------------------


def test_it_is_a_chat_model_and_shows_what_it_wraps(llmock: LLMock) -> None:
    model = llmock_backend(llmock).model(stream=True)
    assert isinstance(model, ChatModel)
    assert model.name == "gpt-4o-mini"
    assert model.endpoint == llmock.base_url().rstrip("/")
    assert repr(model) == "<LangChainChatModel ChatOpenAI 'gpt-4o-mini' streaming>"
    assert LangChainChatModel(ScriptChat()).endpoint == "script:script-1"


def test_what_cannot_be_wrapped_is_refused() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    with pytest.raises(TypeError, match="wraps a LangChain chat model"):
        LangChainChatModel("gpt-4o")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot call tools"):
        LangChainChatModel(FakeListChatModel(responses=["hi"]))
    with pytest.raises(TypeError, match="stream must be"):
        LangChainChatModel(ScriptChat(), stream="yes")  # type: ignore[arg-type]


# -- LangChain tools -------------------------------------------------------------------------


class Deploy(BaseModel):
    """Arguments of a deployment."""

    service: str = Field(description="The service to deploy.")
    replicas: int = Field(default=1, ge=1, le=10, description="How many copies.")


class Ops:
    """Two LangChain tools, a ``@tool`` function and a ``StructuredTool``, that record calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

        @langchain_tool
        def restart(service: str) -> str:
            """Restart a service.

            Args:
                service: The service's name.
            """
            self.calls.append(("restart", {"service": service}))
            return f"restarted {service}"

        async def deploy(service: str, replicas: int = 1) -> dict[str, Any]:
            self.calls.append(("deploy", {"service": service, "replicas": replicas}))
            if service == "broken":
                raise ToolException("the image of broken does not exist")
            return {"service": service, "replicas": replicas, "ok": True}

        self.restart = restart
        self.deploy = StructuredTool.from_function(
            coroutine=deploy,
            name="deploy",
            description="Deploy a service.",
            args_schema=Deploy,
        )

    @property
    def tools(self) -> list[Tool]:
        return [from_langchain(self.restart), from_langchain(self.deploy)]


def test_a_langchain_tool_is_offered_with_its_schema() -> None:
    restart, deploy = Ops().tools
    assert (restart.name, restart.description) == ("restart", restart.description)
    assert restart.description.startswith("Restart a service.")
    assert restart.parameters["required"] == ["service"]
    assert restart.parameters["properties"]["service"]["type"] == "string"
    assert (deploy.name, deploy.description) == ("deploy", "Deploy a service.")
    props = deploy.parameters["properties"]
    assert props["replicas"] == {
        "type": "integer",
        "default": 1,
        "minimum": 1,
        "maximum": 10,
        "description": "How many copies.",
    }
    assert deploy.parameters["required"] == ["service"]
    # The schema is checked before the tool runs.
    with pytest.raises(ValueError, match="replicas"):
        deploy.check({"service": "api", "replicas": 50})


def test_a_json_schema_args_schema_is_used_as_it_is() -> None:
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "What to read."}},
        "required": ["path"],
    }
    read = StructuredTool(
        name="read_file",
        description="Read a file.",
        args_schema=schema,
        func=lambda path: f"contents of {path}",
    )
    made = from_langchain(read, name="cat", description="Print a file.", idempotent=True)
    assert (made.name, made.description, made.idempotent) == ("cat", "Print a file.", True)
    assert made.parameters["properties"] == schema["properties"]


async def test_a_langchain_tool_runs_sync_or_async() -> None:
    ops = Ops()
    restart, deploy = ops.tools
    call = ToolCall(id="c1", name="restart", arguments={})
    assert await restart.run({"service": "api"}, call, None) == "restarted api"
    assert await deploy.run({"service": "api", "replicas": 2}, call, None) == {
        "service": "api",
        "replicas": 2,
        "ok": True,
    }
    with pytest.raises(ToolException, match="does not exist"):
        await deploy.run({"service": "broken"}, call, None)


def test_what_cannot_be_a_tool_is_refused() -> None:
    with pytest.raises(TypeError, match="takes a LangChain tool"):
        from_langchain(lambda: None)  # type: ignore[arg-type]
    spaced = StructuredTool.from_function(func=lambda: "x", name="look around", description="Look.")
    with pytest.raises(ValueError, match="pass name="):
        from_langchain(spaced)
    assert from_langchain(spaced, name="look_around").name == "look_around"


GATED = Policy({"restart": "allow", "deploy": require_approval()})


def ops_app(chat: ScriptChat, ops: Ops, store: Any) -> Any:
    return ToolAgent("ops", LangChainChatModel(chat), ops.tools, policy=GATED).compile(store=store)


async def test_langchain_tools_under_a_policy_approved(tmp_path: Path) -> None:
    ops = Ops()
    chat = ScriptChat(
        replies=[
            ai("", ("restart", {"service": "api"}), ("deploy", {"service": "api", "replicas": 3})),
            ai("Restarted and deployed."),
        ]
    )
    store = SqliteStore(tmp_path / "agent.db")
    try:
        app = ops_app(chat, ops, store)
        first = await app.run({"messages": [UserMessage(content="ship api")]}, thread="t")
        assert first.status == "interrupted"
        # The allowed tool ran; the gated one waits for a person.
        assert ops.calls == [("restart", {"service": "api"})]
        (question,) = first.interrupts
        assert question.info["tool"] == "deploy"
        assert question.info["arguments"] == {"service": "api", "replicas": 3}
        done = await app.resume("t", {question.id: "approve"})
    finally:
        await store.close()
    assert done.status == "done"
    assert ops.calls[-1] == ("deploy", {"service": "api", "replicas": 3})
    # The model read both results.
    answers = [m for m in chat.seen[-1] if isinstance(m, LCToolMessage)]
    assert [a.content for a in answers] == [
        "restarted api",
        '{"service":"api","replicas":3,"ok":true}',
    ]


async def test_langchain_tools_under_a_policy_rejected(tmp_path: Path) -> None:
    ops = Ops()
    chat = ScriptChat(replies=[ai("", ("deploy", {"service": "api"})), ai("I will not deploy it.")])
    store = SqliteStore(tmp_path / "agent.db")
    try:
        app = ops_app(chat, ops, store)
        first = await app.run({"messages": [UserMessage(content="ship api")]}, thread="t")
        done = await app.resume("t", {first.interrupts[0].id: Reject(message="not today")})
    finally:
        await store.close()
    assert done.status == "done"
    assert ops.calls == []  # never ran
    (answer,) = [m for m in chat.seen[-1] if isinstance(m, LCToolMessage)]
    assert "not today" in str(answer.content)
    assert answer.status == "error"


async def test_a_failing_langchain_tool_is_an_error_the_model_reads(tmp_path: Path) -> None:
    ops = Ops()
    chat = ScriptChat(
        replies=[ai("", ("deploy", {"service": "broken"})), ai("The image is missing.")]
    )
    store = SqliteStore(tmp_path / "agent.db")
    try:
        app = ops_app(chat, ops, store)
        first = await app.run({"messages": [UserMessage(content="ship broken")]}, thread="t")
        done = await app.resume("t", {first.interrupts[0].id: "approve"})
    finally:
        await store.close()
    assert done.status == "done"
    (answer,) = [m for m in chat.seen[-1] if isinstance(m, LCToolMessage)]
    assert answer.content == "Error: ToolException: the image of broken does not exist"
    assert answer.status == "error"
