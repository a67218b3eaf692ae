"""`AnthropicChatModel`: what only Claude's Messages API has, against llmock and a canned server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pydantic
import pytest
from _model_servers import LLMockServer, check_request
from anthropic.types.message_create_params import (
    MessageCreateParamsNonStreaming,
    MessageCreateParamsStreaming,
)
from llmock.pytest_plugin import LLMock
from llmock.scenarios import Fail, Reply

from interlock._errors import ModelError
from interlock.agents import (
    AnthropicChatModel,
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from interlock.agents._messages import message_from_chunks

pytestmark = pytest.mark.anyio

HELLO = [UserMessage(content="Hello")]
SEARCH = ToolSpec(
    name="search",
    description="Search the web.",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}},
)


def claude(llmock: LLMock, **kwargs: Any) -> AnthropicChatModel:
    kwargs.setdefault("max_retries", 0)
    return AnthropicChatModel(
        "claude-sonnet-4-5", base_url=llmock.base_url("anthropic"), api_key="sk-ant", **kwargs
    )


def bodies(llmock: LLMock) -> list[Any]:
    server = LLMockServer(
        llmock, "anthropic", MessageCreateParamsNonStreaming, MessageCreateParamsStreaming
    )
    return list(server.requests())


# -- the request -----------------------------------------------------------------------------


async def test_the_request_is_in_the_messages_api_shape(llmock: LLMock) -> None:
    llmock.reply("Done.")
    calls = (
        ToolCall(id="toolu_1", name="search", arguments={"q": "a"}),
        ToolCall(id="toolu_2", name="search", arguments={}, raw_arguments="{not json"),
    )
    conversation = [
        SystemMessage(content="Be brief."),
        UserMessage(content="Search a and b.", name="alice"),
        AssistantMessage(content=None, tool_calls=calls),
        ToolMessage(content="found a", tool_call_id="toolu_1"),
        ToolMessage(content="bad arguments", tool_call_id="toolu_2", status="error"),
        UserMessage(content="Well?"),
        SystemMessage(content="Answer in French."),
    ]
    async with claude(llmock, max_tokens=300, temperature=0) as model:
        await model.generate(conversation, [SEARCH])
    (body,) = bodies(llmock)
    assert body["max_tokens"] == 300 and body["temperature"] == 0
    assert body["system"] == [
        {"type": "text", "text": "Be brief."},
        {"type": "text", "text": "Answer in French."},
    ]
    assert body["tools"] == [
        {"name": "search", "description": "Search the web.", "input_schema": SEARCH.parameters}
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Search a and b."}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "a"}},
                {"type": "tool_use", "id": "toolu_2", "name": "search", "input": {}},
            ],
        },
        {
            "role": "user",  # both results and the text after them: one turn, results first
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "found a"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "bad arguments",
                    "is_error": True,
                },
                {"type": "text", "text": "Well?"},
            ],
        },
    ]


async def test_max_tokens_has_a_default(llmock: LLMock) -> None:
    llmock.reply("Hi.")
    async with claude(llmock) as model:
        await model.generate(HELLO, [])
    assert bodies(llmock)[0]["max_tokens"] == 4096 == model.max_tokens


def test_the_request_check_refuses_what_the_api_would() -> None:
    # The conformance servers check every body against the SDK's types: they must bite.
    check = pydantic.TypeAdapter(MessageCreateParamsNonStreaming)
    with pytest.raises(pydantic.ValidationError):
        check_request(check, {"model": "m", "messages": []})  # no max_tokens
    with pytest.raises(pydantic.ValidationError):
        check_request(
            check, {"model": "m", "max_tokens": 1, "messages": [{"role": "tool", "content": "x"}]}
        )
    with pytest.raises(pydantic.ValidationError):  # a tool_result block lacks its tool_use_id
        check_request(
            check,
            {
                "model": "m",
                "max_tokens": 1,
                "messages": [{"role": "user", "content": [{"type": "tool_result"}]}],
            },
        )
    check_request(check, {"model": "m", "max_tokens": 1, "messages": []})


# -- why a reply ended -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("refusal", "refusal"),
        ("pause_turn", "length"),
        ("something_new", None),
    ],
)
@pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
async def test_the_stop_reason_is_why_the_reply_ended(
    llmock: LLMock, stop_reason: str, finish: str | None, stream: bool
) -> None:
    # llmock passes a stop reason it does not know through as it is.
    llmock.add(Reply(text="Hm.", finish_reason=stop_reason))
    async with claude(llmock, stream=stream) as model:
        reply = await model.generate(HELLO, [])
    assert (reply.content, reply.finish_reason) == ("Hm.", finish)


# -- failures --------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
async def test_an_overloaded_api_is_a_model_error_that_says_so(
    llmock: LLMock, stream: bool
) -> None:
    llmock.add(Fail(529))
    async with claude(llmock, stream=stream) as model:
        with pytest.raises(ModelError, match="overloaded") as caught:
            await model.generate(HELLO, [])
    assert caught.value.status == 529


async def test_an_overloaded_api_is_retried(llmock: LLMock) -> None:
    llmock.add(Fail(529, retry_after=0.1), Reply(text="Back."))
    async with claude(llmock, max_retries=1) as model:
        assert (await model.generate(HELLO, [])).content == "Back."
    assert len(llmock.requests) == 2


def test_one_model_serves_one_event_loop_after_another(llmock: LLMock) -> None:
    llmock.add(Reply(text="First."), Reply(text="Second."))
    model = claude(llmock)
    replies = [anyio.run(model.generate, HELLO, [], backend=b).content for b in ("asyncio", "trio")]
    assert replies == ["First.", "Second."]


# -- configuration ---------------------------------------------------------------------------


def test_claude_without_a_key_is_a_model_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ModelError, match="ANTHROPIC_API_KEY"):
        AnthropicChatModel("claude-sonnet-4-5")


async def test_the_endpoint_and_key_come_from_the_environment(llmock: LLMock) -> None:
    llmock.reply("Hi.")  # its fixture set ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY
    async with AnthropicChatModel("claude-sonnet-4-5", max_retries=0) as model:
        assert (await model.generate(HELLO, [])).content == "Hi."
        assert model.endpoint == llmock.base_url("anthropic")
        assert repr(model).startswith("<AnthropicChatModel 'claude-sonnet-4-5' at http")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"max_tokens": 0}, ValueError, "max_tokens must be 1 or more"),
        ({"max_tokens": "10"}, TypeError, "max_tokens must be an int"),
        ({"system": "x"}, ValueError, "system cannot be passed"),
        ({"base_url": "localhost:1"}, ValueError, "http"),
        ({"timeout": 0}, ValueError, "positive"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        AnthropicChatModel("claude-sonnet-4-5", api_key="k", **kwargs)


# -- what llmock cannot send: a canned server ------------------------------------------------


class Canned:
    """A loopback HTTP server (free port) that answers every POST with one canned body."""

    def __init__(self) -> None:
        self.body = b""
        self.content_type = "application/json"
        canned = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                self.send_response(200)
                self.send_header("content-type", canned.content_type)
                self.send_header("content-length", str(len(canned.body)))
                self.end_headers()
                self.wfile.write(canned.body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def json(self, value: Any) -> None:
        self.body, self.content_type = json.dumps(value).encode(), "application/json"

    def events(self, *events: dict[str, Any]) -> None:
        self.content_type = "text/event-stream"
        self.body = "".join(
            f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events
        ).encode()


@pytest.fixture(scope="module")
def canned() -> Iterator[Canned]:
    server = Canned()
    yield server
    server.server.shutdown()
    server.server.server_close()


USAGE = {
    "input_tokens": 10,
    "output_tokens": 7,
    "cache_read_input_tokens": 30,
    "cache_creation_input_tokens": 5,
}


async def test_tokens_read_from_the_prompt_cache_are_counted(canned: Canned) -> None:
    canned.json(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [
                {"type": "thinking", "thinking": "...", "signature": "s"},
                {"type": "text", "text": "Cached."},
            ],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": USAGE,
        }
    )
    async with AnthropicChatModel("c", base_url=canned.url, api_key="k", max_retries=0) as m:
        reply = await m.generate(HELLO, [])
    assert reply.content == "Cached."
    assert reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.cached_tokens) == (
        45,
        7,
        30,
    )


async def test_streamed_usage_is_the_last_count_once(canned: Canned) -> None:
    start_usage = {**USAGE, "output_tokens": 1}
    canned.events(
        {
            "type": "message_start",
            "message": {
                "id": "m",
                "type": "message",
                "role": "assistant",
                "model": "c",
                "content": [],
                "stop_reason": None,
                "usage": start_usage,
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_9", "name": "search", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"q": '},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '"x"}'},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 12},
        },
        {"type": "message_stop"},
    )
    async with AnthropicChatModel("c", base_url=canned.url, api_key="k", max_retries=0) as m:
        chunks = [c async for c in m.stream(HELLO, [SEARCH])]
    assert sum(1 for c in chunks if c.usage is not None) == 1
    joined = message_from_chunks(chunks)
    assert joined.content == "Hi"
    assert [(c.id, c.name, c.arguments) for c in joined.tool_calls] == [
        ("toolu_9", "search", {"q": "x"})
    ]
    assert joined.finish_reason == "tool_calls"
    assert joined.usage is not None
    assert (joined.usage.input_tokens, joined.usage.output_tokens) == (45, 12)
    assert joined.usage.cached_tokens == 30


@pytest.mark.parametrize(
    "body",
    [
        [1, 2],
        {"type": "message", "role": "assistant"},
        {"content": "text", "role": "assistant"},
        {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
    ],
    ids=["not-an-object", "no-content", "content-not-blocks", "an-error-body"],
)
async def test_a_malformed_body_is_a_model_error(canned: Canned, body: Any) -> None:
    canned.json(body)
    async with AnthropicChatModel("c", base_url=canned.url, api_key="k", max_retries=0) as m:
        with pytest.raises(ModelError, match="not a Messages API message") as caught:
            await m.generate(HELLO, [])
    assert "base_url" in str(caught.value)


async def test_a_stream_that_breaks_off_is_a_model_error(canned: Canned) -> None:
    canned.events(
        {
            "type": "message_start",
            "message": {
                "id": "m",
                "type": "message",
                "role": "assistant",
                "model": "c",
                "content": [],
                "usage": USAGE,
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    )
    async with AnthropicChatModel("c", base_url=canned.url, api_key="k", max_retries=0) as m:
        with pytest.raises(ModelError, match="before the reply was finished"):
            [c async for c in m.stream(HELLO, [])]
