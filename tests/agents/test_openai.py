"""`OpenAIChatModel` against a real HTTP endpoint on loopback that plays scripted replies."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from contextlib import aclosing
from typing import Any

import anyio
import openai
import pytest
from _fake_openai import (
    FakeOpenAI,
    chunk,
    closed_port,
    completion,
    error,
    raw,
    stall,
    streamed,
    tool_call,
    usage,
    usage_report,
)
from _model_servers import check_request
from llmock.pytest_plugin import LLMock
from llmock.scenarios import Reply
from llmock.scenarios import ToolCall as ScriptedCall
from openai.types.chat.completion_create_params import (
    CompletionCreateParamsNonStreaming,
    CompletionCreateParamsStreaming,
)
from pydantic import TypeAdapter

from interlock._errors import ModelError
from interlock.agents._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    message_from_chunks,
)
from interlock.agents._models import ChatModel, ToolSpec
from interlock.agents._openai import OpenAIChatModel
from interlock.graph import MessageChunk, Usage

pytestmark = pytest.mark.anyio

HELLO = [UserMessage(content="Hello")]
SEARCH = ToolSpec(
    name="search",
    description="Search the web.",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)


@pytest.fixture(scope="module")
def endpoint() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def fake(endpoint: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """The endpoint with an empty script, and no OpenAI settings from the environment."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    endpoint.reset()
    yield endpoint
    endpoint.reset()


def model_for(fake: FakeOpenAI, **kwargs: Any) -> OpenAIChatModel:
    return OpenAIChatModel("fake-model", base_url=fake.base_url, api_key="sk-test", **kwargs)


def mock_model(llmock: LLMock, **kwargs: Any) -> OpenAIChatModel:
    """A model at LLMock, the mock OpenAI server (its pytest fixture, ``llmock``, serves one
    on a free loopback port for the session and clears it for each test)."""
    return OpenAIChatModel(
        "gpt-4o-mini", base_url=llmock.base_url(), api_key="sk-test", max_retries=0, **kwargs
    )


# -- replies ---------------------------------------------------------------------------------


async def test_a_text_reply(fake: FakeOpenAI) -> None:
    fake.script(completion("Hi there."))
    async with model_for(fake, temperature=0, max_tokens=64) as model:
        reply = await model.generate(HELLO, [])
    assert reply == AssistantMessage(content="Hi there.", finish_reason="stop")
    [request] = fake.requests
    assert request.body["model"] == "fake-model"
    assert request.body["messages"] == [{"role": "user", "content": "Hello"}]
    assert request.body["temperature"] == 0
    assert request.body["max_tokens"] == 64
    assert "tools" not in request.body
    assert not request.body.get("stream")
    assert request.headers["authorization"] == "Bearer sk-test"


async def test_parallel_tool_calls_come_back_in_order(fake: FakeOpenAI) -> None:
    fake.script(
        completion(
            tool_calls=[
                tool_call("call_a", "search", '{"q": "weather in Paris"}'),
                tool_call("call_b", "search", '{"q": "weather in Rome"}'),
            ]
        )
    )
    async with model_for(fake) as model:
        reply = await model.generate(HELLO, [SEARCH])
    assert reply.content is None
    assert reply.tool_calls == (
        ToolCall(id="call_a", name="search", arguments={"q": "weather in Paris"}),
        ToolCall(id="call_b", name="search", arguments={"q": "weather in Rome"}),
    )


async def test_arguments_that_are_not_json_are_kept_raw(fake: FakeOpenAI) -> None:
    fake.script(completion(tool_calls=[tool_call("call_a", "search", "{not json")]))
    async with model_for(fake) as model:
        reply = await model.generate(HELLO, [SEARCH])
    assert reply.tool_calls == (
        ToolCall(id="call_a", name="search", arguments={}, raw_arguments="{not json"),
    )


async def test_the_request_carries_the_conversation_and_tools_in_the_openai_shape(
    fake: FakeOpenAI,
) -> None:
    conversation: list[Message] = [
        SystemMessage(content="Be brief."),
        UserMessage(content="Weather in Paris?"),
        AssistantMessage(
            tool_calls=(ToolCall(id="call_1", name="search", arguments={"q": "Paris"}),)
        ),
        ToolMessage(content="Sunny, 24°C", tool_call_id="call_1", name="search"),
    ]
    fake.script(completion("Sunny."))
    async with model_for(fake) as model:
        await model.generate(conversation, [SEARCH])
    [request] = fake.requests
    assert request.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"q":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 24°C"},
    ]
    assert request.body["tools"] == [SEARCH.to_openai()]


# -- streaming -------------------------------------------------------------------------------

SDK_LEAVES_GENERATORS = (
    "the openai SDK stops reading a stream at [DONE], at an error event or when closed early, "
    "and leaves its async generators to the garbage collector, which trio reports as a "
    "ResourceWarning (encode/httpx#3686)"
)
ENDINGS = pytest.mark.parametrize(
    "done",
    [pytest.param(True, marks=pytest.mark.asyncio_only(reason=SDK_LEAVES_GENERATORS)), False],
    ids=["DONE", "end-of-body"],
)


def piece(index: int, arguments: str, *, id: str | None = None) -> dict[str, Any]:
    """A streamed piece of tool call ``index``; the first one (with ``id``) names the tool."""
    out: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if id is not None:
        out.update(id=id, type="function")
        out["function"]["name"] = "search"
    return out


STREAM = (
    chunk(role="assistant", content=""),
    chunk(content="Let me "),
    chunk(content="look."),
    chunk(tool_calls=[piece(0, "", id="call_a")]),
    chunk(tool_calls=[piece(0, '{"q": ')]),
    chunk(tool_calls=[piece(1, '{"q"', id="call_b")]),
    chunk(tool_calls=[piece(0, '"Paris"')]),
    chunk(tool_calls=[piece(1, ': "Rome"}')]),
    chunk(tool_calls=[piece(0, "}")]),
    chunk(finish_reason="tool_calls"),
)
JOINED = AssistantMessage(
    content="Let me look.",
    tool_calls=(
        ToolCall(id="call_a", name="search", arguments={"q": "Paris"}),
        ToolCall(id="call_b", name="search", arguments={"q": "Rome"}),
    ),
    finish_reason="tool_calls",
)


@ENDINGS
async def test_stream_yields_the_pieces_as_they_come(fake: FakeOpenAI, done: bool) -> None:
    fake.script(streamed(*STREAM, done=done))
    async with model_for(fake) as model:
        chunks = [c async for c in model.stream(HELLO, [SEARCH])]
    assert [c.content for c in chunks if c.content] == ["Let me ", "look."]
    pieces = [(p.index, p.arguments) for c in chunks for p in c.tool_calls]
    assert pieces == [
        (0, ""),
        (0, '{"q": '),
        (1, '{"q"'),
        (0, '"Paris"'),
        (1, ': "Rome"}'),
        (0, "}"),
    ]
    assert message_from_chunks(chunks) == JOINED
    [request] = fake.requests
    assert request.body["stream"] is True
    assert request.body["tools"] == [SEARCH.to_openai()]


@ENDINGS
async def test_generate_streams_and_joins_when_told_to(fake: FakeOpenAI, done: bool) -> None:
    fake.script(streamed(*STREAM, done=done))
    async with model_for(fake, stream=True) as model:
        reply = await model.generate(HELLO, [SEARCH])
    assert reply == JOINED
    assert fake.requests[0].body["stream"] is True


@pytest.mark.asyncio_only(reason=SDK_LEAVES_GENERATORS)
async def test_a_stream_closed_early_is_no_error(fake: FakeOpenAI) -> None:
    fake.script(streamed(*STREAM), completion("again"))
    async with model_for(fake) as model:
        async with aclosing(model.stream(HELLO, [SEARCH])) as stream:
            async for first in stream:
                assert first.role == "assistant"
                break
        assert (await model.generate(HELLO, [])).content == "again"


# -- why a reply ended -----------------------------------------------------------------------

STREAMS = pytest.mark.parametrize(
    "stream",
    [False, pytest.param(True, marks=pytest.mark.asyncio_only(reason=SDK_LEAVES_GENERATORS))],
    ids=["whole", "streamed"],
)


@STREAMS
@pytest.mark.parametrize("finish", ["stop", "length", "content_filter", "tool_calls"])
async def test_why_a_reply_ended_is_on_the_message(
    llmock: LLMock, stream: bool, finish: str
) -> None:
    if finish == "tool_calls":
        llmock.add(Reply(tool_calls=(ScriptedCall("search", {"q": "Paris"}),)))
    else:
        llmock.add(Reply(text="The weather in Paris is", finish_reason=finish))
    async with mock_model(llmock, stream=stream) as model:
        reply = await model.generate(HELLO, [SEARCH])
    assert reply.finish_reason == finish
    assert reply.content == (None if finish == "tool_calls" else "The weather in Paris is")


REFUSAL = "I can't help with that."


@STREAMS
async def test_a_refusal_is_a_reason_a_reply_ended(fake: FakeOpenAI, stream: bool) -> None:
    if stream:
        fake.script(
            streamed(
                chunk(role="assistant"),
                {**chunk(), "choices": [{"index": 0, "delta": {"refusal": "I can't "}}]},
                {**chunk(), "choices": [{"index": 0, "delta": {"refusal": "help with that."}}]},
                chunk(finish_reason="stop"),
            )
        )
    else:
        body = json.loads(completion().body)
        body["choices"][0]["message"]["refusal"] = REFUSAL
        fake.script(raw(json.dumps(body).encode()))
    async with model_for(fake, stream=stream) as model:
        reply = await model.generate(HELLO, [])
    assert reply == AssistantMessage(content=REFUSAL, finish_reason="refusal")


# -- retries and failures --------------------------------------------------------------------


async def test_a_rate_limit_is_retried(fake: FakeOpenAI) -> None:
    fake.script(error(429, "slow down", headers={"retry-after-ms": "10"}), completion("Done."))
    async with model_for(fake, max_retries=1) as model:
        reply = await model.generate(HELLO, [])
    assert reply.content == "Done."
    assert len(fake.requests) == 2


async def test_a_server_error_is_a_model_error_once_the_retries_are_spent(
    fake: FakeOpenAI,
) -> None:
    fake.script(*[error(500, "the GPU fell over", headers={"retry-after-ms": "10"})] * 2)
    async with model_for(fake, max_retries=1) as model:
        with pytest.raises(ModelError) as caught:
            await model.generate(HELLO, [])
    assert len(fake.requests) == 2
    assert caught.value.status == 500
    assert caught.value.endpoint == fake.base_url
    message = str(caught.value)
    assert fake.base_url in message and "'fake-model'" in message
    assert "the GPU fell over" in message and "logs" in message


async def test_a_refused_key_is_a_model_error_that_points_at_the_key(fake: FakeOpenAI) -> None:
    fake.script(error(401, "Incorrect API key provided"))
    async with model_for(fake) as model:
        with pytest.raises(ModelError, match="API key") as caught:
            await model.generate(HELLO, [])
    assert caught.value.status == 401
    assert len(fake.requests) == 1  # a refused key is not retried


async def test_a_streamed_request_that_fails_is_a_model_error(fake: FakeOpenAI) -> None:
    fake.script(error(404, "model 'fake-model' not found"))
    async with model_for(fake, stream=True) as model:
        with pytest.raises(ModelError, match="not found") as caught:
            await model.generate(HELLO, [])
    assert caught.value.status == 404


@pytest.mark.parametrize(
    "body",
    [
        raw(b"<html>502 Bad Gateway</html>", content_type="text/html"),
        raw(b"{this is not json"),
        raw(json.dumps({"id": "x", "object": "chat.completion"}).encode()),
        raw(json.dumps({"error": {"message": "quota exceeded"}}).encode()),
        raw(json.dumps({"choices": "none"}).encode()),
        raw(json.dumps({"choices": [{"message": 7}]}).encode()),
        raw(json.dumps({"choices": [{"message": {"role": "user", "content": "hi"}}]}).encode()),
        raw(json.dumps({"choices": [{"message": {"tool_calls": ["x"]}}]}).encode()),
    ],
    ids=[
        "html",
        "broken-json",
        "no-choices",
        "error-body",
        "bad-choices",
        "bad-message",
        "wrong-role",
        "bad-tool-call",
    ],
)
async def test_a_malformed_body_is_a_model_error(fake: FakeOpenAI, body: Any) -> None:
    fake.script(body)
    async with model_for(fake) as model:
        with pytest.raises(ModelError, match="not a chat completion") as caught:
            await model.generate(HELLO, [])
    assert caught.value.endpoint == fake.base_url
    assert fake.base_url in str(caught.value)
    assert caught.value.status is None


async def test_a_success_status_carrying_an_error_reports_it(fake: FakeOpenAI) -> None:
    fake.script(raw(json.dumps({"error": {"message": "quota exceeded"}}).encode()))
    async with model_for(fake) as model:
        with pytest.raises(ModelError, match="reports an error instead: quota exceeded"):
            await model.generate(HELLO, [])


@pytest.mark.parametrize(
    "garbage",
    [
        "this is not json",
        json.dumps({"choices": "none"}),
        json.dumps(chunk(tool_calls=[{"index": "first"}])),
    ],
    ids=["not-json", "bad-choices", "bad-tool-call"],
)
async def test_a_stream_carrying_garbage_is_a_model_error(fake: FakeOpenAI, garbage: str) -> None:
    fake.script(streamed(chunk(role="assistant", content="Hel"), garbage, chunk(content="lo")))
    received: list[str | None] = []

    async def read(model: OpenAIChatModel) -> None:
        async for piece in model.stream(HELLO, []):
            received.append(piece.content)

    async with model_for(fake) as model:
        with pytest.raises(ModelError, match="not a chat completion") as caught:
            await read(model)
    assert received == ["Hel"]
    assert caught.value.endpoint == fake.base_url


async def test_a_stream_that_breaks_off_is_a_model_error(fake: FakeOpenAI) -> None:
    fake.script(streamed(chunk(role="assistant", content="Hel"), chunk(content="lo"), done=False))
    async with model_for(fake, stream=True) as model:
        with pytest.raises(ModelError, match="before the reply was finished") as caught:
            await model.generate(HELLO, [])
    assert caught.value.endpoint == fake.base_url


@pytest.mark.asyncio_only(reason=SDK_LEAVES_GENERATORS)
async def test_an_error_event_in_a_stream_is_a_model_error(fake: FakeOpenAI) -> None:
    fake.script(
        streamed(
            chunk(role="assistant", content="Hel"), json.dumps({"error": {"message": "overloaded"}})
        )
    )
    async with model_for(fake, stream=True) as model:
        with pytest.raises(ModelError, match="overloaded"):
            await model.generate(HELLO, [])


async def test_a_refused_connection_is_a_model_error(fake: FakeOpenAI) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    async with OpenAIChatModel("fake-model", base_url=url, max_retries=0) as model:
        with pytest.raises(ModelError, match="could not reach") as caught:
            await model.generate(HELLO, [])
    assert caught.value.endpoint == url
    assert url in str(caught.value) and "running" in str(caught.value)
    assert caught.value.status is None


async def test_a_timeout_is_a_model_error(fake: FakeOpenAI) -> None:
    fake.script(stall())
    async with model_for(fake, timeout=0.2, max_retries=0) as model:
        with pytest.raises(ModelError, match="did not answer in time") as caught:
            await model.generate(HELLO, [])
    assert caught.value.endpoint == fake.base_url


async def test_a_cancelled_request_is_cancelled_not_a_model_error(fake: FakeOpenAI) -> None:
    fake.script(stall(), completion("After."))
    async with model_for(fake, max_retries=0) as model:
        with anyio.move_on_after(0.2) as scope:
            await model.generate(HELLO, [])
        assert scope.cancelled_caught
        assert (await model.generate(HELLO, [])).content == "After."


async def test_a_closed_model_says_so(fake: FakeOpenAI) -> None:
    model = model_for(fake)
    await model.aclose()
    assert "closed" in repr(model)
    with pytest.raises(ModelError, match="closed"):
        await model.generate(HELLO, [])
    assert fake.requests == []


# -- event loops -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "loops", [("asyncio", "asyncio"), ("trio", "trio"), ("asyncio", "trio")], ids="-then-".join
)
def test_one_model_serves_one_event_loop_after_another(
    llmock: LLMock, loops: tuple[str, str]
) -> None:
    # What app.run_sync then app.resume_sync do: each call starts and ends a loop of its own.
    llmock.add(Reply(text="First."), Reply(text="Second."))
    model = mock_model(llmock)
    replies = [anyio.run(model.generate, HELLO, [], backend=loop).content for loop in loops]
    assert replies == ["First.", "Second."]
    assert len(llmock.requests) == 2


def test_a_given_client_is_not_taken_into_another_event_loop(llmock: LLMock) -> None:
    llmock.reply("First.")
    client = openai.AsyncOpenAI(base_url=llmock.base_url(), api_key="sk-test", max_retries=0)
    model = OpenAIChatModel("gpt-4o-mini", client=client)

    async def once_then_close() -> str | None:
        try:
            return (await model.generate(HELLO, [])).content
        finally:
            await client.close()  # the caller's to close, in the loop it belongs to

    assert anyio.run(once_then_close) == "First."
    with pytest.raises(ModelError, match="first used in another event loop") as caught:
        anyio.run(model.generate, HELLO, [])
    assert "leave client= out" in str(caught.value)
    assert len(llmock.requests) == 1  # refused before anything was sent


# The connection the first loop left behind cannot be closed any more: the collector reports it.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_a_transport_failure_is_not_called_a_malformed_reply(llmock: LLMock) -> None:
    # A client used directly in one loop keeps its connection pooled; handed to a model in a
    # second loop, the connection fails under the SDK (the event loop is closed): a
    # transport problem, not a reply that is no chat completion.
    llmock.reply("First.")

    def second_loop_fails() -> tuple[str, str, int | None]:
        client = openai.AsyncOpenAI(base_url=llmock.base_url(), api_key="sk-test", max_retries=0)

        async def direct() -> None:
            await client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "Hello"}]
            )

        anyio.run(direct, backend="asyncio")
        model = OpenAIChatModel("gpt-4o-mini", client=client)
        try:
            anyio.run(model.generate, HELLO, [], backend="asyncio")
        except ModelError as exc:
            return str(exc), repr(exc.__cause__), exc.status  # no frames kept
        raise AssertionError("the second loop's request did not fail")

    message, cause, status = second_loop_fails()
    gc.collect()  # the abandoned connection is reported here, under this test's filters
    assert "transport problem, not a malformed reply" in message
    assert "not a chat completion" not in message
    assert cause == "RuntimeError('Event loop is closed')"
    assert status is None


# -- configuration ---------------------------------------------------------------------------


async def test_a_server_without_keys_gets_a_placeholder_key(fake: FakeOpenAI) -> None:
    fake.script(completion("Hi."))
    async with OpenAIChatModel("fake-model", base_url=fake.base_url) as model:
        assert (await model.generate(HELLO, [])).content == "Hi."
    assert fake.requests[0].headers["authorization"] == "Bearer not-needed"


async def test_the_endpoint_and_key_come_from_the_environment(
    fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    fake.script(completion("Hi."))
    async with OpenAIChatModel("fake-model") as model:
        assert model.endpoint == fake.base_url
        await model.generate(HELLO, [])
    assert fake.requests[0].headers["authorization"] == "Bearer sk-from-env"


def test_openai_without_a_key_is_a_model_error(fake: FakeOpenAI) -> None:
    with pytest.raises(ModelError, match="OPENAI_API_KEY") as caught:
        OpenAIChatModel("gpt-4o-mini")
    assert caught.value.endpoint == "https://api.openai.com/v1"


async def test_a_given_client_is_used_and_left_open(fake: FakeOpenAI) -> None:
    client = openai.AsyncOpenAI(base_url=fake.base_url, api_key="sk-client", max_retries=0)
    try:
        fake.script(completion("Hi."))
        async with OpenAIChatModel("fake-model", client=client) as model:
            assert model.endpoint == fake.base_url
            await model.generate(HELLO, [])
        assert not client.is_closed()
        assert fake.requests[0].headers["authorization"] == "Bearer sk-client"
    finally:
        await client.close()


async def test_it_is_a_chat_model_and_shows_where_it_points(fake: FakeOpenAI) -> None:
    async with model_for(fake, stream=True, temperature=0.2) as model:
        assert isinstance(model, ChatModel)
        assert model.model == "fake-model"
        assert model.params == {"temperature": 0.2}
        assert repr(model) == f"<OpenAIChatModel 'fake-model' at {fake.base_url} streaming>"


@pytest.mark.parametrize(
    ("args", "kwargs", "kind", "match"),
    [
        ((42,), {}, TypeError, "model must be"),
        (("",), {}, ValueError, "model must name"),
        (("  ",), {}, ValueError, "model must name"),
        (("m",), {"base_url": "localhost:11434"}, ValueError, "http"),
        (("m",), {"base_url": 11434}, TypeError, "base_url"),
        (("m",), {"api_key": 1}, TypeError, "api_key"),
        (("m",), {"timeout": "5"}, TypeError, "timeout"),
        (("m",), {"timeout": 0}, ValueError, "timeout"),
        (("m",), {"max_retries": -1}, ValueError, "max_retries"),
        (("m",), {"max_retries": 1.5}, TypeError, "max_retries"),
        (("m",), {"stream": "yes"}, TypeError, "stream"),
        (("m",), {"messages": []}, ValueError, "messages cannot be passed"),
        (("m",), {"client": "a client"}, TypeError, "AsyncOpenAI"),
    ],
)
def test_bad_arguments_are_refused(
    args: tuple[Any, ...], kwargs: dict[str, Any], kind: type[Exception], match: str
) -> None:
    with pytest.raises(kind, match=match):
        OpenAIChatModel(*args, **{"base_url": "http://127.0.0.1:9/v1", **kwargs})


async def test_a_client_and_its_settings_cannot_both_be_given(fake: FakeOpenAI) -> None:
    client = openai.AsyncOpenAI(base_url=fake.base_url, api_key="sk-client")
    try:
        with pytest.raises(ValueError, match="base_url, max_retries cannot be passed with"):
            OpenAIChatModel("m", client=client, base_url=fake.base_url, max_retries=3)
    finally:
        await client.close()


async def test_a_reply_carries_the_tokens_its_call_used(llmock: LLMock) -> None:
    llmock.add(Reply(text="The weather in Paris is sunny."))
    async with mock_model(llmock) as model:
        reply = await model.generate(HELLO, [SEARCH])
    assert reply.usage is not None
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
    assert reply.usage.cached_tokens == 0


# -- streamed usage ----------------------------------------------------------------------------

STREAMING = TypeAdapter(CompletionCreateParamsStreaming)
NON_STREAMING = TypeAdapter(CompletionCreateParamsNonStreaming)


def sent(llmock: LLMock) -> list[dict[str, Any]]:
    """The request bodies llmock received."""
    return [record.body for record in llmock.requests if record.method == "POST"]


@pytest.mark.asyncio_only(reason=SDK_LEAVES_GENERATORS)  # llmock ends with [DONE]
async def test_a_streamed_reply_carries_the_tokens_its_call_used(llmock: LLMock) -> None:
    llmock.add(Reply(text="The weather in Paris is sunny."))
    async with mock_model(llmock) as model:
        chunks = [c async for c in model.stream(HELLO, [SEARCH])]
    reported = [c.usage for c in chunks if c.usage is not None]
    assert len(reported) == 1, "one usage report, on the last chunk"
    assert chunks[-1].usage is reported[0]
    assert reported[0].input_tokens > 0 and reported[0].output_tokens > 0
    [body] = sent(llmock)
    check_request(STREAMING, body)
    assert body["stream_options"] == {"include_usage": True}


@pytest.mark.asyncio_only(reason=SDK_LEAVES_GENERATORS)  # llmock ends with [DONE]
async def test_generate_when_streaming_carries_the_tokens_too(llmock: LLMock) -> None:
    llmock.add(Reply(text="Sunny."))
    async with mock_model(llmock, stream=True) as model:
        reply = await model.generate(HELLO, [])
    assert reply.content == "Sunny."
    assert reply.usage is not None and reply.usage.output_tokens > 0


@pytest.mark.asyncio_only(reason=SDK_LEAVES_GENERATORS)  # llmock ends with [DONE]
async def test_without_stream_usage_a_stream_asks_for_no_usage(llmock: LLMock) -> None:
    # For an OpenAI-compatible server that refuses stream_options.
    llmock.add(Reply(text="Sunny."))
    async with mock_model(llmock, stream=True, stream_usage=False) as model:
        assert model.stream_usage is False
        reply = await model.generate(HELLO, [])
    assert reply.content == "Sunny."
    assert reply.usage is None
    [body] = sent(llmock)
    check_request(STREAMING, body)
    assert "stream_options" not in body


async def test_a_request_that_does_not_stream_asks_no_stream_options(llmock: LLMock) -> None:
    llmock.add(Reply(text="Sunny."))
    async with mock_model(llmock) as model:
        assert model.stream_usage is True
        reply = await model.generate(HELLO, [])
    assert reply.usage is not None
    [body] = sent(llmock)
    check_request(NON_STREAMING, body)
    assert "stream_options" not in body


@pytest.mark.parametrize(
    "ending",
    [
        # OpenAI's shape: a closing chunk with no choices carries the usage.
        (chunk(finish_reason="stop"), usage_report(12, 3, cached=8)),
        # Some servers put it on the chunk that finishes the reply instead...
        (chunk(finish_reason="stop", usage=usage(12, 3, cached=8)),),
        # ...or on both: the last report counts, once.
        (chunk(finish_reason="stop", usage=usage(12, 3)), usage_report(12, 3, cached=8)),
    ],
    ids=["closing-report", "on-the-finish", "on-both"],
)
async def test_a_streamed_usage_counts_once_wherever_it_comes(
    fake: FakeOpenAI, ending: tuple[dict[str, Any], ...]
) -> None:
    fake.script(
        streamed(
            chunk(role="assistant", content="Sunny."),
            *ending,
            done=False,  # under trio too (see SDK_LEAVES_GENERATORS)
        )
    )
    async with model_for(fake) as model:
        chunks = [c async for c in model.stream(HELLO, [])]
    used = Usage(input_tokens=12, output_tokens=3, cached_tokens=8)
    assert [c for c in chunks if c.usage is not None] == [MessageChunk(usage=used)]
    assert chunks[-1].usage == used
    reply = message_from_chunks(chunks)
    assert reply.usage == used
    assert reply.content == "Sunny." and reply.finish_reason == "stop"


@pytest.mark.parametrize(
    ("kwargs", "kind", "match"),
    [
        ({"stream_usage": "yes"}, TypeError, "stream_usage must be True or False"),
        ({"stream_options": {"include_usage": True}}, ValueError, "stream_usage settings"),
    ],
)
def test_stream_usage_is_the_way_to_ask_for_streamed_usage(
    kwargs: dict[str, Any], kind: type[Exception], match: str
) -> None:
    with pytest.raises(kind, match=match):
        OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", **kwargs)
