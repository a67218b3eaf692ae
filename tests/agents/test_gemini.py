"""`GeminiChatModel` through the real google-genai SDK, against LLMock's Gemini routes and a small
canned Gemini endpoint (``_fake_gemini``) for what LLMock cannot produce.

The first part (`ChatModelContract`) asks only what any chat model adapter must do, given a
factory of models pointed at LLMock: it is written so that it can move onto a shared conformance
kit as it is. The second part checks what is Gemini's own: the request's shape (validated
against the SDK's own types), call ids, finish reasons, usage, errors and schemas.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import pytest
from _agents import SHELL_POLICY, Shell
from _fake_gemini import FakeGemini, gemini_error, response, streamed, whole
from _fake_openai import closed_port, stall
from google.genai import types
from llmock.pytest_plugin import LLMock
from llmock.scenarios import Reply
from llmock.scenarios import ToolCall as ScriptedCall

from interlock._errors import ModelError
from interlock.agents import (
    AssistantMessage,
    ChatModel,
    Message,
    ScriptedModel,
    SystemMessage,
    ToolAgent,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
    call,
    conversation,
)
from interlock.agents._gemini import GeminiChatModel, gemini_schema
from interlock.agents._messages import message_from_chunks
from interlock.agents._openai import OpenAIChatModel
from interlock.stores import SqliteStore

pytestmark = pytest.mark.anyio

HELLO = [UserMessage(content="Hello")]
SEARCH = ToolSpec(
    name="search",
    description="Search the web.",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)

ModelFactory = Callable[..., ChatModel]


def gemini_at_llmock(llmock: LLMock) -> ModelFactory:
    """Gemini models at LLMock (its pytest fixture serves it on a free loopback port)."""

    def make(**kwargs: Any) -> ChatModel:
        return GeminiChatModel(
            "gemini-2.0-flash",
            base_url=llmock.base_url("gemini"),
            api_key="test-key",
            max_retries=kwargs.pop("max_retries", 0),
            **kwargs,
        )

    return make


async def close(model: ChatModel) -> None:
    aclose = getattr(model, "aclose", None)
    if aclose is not None:
        await aclose()


# -- what any adapter must do (a conformance kit's part) -------------------------------------


class ChatModelContract:
    """What a chat model adapter must do, asked through `ChatModel` only, against LLMock.

    A subclass gives `make_model` (a fixture returning a factory: ``make(stream=..., timeout=...,
    max_retries=...)``) and `provider` (LLMock's name for the provider's routes).
    """

    provider: str

    @pytest.fixture
    def make_model(self, llmock: LLMock) -> ModelFactory:
        raise NotImplementedError

    async def test_a_text_reply(self, llmock: LLMock, make_model: ModelFactory) -> None:
        llmock.add(Reply(text="Hi there."))
        model = make_model()
        try:
            reply = await model.generate(HELLO, [])
        finally:
            await close(model)
        assert reply.content == "Hi there."
        assert reply.tool_calls == ()
        assert reply.finish_reason == "stop"

    async def test_a_tool_call(self, llmock: LLMock, make_model: ModelFactory) -> None:
        llmock.add(Reply(tool_calls=(ScriptedCall("search", {"q": "weather in Paris"}),)))
        model = make_model()
        try:
            reply = await model.generate(HELLO, [SEARCH])
        finally:
            await close(model)
        [tool_call] = reply.tool_calls
        assert (tool_call.name, tool_call.arguments) == ("search", {"q": "weather in Paris"})
        assert tool_call.id
        assert reply.finish_reason == "tool_calls"

    async def test_parallel_tool_calls_come_back_in_order_with_distinct_ids(
        self, llmock: LLMock, make_model: ModelFactory
    ) -> None:
        calls = (ScriptedCall("search", {"q": "Paris"}), ScriptedCall("search", {"q": "Rome"}))
        llmock.add(Reply(tool_calls=calls))
        model = make_model()
        try:
            reply = await model.generate(HELLO, [SEARCH])
        finally:
            await close(model)
        assert [c.arguments for c in reply.tool_calls] == [{"q": "Paris"}, {"q": "Rome"}]
        assert len({c.id for c in reply.tool_calls}) == 2

    @pytest.mark.parametrize("kind", ["text", "calls"])
    async def test_the_stream_joined_is_what_generate_returns(
        self, llmock: LLMock, make_model: ModelFactory, kind: str
    ) -> None:
        if kind == "text":
            scripted = Reply(text="The weather in Paris is sunny and warm today.")
        else:
            scripted = Reply(
                text="Let me look.",
                tool_calls=(
                    ScriptedCall("search", {"q": "Paris"}),
                    ScriptedCall("search", {"q": "Rome"}),
                ),
            )
        llmock.add(scripted, scripted)
        model = make_model()
        streaming = make_model(stream=True)
        try:
            whole_reply = await model.generate(HELLO, [SEARCH])
            chunks = [chunk async for chunk in streaming.stream(HELLO, [SEARCH])]
        finally:
            await close(model)
            await close(streaming)
        assert len(chunks) > 2  # it did come in pieces
        assert message_from_chunks(chunks) == whole_reply

    @pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
    @pytest.mark.parametrize("finish", ["stop", "length", "content_filter"])
    async def test_why_a_reply_ended_is_on_the_message(
        self, llmock: LLMock, make_model: ModelFactory, stream: bool, finish: str
    ) -> None:
        llmock.add(Reply(text="The weather in Paris is", finish_reason=finish))
        model = make_model(stream=stream)
        try:
            reply = await model.generate(HELLO, [])
        finally:
            await close(model)
        assert reply.finish_reason == finish

    @pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
    async def test_a_reply_carries_the_tokens_its_call_used_once(
        self, llmock: LLMock, make_model: ModelFactory, stream: bool
    ) -> None:
        llmock.add(Reply(text="The weather in Paris is sunny."), Reply(text="Again."))
        model = make_model(stream=stream)
        try:
            reply = await model.generate(HELLO, [SEARCH])
        finally:
            await close(model)
        assert reply.usage is not None
        assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0

    @pytest.mark.parametrize("status", [400, 401, 404, 429, 500, 503])
    async def test_an_error_status_is_a_model_error_with_the_status(
        self, llmock: LLMock, make_model: ModelFactory, status: int
    ) -> None:
        llmock.fail(status, message="it went wrong", retry_after=0.01)
        model = make_model()
        try:
            with pytest.raises(ModelError, match="it went wrong") as caught:
                await model.generate(HELLO, [])
        finally:
            await close(model)
        assert caught.value.status == status
        assert caught.value.endpoint

    async def test_a_rate_limit_is_retried_after_the_time_the_server_asks(
        self, llmock: LLMock, make_model: ModelFactory
    ) -> None:
        llmock.rate_limit(times=1, retry_after=1.0)  # longer than any backoff of its own
        llmock.add(Reply(text="Done."))
        model = make_model(max_retries=1)
        try:
            started = time.monotonic()
            reply = await model.generate(HELLO, [])
            waited = time.monotonic() - started
        finally:
            await close(model)
        assert reply.content == "Done."
        assert waited >= 1.0
        assert [r.status for r in llmock.requests] == [429, 200]

    async def test_a_rate_limit_still_there_after_the_retries_is_a_model_error(
        self, llmock: LLMock, make_model: ModelFactory
    ) -> None:
        llmock.rate_limit(times=3, retry_after=0.05)
        model = make_model(max_retries=2)
        try:
            with pytest.raises(ModelError, match=r"tried 3 times.*wait 0.05s") as caught:
                await model.generate(HELLO, [])
        finally:
            await close(model)
        assert caught.value.status == 429
        assert len(llmock.requests) == 3

    @pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
    async def test_a_timeout_is_a_model_error(
        self, llmock: LLMock, make_model: ModelFactory, stream: bool
    ) -> None:
        if stream:
            llmock.stall(after_chunks=1, seconds=3)
            llmock.add(Reply(text="one two three four five six"))
        else:
            llmock.delay(3)
        model = make_model(timeout=0.5, stream=stream)
        try:
            with pytest.raises(ModelError, match="did not answer in time"):
                await model.generate(HELLO, [])
        finally:
            await close(model)

    async def test_a_stream_that_breaks_off_is_a_model_error(
        self, llmock: LLMock, make_model: ModelFactory
    ) -> None:
        llmock.truncate(after_chunks=1)
        llmock.add(Reply(text="one two three four five six seven"))
        model = make_model(stream=True)
        try:
            with pytest.raises(ModelError, match="before the reply was finished"):
                await model.generate(HELLO, [])
        finally:
            await close(model)

    @pytest.mark.parametrize(
        "loops", [("asyncio", "asyncio"), ("trio", "trio"), ("asyncio", "trio")], ids="-then-".join
    )
    def test_one_model_serves_one_event_loop_after_another(
        self, llmock: LLMock, make_model: ModelFactory, loops: tuple[str, str]
    ) -> None:
        # What app.run_sync then app.resume_sync do: each call starts and ends a loop of its own.
        llmock.add(Reply(text="First."), Reply(text="Second."))
        model = make_model()
        replies = [anyio.run(model.generate, HELLO, [], backend=loop).content for loop in loops]
        assert replies == ["First.", "Second."]

    def test_run_sync_then_resume_sync_with_a_tool_that_needs_approval(
        self, llmock: LLMock, make_model: ModelFactory, tmp_path: Path
    ) -> None:
        llmock.call_tool("execute", {"command": "rm -rf /tmp/x"}).reply("Removed /tmp/x.")
        shell = Shell()
        store = SqliteStore(tmp_path / "agent.db")
        agent = ToolAgent("ops", make_model(), shell.tools, policy=SHELL_POLICY)
        app = agent.compile(store=store)
        try:
            first = app.run_sync({"messages": [UserMessage(content="clean up")]}, thread="t")
            assert first.status == "interrupted" and shell.entered["execute"] == 0
            done = app.resume_sync("t", {first.interrupts[0].id: "approve"})
        finally:
            anyio.run(store.close)
        assert done.status == "done"
        assert shell.commands == ["rm -rf /tmp/x"]
        messages = conversation(done.values["messages"])
        answer = messages[-1]
        assert isinstance(answer, AssistantMessage)
        assert (answer.content, answer.finish_reason) == ("Removed /tmp/x.", "stop")
        # The second request carried the call and its approved result back, paired.
        [assistant] = [m for m in messages if isinstance(m, AssistantMessage) and m.tool_calls]
        [result] = [m for m in messages if isinstance(m, ToolMessage)]
        assert result.tool_call_id == assistant.tool_calls[0].id
        assert len(llmock.requests) == 2


class TestGeminiContract(ChatModelContract):
    """The contract, for `GeminiChatModel` at LLMock's Gemini routes."""

    provider = "gemini"

    @pytest.fixture
    def make_model(self, llmock: LLMock) -> ModelFactory:
        return gemini_at_llmock(llmock)


# -- the request, as Gemini takes it ---------------------------------------------------------


CONVERSATION: list[Message] = [
    SystemMessage(content="Be brief."),
    UserMessage(content="Weather in Paris and Rome?"),
    AssistantMessage(
        content="Looking.",
        tool_calls=(
            ToolCall(id="call_a", name="search", arguments={"q": "Paris"}),
            ToolCall(id="call_b", name="search", arguments={"q": "Rome"}),
        ),
    ),
    # Answered out of order, and one failed: sent back in the order of the calls.
    ToolMessage(content="Rain", tool_call_id="call_b", status="error"),
    ToolMessage(content="Sunny, 24°C", tool_call_id="call_a", name="search"),
    SystemMessage(content="Answer in English."),
    UserMessage(content="Well?"),
]


async def test_the_request_carries_the_conversation_and_tools_in_gemini_shape(
    llmock: LLMock,
) -> None:
    llmock.add(Reply(text="Sunny in Paris, rain in Rome."))
    model = gemini_at_llmock(llmock)(temperature=0, max_output_tokens=64)
    try:
        await model.generate(CONVERSATION, [SEARCH])
    finally:
        await close(model)
    [record] = llmock.requests
    assert record.path == "/gemini/v1beta/models/gemini-2.0-flash:generateContent"
    body = record.body
    # Every part of the body is what the SDK's own types describe (they forbid unknown fields).
    contents = [types.Content.model_validate(c) for c in body["contents"]]
    system = types.Content.model_validate(body["systemInstruction"])
    [tool] = [types.Tool.model_validate(t) for t in body["tools"]]
    types.GenerationConfig.model_validate(body["generationConfig"])
    assert [p.text for p in system.parts or []] == ["Be brief.\n\nAnswer in English."]
    assert [c.role for c in contents] == ["user", "model", "user", "user"]
    assert contents[0].parts == [types.Part(text="Weather in Paris and Rome?")]
    assert contents[1].parts == [
        types.Part(text="Looking."),
        types.Part(function_call=types.FunctionCall(name="search", args={"q": "Paris"})),
        types.Part(function_call=types.FunctionCall(name="search", args={"q": "Rome"})),
    ]
    assert contents[2].parts == [
        types.Part(
            function_response=types.FunctionResponse(
                name="search", response={"result": "Sunny, 24°C"}
            )
        ),
        types.Part(
            function_response=types.FunctionResponse(name="search", response={"error": "Rain"})
        ),
    ]
    assert contents[3].parts == [types.Part(text="Well?")]
    [declaration] = tool.function_declarations or []
    assert (declaration.name, declaration.description) == ("search", "Search the web.")
    assert declaration.parameters == types.Schema(
        type=types.Type.OBJECT,
        properties={"q": types.Schema(type=types.Type.STRING)},
        required=["q"],
    )
    assert body["generationConfig"] == {"temperature": 0.0, "maxOutputTokens": 64}


@pytest.mark.parametrize("first_model", ["scripted", "openai"])
async def test_a_thread_switches_from_another_model_to_gemini_between_turns(
    llmock: LLMock, tmp_path: Path, first_model: str
) -> None:
    shell = Shell()
    store = SqliteStore(tmp_path / "agent.db")
    earlier: ChatModel
    if first_model == "scripted":
        earlier = ScriptedModel([call("read_file", {"path": "/etc/hosts"}), "It lists localhost."])
    else:
        llmock.call_tool("read_file", {"path": "/etc/hosts"}).reply("It lists localhost.")
        earlier = OpenAIChatModel(
            "gpt-4o-mini", base_url=llmock.base_url(), api_key="sk-test", max_retries=0
        )
    try:
        first = (
            await ToolAgent("ops", earlier, shell.tools, policy=SHELL_POLICY)
            .compile(store=store)
            .run({"messages": [UserMessage(content="What is in /etc/hosts?")]}, thread="t")
        )
        await close(earlier)
        assert first.status == "done"
        llmock.add(Reply(text="It maps names to addresses."))
        gemini = gemini_at_llmock(llmock)()
        app = ToolAgent("ops", gemini, shell.tools, policy=SHELL_POLICY).compile(store=store)
        second = await app.run(
            {"messages": [UserMessage(content="And what is it for?")]}, thread="t"
        )
        await close(gemini)
    finally:
        await store.close()
    assert second.status == "done"
    assert conversation(second.values["messages"])[-1].content == "It maps names to addresses."
    record = llmock.requests[-1]
    assert record.provider == "gemini"
    contents = [types.Content.model_validate(c) for c in record.body["contents"]]
    assert [c.role for c in contents] == ["user", "model", "user", "model", "user"]
    call_part, answer_part = contents[1].parts or [], contents[2].parts or []
    assert call_part[0].function_call == types.FunctionCall(
        name="read_file", args={"path": "/etc/hosts"}
    )
    assert answer_part[0].function_response == types.FunctionResponse(
        name="read_file", response={"result": "contents of /etc/hosts"}
    )


# -- what LLMock cannot produce: the canned endpoint ------------------------------------------


@pytest.fixture(scope="module")
def endpoint() -> Iterator[FakeGemini]:
    with FakeGemini() as fake:
        yield fake


@pytest.fixture
def fake(endpoint: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGemini]:
    """The endpoint with an empty script, and no Gemini settings from the environment."""
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    endpoint.reset()
    yield endpoint
    endpoint.reset()


def model_for(fake: FakeGemini, **kwargs: Any) -> GeminiChatModel:
    kwargs.setdefault("max_retries", 0)
    return GeminiChatModel("gemini-2.5-flash", base_url=fake.base_url, api_key="k-test", **kwargs)


TEXT = {"text": "Hi."}


@pytest.mark.parametrize(
    ("raw", "finish"),
    [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("PROHIBITED_CONTENT", "content_filter"),
        ("BLOCKLIST", "content_filter"),
        ("RECITATION", "content_filter"),
        ("SPII", "content_filter"),
        ("OTHER", None),
        ("MALFORMED_FUNCTION_CALL", None),
    ],
)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_gemini_finish_reasons_map_to_interlock_ones(
    fake: FakeGemini, raw: str, finish: str | None, stream: bool
) -> None:
    body = response(TEXT, finish=raw)
    fake.script(streamed(body) if stream else whole(body))
    async with model_for(fake, stream=stream) as model:
        reply = await model.generate(HELLO, [])
    assert (reply.content, reply.finish_reason) == ("Hi.", finish)


async def test_a_blocked_prompt_is_an_empty_reply_stopped_by_the_filter(fake: FakeGemini) -> None:
    fake.script(whole(response(finish=None, feedback={"blockReason": "PROHIBITED_CONTENT"})))
    async with model_for(fake) as model:
        reply = await model.generate(HELLO, [])
    assert reply == AssistantMessage(content="", finish_reason="content_filter")


async def test_usage_counts_cached_and_thinking_tokens(fake: FakeGemini) -> None:
    usage = {
        "promptTokenCount": 120,
        "candidatesTokenCount": 7,
        "thoughtsTokenCount": 30,
        "cachedContentTokenCount": 100,
        "totalTokenCount": 157,
    }
    fake.script(whole(response(TEXT, usage=usage)))
    async with model_for(fake) as model:
        reply = await model.generate(HELLO, [])
    assert reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.cached_tokens) == (
        120,
        37,
        100,
    )


async def test_streamed_usage_is_counted_once_though_every_chunk_reports_it(
    fake: FakeGemini,
) -> None:
    # Gemini repeats the running totals on each chunk: the last one is the whole.
    fake.script(
        streamed(
            response({"text": "Hello "}, finish=None, usage={"promptTokenCount": 10}),
            response(
                {"text": "there."},
                finish="STOP",
                usage={"promptTokenCount": 10, "candidatesTokenCount": 3},
            ),
        )
    )
    async with model_for(fake) as model:
        chunks = [c async for c in model.stream(HELLO, [])]
    reply = message_from_chunks(chunks)
    assert reply.content == "Hello there."
    assert reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (10, 3)
    assert fake.paths[0].endswith(":streamGenerateContent?alt=sse")


async def test_thoughts_are_left_out_of_the_reply(fake: FakeGemini) -> None:
    fake.script(whole(response({"text": "Let me think...", "thought": True}, {"text": "42."})))
    async with model_for(fake) as model:
        reply = await model.generate(HELLO, [])
    assert reply.content == "42."


async def test_call_ids_are_stable_and_unique_and_the_servers_own_are_kept(
    fake: FakeGemini,
) -> None:
    calls = response(
        {"functionCall": {"name": "search", "args": {"q": "Paris"}}},
        {"functionCall": {"name": "search", "args": {"q": "Paris"}}},
        {"functionCall": {"name": "search", "args": {"q": "Rome"}, "id": "server-id"}},
    )
    fake.script(whole(calls), streamed(calls), whole(calls))
    async with model_for(fake) as model:
        first = await model.generate(HELLO, [SEARCH])
        streamed_reply = message_from_chunks([c async for c in model.stream(HELLO, [SEARCH])])
        later = await model.generate([*HELLO, first, UserMessage(content="again")], [SEARCH])
    ids = [c.id for c in first.tool_calls]
    assert len(set(ids)) == 3 and ids[2] == "server-id"
    assert all(i.startswith("gemini_") for i in ids[:2])
    assert [c.id for c in streamed_reply.tool_calls] == ids  # the same request, the same ids
    assert not {c.id for c in later.tool_calls[:2]} & set(ids)  # a later turn, new ids
    assert first.finish_reason == "tool_calls"


@pytest.mark.parametrize(
    "how",
    ["header", "retry-info"],
)
async def test_a_rate_limit_is_retried_as_long_as_the_server_asks(
    fake: FakeGemini, how: str
) -> None:
    if how == "header":
        limited = gemini_error(429, "RESOURCE_EXHAUSTED", "quota", headers={"retry-after": "1"})
    else:
        limited = gemini_error(429, "RESOURCE_EXHAUSTED", "quota", retry_delay="1s")
    fake.script(limited, whole(response(TEXT)))
    async with model_for(fake, max_retries=1) as model:
        started = time.monotonic()
        reply = await model.generate(HELLO, [])
    assert reply.content == "Hi."
    assert time.monotonic() - started >= 1.0  # longer than any backoff of its own
    assert len(fake.requests) == 2


async def test_a_server_asking_for_a_long_wait_is_not_retried(fake: FakeGemini) -> None:
    fake.script(gemini_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded", retry_delay="3600s"))
    async with model_for(fake, max_retries=3) as model:
        with pytest.raises(ModelError, match=r"HTTP 429 RESOURCE_EXHAUSTED: Quota exceeded.*3600s"):
            await model.generate(HELLO, [])
    assert len(fake.requests) == 1


async def test_a_refused_key_points_at_the_key(fake: FakeGemini) -> None:
    fake.script(gemini_error(403, "PERMISSION_DENIED", "API key not valid."))
    async with model_for(fake, max_retries=2) as model:
        with pytest.raises(ModelError, match=r"API key not valid.*check api_key") as caught:
            await model.generate(HELLO, [])
    assert caught.value.status == 403
    assert len(fake.requests) == 1  # not retried


@pytest.mark.parametrize(
    "body",
    ['"just a string"', '{"candidates": []}', '{"candidates": [{"content": {"parts": []}}]}'],
)
async def test_a_malformed_body_is_a_model_error(fake: FakeGemini, body: str) -> None:
    fake.script(whole(body))
    async with model_for(fake) as model:
        with pytest.raises(ModelError, match="not a Gemini response"):
            await model.generate(HELLO, [])


async def test_a_stream_carrying_garbage_is_a_model_error(fake: FakeGemini) -> None:
    fake.script(streamed(response({"text": "Hi"}, finish=None), "{not json"))
    async with model_for(fake) as model:
        with pytest.raises(ModelError, match="not a Gemini response"):
            await model.generate(HELLO, [])


async def test_a_refused_connection_is_a_model_error() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    async with GeminiChatModel("gemini-2.5-flash", base_url=url, max_retries=1) as model:
        with pytest.raises(ModelError, match=r"could not reach .* \(tried 2 times\)"):
            await model.generate(HELLO, [])


async def test_a_stalled_server_times_out(fake: FakeGemini) -> None:
    fake.script(stall())
    async with model_for(fake, timeout=0.3) as model:
        with pytest.raises(ModelError, match=r"did not answer in time \(timeout 0.3s, tried once"):
            await model.generate(HELLO, [])


SDK_LEAVES_GENERATORS = (
    "the google-genai SDK does not close its inner async generator when a stream is closed "
    "early, and leaves it to the garbage collector, which trio reports as a ResourceWarning"
)


@pytest.mark.asyncio_only(reason=SDK_LEAVES_GENERATORS)
async def test_a_stream_closed_early_is_no_error_and_the_next_call_works(fake: FakeGemini) -> None:
    fake.script(
        streamed(*[response({"text": f"{n} "}, finish=None) for n in range(5)]),
        whole(response(TEXT)),
    )
    async with model_for(fake) as model:
        async with aclosing(model.stream(HELLO, [])) as chunks:
            first = await anext(chunks)
        assert first.content == "0 "
        assert (await model.generate(HELLO, [])).content == "Hi."


async def test_a_cancelled_request_is_cancelled_not_a_model_error(fake: FakeGemini) -> None:
    fake.script(stall())
    async with model_for(fake) as model:
        with anyio.move_on_after(0.3) as scope:
            await model.generate(HELLO, [])
    assert scope.cancelled_caught


async def test_a_closed_model_says_so(fake: FakeGemini) -> None:
    model = model_for(fake)
    await model.aclose()
    with pytest.raises(ModelError, match="was closed"):
        await model.generate(HELLO, [])


# -- set-up ----------------------------------------------------------------------------------


def test_google_without_a_key_is_a_model_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ModelError, match="no API key; pass api_key= or set GEMINI_API_KEY"):
        GeminiChatModel("gemini-2.5-flash")


async def test_the_endpoint_and_key_come_from_the_environment(
    fake: FakeGemini, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.base_url)
    monkeypatch.setenv("GEMINI_API_KEY", "from-env")
    fake.script(whole(response(TEXT)))
    async with GeminiChatModel("gemini-2.5-flash") as model:
        assert model.endpoint == fake.base_url
        await model.generate(HELLO, [])
    assert fake.requests[0].headers["x-goog-api-key"] == "from-env"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"model": ""}, ValueError),
        ({"model": 3}, TypeError),
        ({"base_url": "localhost:8000"}, ValueError),
        ({"timeout": 0}, ValueError),
        ({"max_retries": -1}, ValueError),
        ({"tools": []}, ValueError),
        ({"temprature": 0}, ValueError),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any], error: type[Exception]) -> None:
    kwargs = {"model": "gemini-2.5-flash", "api_key": "k", **kwargs}
    with pytest.raises(error):
        GeminiChatModel(**kwargs)


def test_it_is_a_chat_model_exported_lazily() -> None:
    import interlock.agents

    assert interlock.agents.GeminiChatModel is GeminiChatModel
    model = GeminiChatModel("gemini-2.5-flash", api_key="k", temperature=0)
    assert isinstance(model, ChatModel)
    assert model.params == {"temperature": 0}
    assert repr(model) == (
        "<GeminiChatModel 'gemini-2.5-flash' at https://generativelanguage.googleapis.com>"
    )


# -- schemas ---------------------------------------------------------------------------------


def test_json_schema_keywords_gemini_refuses_are_rewritten_or_dropped() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "where": {"$ref": "#/$defs/Place"},
            "when": {"type": ["string", "null"], "format": "date-time"},
            "mode": {"const": "fast"},
            "level": {"enum": [1, 2, 3], "description": "How hard."},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "note": {"anyOf": [{"type": "string", "format": "email"}, {"type": "null"}]},
            "ratio": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5},
        },
        "required": ["where"],
        "$defs": {"Place": {"type": "object", "properties": {"city": {"type": "string"}}}},
    }
    out = gemini_schema(schema)
    types.Schema.model_validate(out)  # what the SDK accepts
    assert out == {
        "type": "OBJECT",
        "properties": {
            "where": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}},
            "when": {"type": "STRING", "nullable": True, "format": "date-time"},
            "mode": {"enum": ["fast"]},
            "level": {"description": "How hard. (one of: 1, 2, 3)"},
            "tags": {"type": "ARRAY", "items": {"type": "STRING"}},
            "note": {"type": "STRING", "nullable": True},
            "ratio": {"type": "NUMBER"},
        },
        "required": ["where"],
    }


def test_a_recursive_schema_is_refused_with_what_to_do() -> None:
    schema = {
        "type": "object",
        "properties": {"child": {"$ref": "#/$defs/Node"}},
        "$defs": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}},
    }
    with pytest.raises(ValueError, match=r"recursive .* flatten it"):
        gemini_schema(schema)


async def test_a_tools_schema_with_refused_keywords_goes_through(llmock: LLMock) -> None:
    strict = ToolSpec(
        name="order",
        description="Place an order.",
        parameters={
            "type": "object",
            "additionalProperties": False,
            "properties": {"qty": {"type": "integer", "exclusiveMinimum": 0}},
        },
    )
    llmock.add(Reply(tool_calls=(ScriptedCall("order", {"qty": 2}),)))
    model = gemini_at_llmock(llmock)()
    try:
        reply = await model.generate(HELLO, [strict])
    finally:
        await close(model)
    assert reply.tool_calls[0].arguments == {"qty": 2}
    [tool] = [types.Tool.model_validate(t) for t in llmock.requests[0].body["tools"]]
    assert (tool.function_declarations or [])[0].parameters == types.Schema(
        type=types.Type.OBJECT, properties={"qty": types.Schema(type=types.Type.INTEGER)}
    )
