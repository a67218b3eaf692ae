"""`ModelConformance`: the tests every chat-model adapter must pass, against a mock server.

An adapter (`OpenAIChatModel`, `AnthropicChatModel`, one of your own) turns interlock's
messages into its provider's wire shape and the provider's answers back into an
`AssistantMessage`. Whatever the provider, an agent relies on the same things: a text reply,
one or several (parallel) tool calls, arguments that are not JSON kept raw rather than lost, a
stream that joins into what ``generate`` returns, why the reply ended, the tokens it used, a
typed `ModelError` (with the HTTP status) for every failure, a client that survives
``run_sync`` then ``resume_sync`` (two event loops), and a conversation that goes to the
provider whole. The suite checks each of these through the adapter, over real HTTP, against a
server the subclass scripts.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import anyio
import pytest

from .._errors import ModelError
from ..agents import (
    ApprovalPolicy,
    AssistantMessage,
    ChatModel,
    Message,
    SystemMessage,
    ToolAgent,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
    allow,
    conversation,
    require_approval,
    tool,
)
from ..agents._messages import message_from_chunks
from ..stores import SqliteStore

__all__ = [
    "ModelConformance",
    "ModelServer",
    "ScriptedCalls",
    "ScriptedDelay",
    "ScriptedError",
    "ScriptedMalformed",
    "ScriptedReply",
    "ScriptedText",
]


@dataclass(frozen=True)
class ScriptedText:
    """The next reply is text, ending for ``finish`` (``"stop"`` or ``"length"``)."""

    text: str
    finish: Literal["stop", "length"] = "stop"


@dataclass(frozen=True)
class ScriptedCalls:
    """The next reply calls tools: ``(name, arguments)`` pairs, several for parallel calls.

    With ``broken=True`` the first call's arguments are cut short, so they are not JSON.
    """

    calls: tuple[tuple[str, dict[str, Any]], ...]
    text: str | None = None
    broken: bool = False


@dataclass(frozen=True)
class ScriptedError:
    """The next request is answered with HTTP ``status``, with ``Retry-After`` when given."""

    status: int
    retry_after: float | None = None


@dataclass(frozen=True)
class ScriptedMalformed:
    """The next streamed reply carries something that is not in the provider's format."""


@dataclass(frozen=True)
class ScriptedDelay:
    """The next request is answered only after ``seconds`` (to make a client time out)."""

    seconds: float


ScriptedReply = ScriptedText | ScriptedCalls | ScriptedError | ScriptedMalformed | ScriptedDelay
"""One scripted answer of the mock server."""


@runtime_checkable
class ModelServer(Protocol):
    """A mock server of one provider, and how to build the adapter under test against it."""

    def model(
        self, *, stream: bool = False, timeout: float | None = None, max_retries: int = 0
    ) -> ChatModel:
        """A new model pointed at the server, with these client settings.

        ``stream`` says whether its ``generate`` streams; the suite asks for a streaming model
        before it calls ``stream`` too, so that a model may ask then for what a provider
        streams only on request (OpenAI's streamed usage). ``max_retries`` is how many times
        its client retries a failed request (429, 5xx, timeouts).
        """
        ...

    def script(self, *replies: ScriptedReply) -> None:
        """Queue the server's next answers, one per request, in order."""
        ...

    def requests(self) -> Sequence[Any]:
        """The bodies of the requests the server received in this test, in the provider's
        shape (decoded JSON), in order."""
        ...

    def read_request(self, body: Any) -> list[Message]:
        """The conversation a request body carries, read back into interlock's messages."""
        ...


HELLO: list[Message] = [UserMessage(content="Hello")]
LOOKUP = ToolSpec(
    name="lookup",
    description="Look a word up.",
    parameters={"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
)


@dataclass
class _Desk:
    """A tool that needs approval, counting its runs."""

    runs: list[str] = field(default_factory=list)


_CARELESS_CHECKS: list[tuple[str, dict[str, Any]]] = [
    ("test_a_text_reply", {}),
    ("test_parallel_tool_calls_come_back_in_order", {"stream": False}),
    ("test_a_reply_carries_the_tokens_its_call_used", {"stream": False}),
    ("test_a_conversation_goes_to_the_provider_whole", {}),
]
"""The checks a careless adapter must fail, with their arguments."""


class ModelConformance:
    """Tests that check a chat-model adapter does what every agent relies on.

    Subclass it in a test module and provide one fixture, ``model_server``, that yields a
    `ModelServer`: a mock of the provider on a free loopback port, empty for each test, that
    builds the model under test and plays the scripted answers (a sketch; the conformance
    how-to guide and interlock's own OpenAI and Anthropic tests run real ones)::

        class TestMyModel(ModelConformance):
            @pytest.fixture
            def model_server(self, llmock):
                return MyServer(llmock)

    The async tests are marked ``anyio`` and run on every event loop anyio finds installed
    unless an ``anyio_backend`` fixture of yours names one.
    """

    call_ids_on_the_wire: bool = True
    """Whether the provider's requests carry the ids of tool calls and of the results that
    answer them. Set it to False in the subclass for a provider whose requests pair a result
    with its call by position instead (Gemini's may carry none): the conversation test then
    checks that each result answers the call of its position, and ``read_request`` may give
    the calls it reads any distinct ids."""

    # -- replies ---------------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_a_text_reply(self, model_server: ModelServer) -> None:
        """A text reply comes back as the message's content, finished with ``stop``."""
        model_server.script(ScriptedText("The weather in Paris is sunny."))
        reply = await _generate(model_server.model(), HELLO, [])
        assert isinstance(reply, AssistantMessage)
        assert reply.content == "The weather in Paris is sunny."
        assert reply.tool_calls == ()
        assert reply.finish_reason == "stop"

    @pytest.mark.anyio
    @pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
    async def test_one_tool_call(self, model_server: ModelServer, stream: bool) -> None:
        """One tool call comes back with its name, its decoded arguments and an id."""
        model_server.script(ScriptedCalls((("lookup", {"word": "interlock"}),)))
        reply = await _generate(model_server.model(stream=stream), HELLO, [LOOKUP])
        assert [(c.name, c.arguments, c.raw_arguments) for c in reply.tool_calls] == [
            ("lookup", {"word": "interlock"}, None)
        ]
        assert reply.tool_calls[0].id, "a tool call needs an id its result can answer"
        assert reply.finish_reason == "tool_calls"

    @pytest.mark.anyio
    @pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
    async def test_parallel_tool_calls_come_back_in_order(
        self, model_server: ModelServer, stream: bool
    ) -> None:
        """Parallel tool calls come back in their order, each with an id of its own."""
        words = ["alpha", "beta", "gamma"]
        model_server.script(ScriptedCalls(tuple(("lookup", {"word": w}) for w in words)))
        reply = await _generate(model_server.model(stream=stream), HELLO, [LOOKUP])
        assert [c.arguments["word"] for c in reply.tool_calls] == words
        ids = [c.id for c in reply.tool_calls]
        assert all(ids) and len(set(ids)) == len(ids), f"the calls need distinct ids: {ids}"

    @pytest.mark.anyio
    async def test_arguments_that_are_not_json_are_kept_raw(
        self, model_server: ModelServer
    ) -> None:
        """Streamed arguments that are not JSON are kept raw, not lost."""
        model_server.script(ScriptedCalls((("lookup", {"word": "interlock"}),), broken=True))
        reply = await _generate(model_server.model(stream=True), HELLO, [LOOKUP])
        (call,) = reply.tool_calls
        assert call.name == "lookup"
        assert call.arguments == {}
        assert call.raw_arguments, "the model's text must be kept for the error it gets back"
        assert call.raw_arguments in '{"word": "interlock"}' or call.raw_arguments in (
            '{"word":"interlock"}'
        )

    @pytest.mark.anyio
    async def test_a_stream_joins_into_what_generate_returns(
        self, model_server: ModelServer
    ) -> None:
        """A stream's chunks join into the message ``generate`` returns for the same reply."""
        for _ in range(2):
            model_server.script(
                ScriptedCalls((("lookup", {"word": "a"}), ("lookup", {"word": "b"})), text="On it.")
            )
        whole = await _generate(model_server.model(), HELLO, [LOOKUP])
        async with _closing(model_server.model(stream=True)) as model:
            chunks = [c async for c in model.stream(HELLO, [LOOKUP])]
        joined = message_from_chunks(chunks)
        assert len(chunks) > 1, "a stream comes in pieces"
        assert joined.content == whole.content == "On it."
        assert [(c.name, c.arguments) for c in joined.tool_calls] == [
            (c.name, c.arguments) for c in whole.tool_calls
        ]
        assert joined.finish_reason == whole.finish_reason == "tool_calls"
        assert joined.usage is not None and whole.usage is not None
        assert joined.usage.output_tokens == whole.usage.output_tokens

    @pytest.mark.anyio
    @pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
    async def test_a_reply_cut_at_its_token_limit_says_so(
        self, model_server: ModelServer, stream: bool
    ) -> None:
        """A reply cut at its token limit ends with ``length``."""
        model_server.script(ScriptedText("The answer is", finish="length"))
        reply = await _generate(model_server.model(stream=stream), HELLO, [])
        assert (reply.content, reply.finish_reason) == ("The answer is", "length")

    @pytest.mark.anyio
    @pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
    async def test_a_reply_carries_the_tokens_its_call_used(
        self, model_server: ModelServer, stream: bool
    ) -> None:
        """A reply carries the tokens its call used."""
        model_server.script(ScriptedText("The weather in Paris is sunny."))
        reply = await _generate(model_server.model(stream=stream), HELLO, [LOOKUP])
        assert reply.usage is not None, "the provider reported the tokens: keep them"
        assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
        assert 0 <= reply.usage.cached_tokens <= reply.usage.input_tokens

    # -- failures --------------------------------------------------------------------------

    @pytest.mark.anyio
    @pytest.mark.parametrize("status", [400, 401, 404, 500, 503])
    @pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
    async def test_an_error_status_is_a_model_error_with_the_status(
        self, model_server: ModelServer, status: int, stream: bool
    ) -> None:
        """An HTTP error status is a `ModelError` carrying that status."""
        model_server.script(ScriptedError(status))
        with pytest.raises(ModelError) as caught:
            await _generate(model_server.model(stream=stream), HELLO, [])
        assert caught.value.status == status
        assert caught.value.endpoint, "the error names where the model lives"
        assert str(status) in str(caught.value)

    @pytest.mark.anyio
    async def test_a_rate_limit_is_retried_after_the_time_it_asks(
        self, model_server: ModelServer
    ) -> None:
        """A rate limit is retried, after the time its ``Retry-After`` asks."""
        model_server.script(ScriptedError(429, retry_after=0.5), ScriptedText("Done."))
        started = time.monotonic()
        reply = await _generate(model_server.model(max_retries=1), HELLO, [])
        assert reply.content == "Done."
        assert time.monotonic() - started >= 0.45, "Retry-After was not honoured"
        assert len(model_server.requests()) == 2

    @pytest.mark.anyio
    async def test_a_rate_limit_once_the_retries_are_spent_is_a_model_error(
        self, model_server: ModelServer
    ) -> None:
        """A rate limit, once the retries are spent, is a `ModelError` with status 429."""
        model_server.script(ScriptedError(429, retry_after=0.1))
        with pytest.raises(ModelError) as caught:
            await _generate(model_server.model(max_retries=0), HELLO, [])
        assert caught.value.status == 429

    @pytest.mark.anyio
    async def test_a_timeout_is_a_model_error(self, model_server: ModelServer) -> None:
        """A server that does not answer in time is a `ModelError` without a status."""
        model_server.script(ScriptedDelay(3.0))
        started = time.monotonic()
        with pytest.raises(ModelError) as caught:
            await _generate(model_server.model(timeout=0.3), HELLO, [])
        assert time.monotonic() - started < 2.5, "the timeout was not applied"
        assert caught.value.status is None

    @pytest.mark.anyio
    async def test_a_malformed_reply_is_a_model_error(self, model_server: ModelServer) -> None:
        """A reply not in the provider's format is a `ModelError`."""
        model_server.script(ScriptedMalformed())
        with pytest.raises(ModelError) as caught:
            await _generate(model_server.model(stream=True), HELLO, [])
        assert caught.value.endpoint

    # -- event loops and agents --------------------------------------------------------------

    def test_run_sync_then_resume_sync_with_an_approval(
        self, model_server: ModelServer, tmp_path: Path
    ) -> None:
        """One model serves ``run_sync`` then ``resume_sync`` of an agent whose tool is gated."""
        desk = _Desk()

        @tool
        def delete(path: str) -> str:
            """Delete a file."""
            desk.runs.append(path)
            return f"deleted {path}"

        model_server.script(
            ScriptedCalls((("delete", {"path": "/tmp/x"}),)), ScriptedText("Deleted /tmp/x.")
        )
        policy = ApprovalPolicy({"delete": [require_approval(), allow()]})
        agent = ToolAgent("ops", model_server.model(), [delete], policy=policy)
        store = SqliteStore(tmp_path / "agent.db")
        app = agent.compile(store=store)
        try:
            first = app.run_sync({"messages": [UserMessage(content="delete /tmp/x")]}, thread="t")
            assert first.status == "interrupted" and desk.runs == []
            done = app.resume_sync("t", {first.interrupts[0].id: "approve"})
        finally:
            anyio.run(store.close)
        assert done.status == "done"
        assert desk.runs == ["/tmp/x"]
        answer = conversation(done.values["messages"])[-1]
        assert isinstance(answer, AssistantMessage)
        assert (answer.content, answer.finish_reason) == ("Deleted /tmp/x.", "stop")
        bodies = model_server.requests()
        assert len(bodies) == 2
        sent = model_server.read_request(bodies[1])
        results = [m for m in sent if isinstance(m, ToolMessage)]
        assert [r.content for r in results] == ["deleted /tmp/x"]

    # -- the conversation ------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_a_conversation_goes_to_the_provider_whole(
        self, model_server: ModelServer
    ) -> None:
        """A conversation reaches the provider whole: texts, calls and their results."""
        calls = (
            ToolCall(id="call_a", name="lookup", arguments={"word": "alpha"}),
            ToolCall(id="call_b", name="lookup", arguments={"word": "beta", "n": [1, 2]}),
        )
        sent: list[Message] = [
            SystemMessage(content="You are terse."),
            UserMessage(content="Look up alpha and beta."),
            AssistantMessage(content="Looking both up.", tool_calls=calls),
            ToolMessage(content="alpha: the first", tool_call_id="call_a"),
            ToolMessage(content="no such word", tool_call_id="call_b", status="error"),
            UserMessage(content="And now?"),
            AssistantMessage(content="Alpha is the first."),
            UserMessage(content="Thanks."),
        ]
        model_server.script(ScriptedText("You are welcome."))
        reply = await _generate(model_server.model(), sent, [LOOKUP])
        assert reply.content == "You are welcome."
        received = model_server.read_request(model_server.requests()[-1])
        ids = self.call_ids_on_the_wire
        assert _essence(received, ids=ids) == _essence(sent, ids=ids)

    # -- the suite itself ------------------------------------------------------------------

    @pytest.mark.anyio
    @pytest.mark.parametrize(("check", "options"), _CARELESS_CHECKS, ids=lambda v: str(v))
    async def test_the_suite_catches_a_careless_adapter(
        self, model_server: ModelServer, check: str, options: dict[str, Any]
    ) -> None:
        """The suite has teeth: the adapter under test, made careless (it sends only the last
        message, reverses parallel calls, and drops the finish reason and the usage), fails
        each check that is there to catch one of those faults."""
        with pytest.raises(AssertionError):
            await getattr(self, check)(_CarelessServer(model_server), **options)


class _Careless:
    """A model with the faults the suite is there to catch, around the adapter under test."""

    def __init__(self, model: ChatModel) -> None:
        self._model = model

    @property
    def endpoint(self) -> str:
        return str(getattr(self._model, "endpoint", "careless"))

    async def generate(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantMessage:
        reply = await self._model.generate(messages[-1:], tools)  # forgets the conversation
        # Reverses parallel calls; drops the finish reason and the usage.
        return AssistantMessage(content=reply.content, tool_calls=reply.tool_calls[::-1])

    def stream(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        return self._model.stream(messages[-1:], tools)

    async def aclose(self) -> None:
        close = getattr(self._model, "aclose", None)
        if close is not None:
            await close()


class _CarelessServer:
    """A `ModelServer` whose models are careless; everything else is the server's."""

    def __init__(self, server: ModelServer) -> None:
        self._server = server

    def model(self, **options: Any) -> ChatModel:
        return _Careless(self._server.model(**options))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)


async def _generate(
    model: ChatModel, messages: Sequence[Message], tools: Sequence[ToolSpec]
) -> AssistantMessage:
    """The model's reply; the model is closed afterwards, in this event loop."""
    async with _closing(model):
        return await model.generate(messages, tools)


@asynccontextmanager
async def _closing(model: ChatModel) -> AsyncIterator[ChatModel]:
    """Use ``model``, then close it if it can be closed (``aclose``), as its owner would."""
    try:
        yield model
    finally:
        close = getattr(model, "aclose", None)
        if close is not None:
            await close()


def _essence(messages: Sequence[Message], *, ids: bool = True) -> list[tuple[Any, ...]]:
    """What of a conversation every provider keeps: roles, texts, calls and their answers.

    With ``ids=False`` a call is known by its position in the conversation (``#0``, ``#1``...)
    and a result by the position of the call it answers.
    """
    out: list[tuple[Any, ...]] = []
    known: dict[str, str] = {}

    def key(call_id: str) -> str:
        return call_id if ids else known.get(call_id, f"unknown call {call_id!r}")

    for m in messages:
        if isinstance(m, AssistantMessage):
            for c in m.tool_calls:
                known.setdefault(c.id, f"#{len(known)}")
            out.append(
                (
                    "assistant",
                    m.content or None,
                    tuple((key(c.id), c.name, c.arguments) for c in m.tool_calls),
                )
            )
        elif isinstance(m, ToolMessage):
            out.append(("tool", key(m.tool_call_id), m.content))
        elif isinstance(m, UserMessage):
            out.append(("user", m.content))
        elif isinstance(m, SystemMessage):
            out.append(("system", m.content))
    return out
