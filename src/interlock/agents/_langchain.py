"""LangChain chat models and tools in interlock agents.

`LangChainChatModel` wraps any chat model of ``langchain-core`` that can call tools (a
``BaseChatModel`` with ``bind_tools``): ``ChatBedrockConverse``, ``ChatVertexAI``,
``ChatOllama``, ``AzureChatOpenAI``, ``ChatMistralAI``, ``ChatAnthropic``... configured as
their users already configure them. The conversation stays in interlock's own message types;
each call converts it to LangChain's messages (``SystemMessage``, ``HumanMessage``,
``AIMessage`` with ``tool_calls``, ``ToolMessage`` with ``tool_call_id``) and reads the reply
back, so a thread can switch between a LangChain model and another adapter between turns.

`from_langchain` turns a LangChain tool (a ``BaseTool``: a ``@tool`` function, a
``StructuredTool``, a toolkit's tools) into an interlock `Tool`, which an agent's approval
policy gates like any other.

Install with ``pip install 'interlock[langchain]'`` plus the provider's LangChain package
(``langchain-aws``, ``langchain-ollama``...).

The wrapped model keeps its own clients and retries (``max_retries`` of the provider's
class); whatever it raises reaches the caller as one `ModelError` that names the model, carries
the HTTP status and the ``Retry-After`` the provider asked for when its error has them, and says
what to check. The wrapper holds nothing bound to an event loop, so ``app.run_sync(...)`` then
``app.resume_sync(...)`` (each in a loop of its own) can share one model as far as the wrapped
model allows it (LangChain's OpenAI and Anthropic classes do).

Examples:
    Any LangChain chat model::

        from langchain_aws import ChatBedrockConverse

        model = LangChainChatModel(ChatBedrockConverse(model="anthropic.claude-3-5-haiku"))

    A LangChain tool, under a policy::

        from langchain_community.tools import ShellTool

        agent = ToolAgent(
            "ops",
            model,
            [from_langchain(ShellTool())],
            policy=ApprovalPolicy({"terminal": require_approval()}),
        )
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import email.utils
import threading
import time
from collections import deque
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import aclosing, contextmanager, suppress
from types import TracebackType
from typing import Any, Generic, NoReturn, Self, TypeVar

import anyio
import msgspec

from .._errors import ModelError
from ..graph import MessageChunk, ToolCallChunk, Usage
from ._messages import (
    AssistantMessage,
    FinishReason,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    message_from_chunks,
)
from ._models import ToolSpec
from ._tools import Tool

try:
    from langchain_core import messages as lc
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages.tool import invalid_tool_call, tool_call
    from langchain_core.runnables import Runnable
    from langchain_core.tools import BaseTool
    from langchain_core.utils.function_calling import convert_to_openai_function
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "LangChainChatModel and from_langchain need the langchain-core package: "
        "pip install 'interlock[langchain]'"
    ) from exc

__all__ = ["LangChainChatModel", "from_langchain"]

_T = TypeVar("_T")

_URL_FIELDS = (
    "openai_api_base",
    "base_url",
    "anthropic_api_url",
    "azure_endpoint",
    "endpoint_url",
    "api_base",
    "endpoint",
)
"""Where the provider classes of LangChain keep their endpoint's URL (the first one set wins)."""


class LangChainChatModel:
    """A chat model of LangChain (any ``BaseChatModel`` with ``bind_tools``), as an agent's model.

    The wrapped model runs in one asyncio event loop that all LangChain models share, in a
    thread started on first use (``own_loop=True``, the default): the clients LangChain's
    classes keep, some in caches shared by the whole process (``ChatOpenAI`` keeps one HTTP
    client per base URL), then belong to that one loop for the process's life, whatever loop
    the agent runs in: ``app.run_sync`` then ``app.resume_sync`` (each starts a loop of its
    own), asyncio or trio. Context variables (tracing) are carried over to it. Using the same
    LangChain models directly in another loop of the process is what breaks them then.

    Args:
        model: The LangChain chat model, configured as usual (credentials, region,
            temperature, retries, timeout are its own settings).
        stream: Whether `generate` streams the reply (``astream``) and joins it, instead of
            asking for it whole (``ainvoke``). `stream` always streams.
        own_loop: Run the model in the loop LangChain models share (see above). False runs
            it in the caller's loop (asyncio only), saving a hop between threads per call, for
            an application that keeps one asyncio loop for its whole life.
        **tool_options: Keyword arguments for the model's ``bind_tools`` when tools are on
            offer (``tool_choice="any"``, ``parallel_tool_calls=False``, ``strict=True``: what
            the provider's class accepts).

    Raises:
        TypeError: ``model`` is not a LangChain chat model, or ``stream`` or ``own_loop`` is
            not a bool.
        ValueError: The model's class cannot call tools (it has no ``bind_tools``).
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        stream: bool = False,
        own_loop: bool = True,
        **tool_options: Any,
    ) -> None:
        if not isinstance(model, BaseChatModel):
            raise TypeError(
                "LangChainChatModel wraps a LangChain chat model (a langchain_core "
                "BaseChatModel such as ChatBedrockConverse or ChatOllama), not "
                f"{type(model).__name__}"
            )
        if type(model).bind_tools is BaseChatModel.bind_tools:
            raise ValueError(
                f"{type(model).__name__} cannot call tools (its class has no bind_tools), and an "
                "agent offers its model tools: use a chat model class that supports tool calling"
            )
        if not isinstance(stream, bool):
            raise TypeError(f"stream must be True or False, not {stream!r}")
        if not isinstance(own_loop, bool):
            raise TypeError(f"own_loop must be True or False, not {own_loop!r}")
        self._model = model
        self._stream = stream
        self._own_loop = own_loop
        self._tool_options = dict(tool_options)
        self._bound: tuple[bytes, Runnable[Any, Any]] | None = None
        self._closed = False

    # -- lifetime --------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Refuse further calls (the wrapped model, and the loop models share, are left as they
        are: the wrapped model's clients are its own)."""
        self._closed = True

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _loop_here(self) -> _OwnLoop | None:
        """The loop to run the model in: the shared one, or None for the caller's.

        Raises:
            ModelError: The model was closed, or is to run in the caller's loop, which is not
                asyncio's.
        """
        if self._closed:
            raise ModelError(
                f"{self._where} was closed (aclose()); create a new LangChainChatModel to go on",
                endpoint=self.endpoint,
            )
        if self._own_loop:
            return _shared_loop()
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise ModelError(
                f"{self._where} was made with own_loop=False, which runs it in the caller's "
                "event loop, and LangChain runs only on asyncio: leave own_loop out to run it "
                "under trio",
                endpoint=self.endpoint,
            ) from None
        return None

    # -- what it is ------------------------------------------------------------------------

    @property
    def model(self) -> BaseChatModel:
        """The wrapped LangChain chat model."""
        return self._model

    @property
    def name(self) -> str:
        """The model's name, as LangChain reports it (its class name when it does not)."""
        return str(self._params().get("ls_model_name") or type(self._model).__name__)

    @property
    def endpoint(self) -> str:
        """Where the model lives (how errors name it): its base URL when the provider's class
        has one, else ``<provider>:<model name>``."""
        for field in _URL_FIELDS:
            value = getattr(self._model, field, None)
            if isinstance(value, str) and value.startswith(("http://", "https://")):
                return value.rstrip("/")
        provider = self._params().get("ls_provider") or type(self._model).__name__
        return f"{provider}:{self.name}"

    def __repr__(self) -> str:
        mode = " streaming" if self._stream else ""
        return f"<LangChainChatModel {type(self._model).__name__} {self.name!r}{mode}>"

    def _params(self) -> Mapping[str, Any]:
        try:
            params = self._model._get_ls_params()
        except Exception:  # a provider's class that cannot say: only names are lost
            return {}
        return params if isinstance(params, Mapping) else {}

    @property
    def _where(self) -> str:
        return f"LangChain model {self.name!r} ({type(self._model).__name__}) at {self.endpoint}"

    # -- the protocol ----------------------------------------------------------------------

    async def generate(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantMessage:
        """Return the model's reply to the conversation, given the tools it may call.

        Raises:
            ModelError: The wrapped model raised (its provider failed, refused the request or
                could not be reached), or returned something that is not an ``AIMessage``.
        """
        if self._stream:
            loop = self._loop_here()
            if loop is None:
                return message_from_chunks([c async for c in self.stream(messages, tools)])
            # Nobody reads the pieces as they come: the stream is read whole in the model's own
            # loop, one hop between threads for the reply rather than one a piece.
            runnable, wire = self._request(messages, tools)
            with self._guard():
                chunks = await loop.call(lambda: _collect(self._read(runnable.astream(wire))))
            return message_from_chunks(chunks)
        runnable, wire = self._request(messages, tools)
        loop = self._loop_here()
        with self._guard():
            if loop is not None:
                reply = await loop.call(lambda: runnable.ainvoke(wire))
            else:
                reply = await runnable.ainvoke(wire)
        return self._reply(reply)

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AsyncGenerator[MessageChunk, None]:
        """Yield the reply as the model writes it; the chunks join into one message.

        Close the generator (``aclose()``, or ``contextlib.aclosing``) to stop reading early:
        the wrapped model's stream is closed at once.

        Raises:
            ModelError: As `generate`, and when the stream carries something that is not an
                ``AIMessageChunk``.
        """
        runnable, wire = self._request(messages, tools)
        loop = self._loop_here()
        pieces: AsyncIterator[Any]
        if loop is not None:
            pieces = loop.iterate(lambda: runnable.astream(wire))
        else:
            pieces = runnable.astream(wire)
        async with aclosing(self._read(pieces)) as read:
            async for piece in read:
                yield piece

    async def _read(self, pieces: AsyncIterator[Any]) -> AsyncGenerator[MessageChunk, None]:
        """The message chunks of a LangChain stream; the stream is closed when this is."""
        reading = _Reading()
        try:
            while True:
                with self._guard():
                    item = await anext(pieces, None)
                if item is None:
                    break
                piece = self._chunk(item, reading)
                if piece is not None:
                    yield piece
        finally:
            closing = getattr(pieces, "aclose", None)
            if closing is not None:
                # Shielded: a cancelled consumer must still let the provider's stream go.
                with anyio.CancelScope(shield=True), self._guard():
                    await closing()
        if not reading.started or not (reading.text or reading.calls):
            # Nothing written: one empty piece, so that the joined message has the text ""
            # that `generate` gives.
            yield MessageChunk(role=None if reading.started else "assistant", content="")
        if reading.refused and not reading.finished:
            yield MessageChunk(finish_reason="refusal")

    # -- the request -----------------------------------------------------------------------

    def _request(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> tuple[Runnable[Any, Any], list[lc.BaseMessage]]:
        """The model (with the tools bound when there are any) and the messages to send."""
        wire = [to_langchain(m) for m in messages]
        for spec in tools:
            if not isinstance(spec, ToolSpec):
                raise TypeError(f"tools must be ToolSpec objects, not {type(spec).__name__}")
        if not tools:
            return self._model, wire
        key = msgspec.json.encode([spec.to_openai() for spec in tools])
        if self._bound is None or self._bound[0] != key:
            with self._guard():
                bound = self._model.bind_tools(
                    [spec.to_openai() for spec in tools], **self._tool_options
                )
            self._bound = (key, bound)
        return self._bound[1], wire

    # -- the answer ------------------------------------------------------------------------

    def _reply(self, reply: object) -> AssistantMessage:
        """Read a whole reply (an ``AIMessage``)."""
        if not isinstance(reply, lc.AIMessage):
            self._malformed(f"returned {_preview(reply)}, not an AIMessage")
        text = _text(reply.content)
        refusal = reply.additional_kwargs.get("refusal")
        refused = False
        if not text and isinstance(refusal, str) and refusal:
            text, refused = refusal, True
        calls: list[ToolCall] = []
        for position, raw in enumerate(reply.tool_calls):
            name, call_id, arguments = raw.get("name"), raw.get("id"), raw.get("args")
            if not isinstance(name, str) or not name or not isinstance(arguments, Mapping):
                self._malformed(f"returned a tool call without a name or arguments: {raw!r:.200}")
            calls.append(
                ToolCall(id=call_id or f"call_{position}", name=name, arguments=dict(arguments))
            )
        for raw_bad in reply.invalid_tool_calls:
            position = len(calls)
            raw_args = raw_bad.get("args")
            calls.append(
                ToolCall(
                    id=raw_bad.get("id") or f"call_{position}",
                    name=raw_bad.get("name") or "",
                    raw_arguments=raw_args if isinstance(raw_args, str) else "",
                )
            )
        finish = _finish_reason(reply.response_metadata, refused=refused, calls=bool(calls))
        if refused:
            finish = "refusal"
        return AssistantMessage(
            content=text if text or not calls else None,
            tool_calls=tuple(calls),
            finish_reason=finish,
            usage=_usage(reply.usage_metadata),
        )

    def _chunk(self, item: object, reading: _Reading) -> MessageChunk | None:
        """Read one streamed piece (an ``AIMessageChunk``); None when it carries nothing."""
        if not isinstance(item, lc.AIMessageChunk):
            self._malformed(f"streamed {_preview(item)}, not an AIMessageChunk")
        text = _text(item.content) or None
        refusal = item.additional_kwargs.get("refusal")
        if text is None and isinstance(refusal, str) and refusal:
            text, reading.refused = refusal, True
        calls = []
        for raw in item.tool_call_chunks:
            index = raw.get("index")
            if isinstance(index, bool) or not isinstance(index, int):
                index = reading.next_index  # a provider that sends each call whole, unnumbered
            reading.next_index = max(reading.next_index, index + 1)
            arguments = raw.get("args") or ""
            name, call_id = raw.get("name"), raw.get("id")
            if not all(v is None or isinstance(v, str) for v in (name, call_id, arguments)):
                self._malformed(f"streamed a tool call piece that is not text: {raw!r:.200}")
            calls.append(ToolCallChunk(index=index, id=call_id, name=name, arguments=arguments))
        reading.calls = reading.calls or bool(calls)
        reading.text = reading.text or text is not None
        finish = _finish_reason(
            item.response_metadata, refused=reading.refused, calls=reading.calls
        )
        reading.finished = reading.finished or finish is not None
        usage = _usage(item.usage_metadata)
        if text is None and not calls and finish is None and usage is None:
            return None
        role = None if reading.started else "assistant"
        reading.started = True
        return MessageChunk(
            role=role, content=text, tool_calls=tuple(calls), finish_reason=finish, usage=usage
        )

    # -- failures --------------------------------------------------------------------------

    def _malformed(self, detail: str) -> NoReturn:
        raise ModelError(
            f"{self._where} {detail}; check that the object wrapped is a chat model whose "
            "ainvoke returns an AIMessage (a chat model class, not a chain or an LLM)",
            endpoint=self.endpoint,
        )

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Turn whatever the wrapped model raises into a `ModelError` that says what to check."""
        try:
            yield
        except ModelError:
            raise
        except _Closed as exc:
            raise ModelError(
                f"{self._where} was closed (aclose()) during the call; create a new "
                "LangChainChatModel to go on",
                endpoint=self.endpoint,
            ) from exc
        except NotImplementedError as exc:
            raise ModelError(
                f"{self._where} does not support what was asked of it "
                f"({str(exc) or 'NotImplementedError'}): check that its class supports tool "
                "calling",
                endpoint=self.endpoint,
            ) from exc
        except Exception as exc:
            raise self._error(exc) from exc

    def _error(self, exc: Exception) -> ModelError:
        status = _status(exc)
        retry_after = _retry_after(exc)
        said = f"{type(exc).__name__}: {_preview(str(exc) or repr(exc))}"
        if status is not None:
            return ModelError(
                f"{self._where} answered HTTP {status} ({said}); {_advice(status, retry_after)}",
                endpoint=self.endpoint,
                status=status,
                retry_after=retry_after,
            )
        if _is_timeout(exc):
            advice = (
                "the provider may be overloaded or the model still loading: check it, or raise "
                "the timeout of the model's class"
            )
            return ModelError(
                f"{self._where} did not answer in time ({said}); {advice}",
                endpoint=self.endpoint,
            )
        if _named(exc, "Connect"):
            return ModelError(
                f"could not reach {self._where} ({said}); check its endpoint, the network, and "
                "that the server is running",
                endpoint=self.endpoint,
            )
        return ModelError(
            f"{self._where} failed ({said}); check the model's settings (name, credentials, "
            "region) and the provider's logs",
            endpoint=self.endpoint,
        )


class _Reading:
    """What a stream has carried so far."""

    __slots__ = ("calls", "finished", "next_index", "refused", "started", "text")

    def __init__(self) -> None:
        self.started = False
        self.finished = False
        self.text = False
        self.calls = False
        self.refused = False
        self.next_index = 0


class _OwnLoop:
    """An asyncio event loop running in a daemon thread of its own, and the way to await, from
    any other loop (asyncio or trio), what runs in it."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._run, name="interlock-langchain-model", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            for task in asyncio.all_tasks(self._loop):
                task.cancel()
            pending = asyncio.all_tasks(self._loop)
            if pending:
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def stop(self) -> None:
        """Stop the loop (cancelling what runs in it) and wait for its thread to end."""
        if self._loop.is_closed():
            return
        try:
            self._loop.call_soon_threadsafe(self._loop.stop)
        except RuntimeError:  # closed meanwhile
            return
        self._thread.join()

    def _start(self, make: Callable[[], Awaitable[_T]], done: Callable[[], None]) -> _Job[_T]:
        """Run ``make()`` as a task of this loop, in the caller's context; ``done`` is called,
        in this loop's thread, when it ends."""
        job: _Job[_T] = _Job()

        def start() -> None:
            def finish(_: object) -> None:
                job.done = True
                done()

            job.task = asyncio.ensure_future(_awaited(make), loop=self._loop)
            job.task.add_done_callback(finish)

        try:
            self._loop.call_soon_threadsafe(start, context=contextvars.copy_context())
        except RuntimeError as exc:  # stopped
            raise _Closed("the model's event loop was stopped") from exc
        return job

    def _cancel(self, job: _Job[Any]) -> None:
        def cancel() -> None:
            if job.task is not None:
                job.task.cancel()

        # Scheduled after the job's start (the loop runs callbacks in order). A loop that was
        # stopped has cancelled the task already.
        with suppress(RuntimeError):
            self._loop.call_soon_threadsafe(cancel)

    async def call(self, make: Callable[[], Awaitable[_T]]) -> _T:
        """Await ``make()`` in this loop; cancelling the caller cancels it."""
        wake = _waker()
        finished = anyio.Event()
        job = self._start(make, lambda: wake(finished.set))
        try:
            await finished.wait()
        except BaseException:
            self._cancel(job)
            with anyio.CancelScope(shield=True):
                await finished.wait()
            raise
        return job.result()

    async def iterate(self, make: Callable[[], AsyncIterator[_T]]) -> AsyncGenerator[_T, None]:
        """Iterate ``make()`` in this loop, yielding its items here as they come.

        The pump wakes the caller's loop only when the caller waits for an item: a stream's
        items mostly come while the caller is busy with the one before, and each wake is a
        write to the other loop's self-pipe. Both sides set their mark before they look at
        the other's (the item queued, then the waiting mark read; the waiting mark set, then
        the queue read), so an item is never left unannounced.
        """
        wake = _waker()
        items: deque[_T] = deque()
        signal = anyio.Event()
        waiting = [False]

        def ping() -> None:
            signal.set()

        def announce() -> None:
            if waiting[0]:
                waiting[0] = False
                wake(ping)

        async def pump() -> None:
            async for item in make():
                items.append(item)
                announce()

        job = self._start(pump, lambda: wake(ping))
        try:
            while True:
                while not items and not job.done:
                    signal = anyio.Event()
                    waiting[0] = True
                    if items or job.done:
                        waiting[0] = False
                        break
                    await signal.wait()
                if items:
                    yield items.popleft()
                    continue
                job.result()  # raises what the stream raised
                return
        finally:
            if not job.done:
                self._cancel(job)
                with anyio.CancelScope(shield=True):
                    while not job.done:
                        signal = anyio.Event()
                        if job.done:
                            break
                        await signal.wait()


class _Closed(RuntimeError):
    """The model's own loop was stopped (`LangChainChatModel.aclose`) under a call."""


class _Job(Generic[_T]):
    """A task of the model's own loop, as another loop sees it."""

    __slots__ = ("done", "task")

    def __init__(self) -> None:
        self.task: asyncio.Future[_T] | None = None
        self.done = False

    def result(self) -> _T:
        assert self.task is not None and self.done
        if self.task.cancelled():
            raise _Closed("the model's call was cancelled as its event loop stopped")
        return self.task.result()


_SHARED: _OwnLoop | None = None
_SHARED_LOCK = threading.Lock()


def _shared_loop() -> _OwnLoop:
    """The event loop LangChain models run in, started on first use and stopped as the
    interpreter exits."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = _OwnLoop()
            atexit.register(_SHARED.stop)
        return _SHARED


async def _awaited(make: Callable[[], Awaitable[_T]]) -> _T:
    # The caller's context came along (for tracing), and with it, under trio, sniffio's mark
    # of the running library, which would make anyio (in the provider's SDK) take this
    # asyncio loop for trio: it is cleared for this task.
    try:
        import sniffio
    except ImportError:  # pragma: no cover - anyio then assumes asyncio
        pass
    else:
        sniffio.current_async_library_cvar.set(None)
    return await make()


async def _collect(items: AsyncGenerator[_T, None]) -> list[_T]:
    """Every item of ``items``, read to the end (and the generator closed)."""
    async with aclosing(items):
        return [item async for item in items]


def _waker() -> Callable[[Callable[[], None]], None]:
    """A function that runs a callback in the running event loop, called from another thread
    (a callback that comes after that loop ended is dropped)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None:

        def wake(callback: Callable[[], None]) -> None:
            with suppress(RuntimeError):  # the loop ended
                loop.call_soon_threadsafe(callback)

        return wake
    import trio  # not asyncio: anyio runs on trio then

    token = trio.lowlevel.current_trio_token()

    def wake_trio(callback: Callable[[], None]) -> None:
        with suppress(trio.RunFinishedError):
            token.run_sync_soon(callback)

    return wake_trio


# -- messages --------------------------------------------------------------------------------


def to_langchain(message: Message) -> lc.BaseMessage:
    """The message as LangChain's message of its role.

    Raises:
        TypeError: ``message`` is not an interlock message.
    """
    if isinstance(message, AssistantMessage):
        calls: list[lc.ToolCall] = []
        invalid: list[lc.InvalidToolCall] = []
        for call in message.tool_calls:
            if call.raw_arguments is not None:
                invalid.append(
                    invalid_tool_call(
                        name=call.name, args=call.raw_arguments, id=call.id, error=None
                    )
                )
            else:
                calls.append(tool_call(name=call.name, args=dict(call.arguments), id=call.id))
        return lc.AIMessage(
            content=message.content or "",
            tool_calls=calls,
            invalid_tool_calls=invalid,
            name=message.name,
        )
    if isinstance(message, ToolMessage):
        return lc.ToolMessage(
            content=message.content,
            tool_call_id=message.tool_call_id,
            name=message.name,
            status="success" if message.status in ("ok", "responded") else "error",
        )
    if isinstance(message, UserMessage):
        return lc.HumanMessage(content=message.content, name=message.name)
    if isinstance(message, SystemMessage):
        return lc.SystemMessage(content=message.content)
    raise TypeError(f"to_langchain() takes an interlock message, not {type(message).__name__}")


def _text(content: object) -> str:
    """The text of a LangChain message's content: a string, or the text of its blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif (
                isinstance(block, Mapping)
                and block.get("type", "text") == "text"
                and isinstance(block.get("text"), str)
            ):
                parts.append(block["text"])
        return "".join(parts)
    return ""


_FINISH_REASONS: Mapping[str, FinishReason] = {
    # OpenAI, Mistral, Ollama, Groq...
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    "model_length": "length",
    # Anthropic, Bedrock (Converse)
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "refusal",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
    "model_context_window_exceeded": "length",
    # Gemini and Vertex (upper case there)
    "max_output_tokens": "length",
    "safety": "content_filter",
    "recitation": "content_filter",
    "prohibited_content": "content_filter",
    "blocklist": "content_filter",
    "spii": "content_filter",
    "image_safety": "content_filter",
    # Cohere
    "complete": "stop",
    "tool_call": "tool_calls",
}
"""Why a reply ended, as each provider words it, in interlock's words."""

_FINISH_KEYS = ("finish_reason", "stop_reason", "stopReason", "done_reason")
"""Where the providers' LangChain classes put why a reply ended, in ``response_metadata``."""


def _finish_reason(metadata: object, *, refused: bool, calls: bool) -> FinishReason | None:
    """Why a reply ended, from its ``response_metadata``; None when the provider does not say
    (or says something outside the set above). A refusal (OpenAI's ``refusal`` text) is one
    whatever the provider says; a reply with tool calls that "stopped" (Gemini says ``STOP``
    for those) stopped for its tool calls."""
    if not isinstance(metadata, Mapping):
        return None
    raw = next((metadata[k] for k in _FINISH_KEYS if isinstance(metadata.get(k), str)), None)
    if raw is None:
        return None
    if refused:
        return "refusal"
    finish = _FINISH_REASONS.get(raw.lower())
    return "tool_calls" if finish == "stop" and calls else finish


def _usage(metadata: object) -> Usage | None:
    """The tokens a reply reports (``usage_metadata``), or None when it reports none."""
    if not isinstance(metadata, Mapping):
        return None
    details = metadata.get("input_token_details")
    cached = details.get("cache_read") if isinstance(details, Mapping) else None
    counts = [metadata.get("input_tokens"), metadata.get("output_tokens"), cached]
    if not any(isinstance(n, int) and not isinstance(n, bool) for n in counts):
        return None
    whole = [n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else 0 for n in counts]
    return Usage(input_tokens=whole[0], output_tokens=whole[1], cached_tokens=whole[2])


# -- errors ----------------------------------------------------------------------------------


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """The exception and those it was raised from (a provider's class often wraps its SDK's)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _http_status(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
        return value
    return None


def _status(exc: BaseException) -> int | None:
    """The HTTP status a provider's error carries: ``status_code`` (OpenAI, Anthropic,
    Mistral, Ollama), ``status`` (aiohttp), ``code`` (Google), ``response.status_code`` (httpx,
    requests) or botocore's ``ResponseMetadata.HTTPStatusCode`` (Bedrock)."""
    for error in _causes(exc):
        for field in ("status_code", "status", "code"):
            found = _http_status(getattr(error, field, None))
            if found is not None:
                return found
        response = getattr(error, "response", None)
        found = _http_status(getattr(response, "status_code", None))
        if found is not None:
            return found
        if isinstance(response, Mapping):
            meta = response.get("ResponseMetadata")
            if isinstance(meta, Mapping):
                found = _http_status(meta.get("HTTPStatusCode"))
                if found is not None:
                    return found
    return None


def _headers(error: BaseException) -> Mapping[str, Any] | None:
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if headers is not None and hasattr(headers, "get"):
        return headers  # type: ignore[no-any-return]
    if isinstance(response, Mapping):
        meta = response.get("ResponseMetadata")
        if isinstance(meta, Mapping) and isinstance(meta.get("HTTPHeaders"), Mapping):
            return meta["HTTPHeaders"]  # type: ignore[no-any-return]
    headers = getattr(error, "headers", None)
    return headers if headers is not None and hasattr(headers, "get") else None


def _retry_after(exc: BaseException) -> float | None:
    """The seconds a provider's error response asked to wait (``retry-after-ms`` or
    ``retry-after``, in seconds or as an HTTP date), if it asked."""
    for error in _causes(exc):
        headers = _headers(error)
        if headers is None:
            continue
        millis = headers.get("retry-after-ms")
        if millis is not None:
            try:
                return max(float(millis) / 1000, 0.0)
            except (TypeError, ValueError):
                pass
        value = headers.get("retry-after")
        if value is None:
            continue
        try:
            return max(float(value), 0.0)
        except (TypeError, ValueError):
            pass
        try:
            when = email.utils.parsedate_to_datetime(str(value))
        except (TypeError, ValueError):
            continue
        return max(when.timestamp() - time.time(), 0.0)
    return None


def _advice(status: int, retry_after: float | None) -> str:
    if status == 401:
        return "the credentials were refused: check the key the model was configured with"
    if status == 403:
        return "the credentials may not use this model: check their permissions"
    if status == 404:
        return "check the model's name and its endpoint (base URL, region)"
    if status in (400, 422):
        return (
            "the provider refused the request: check the model's settings and that the model "
            "supports the tools offered"
        )
    if status == 429:
        wait = f" (it asks to wait {retry_after:g}s)" if retry_after is not None else ""
        return (
            f"the provider is rate limiting{wait}, still after the retries of the model's class: "
            "wait, send fewer requests, or raise its max_retries"
        )
    if status >= 500 or status == 408:
        return "the provider failed, still after the retries of the model's class: check its status"
    return "check the provider's logs"


def _named(exc: BaseException, word: str) -> bool:
    """Whether the error, or one it came from, has a class with ``word`` in its name (the
    providers' SDKs each have their own ``APIConnectionError``, ``ConnectTimeout``...)."""
    return any(word in cls.__name__ for error in _causes(exc) for cls in type(error).__mro__)


def _is_timeout(exc: BaseException) -> bool:
    return any(isinstance(e, TimeoutError) for e in _causes(exc)) or _named(exc, "Timeout")


def _preview(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


# -- tools -----------------------------------------------------------------------------------


def from_langchain(
    tool: BaseTool,
    *,
    name: str | None = None,
    description: str | None = None,
    dangerous: bool | None = None,
    idempotent: bool = False,
) -> Tool:
    """Make an interlock `Tool` of a LangChain tool (a ``BaseTool``).

    The model is offered the tool's name, description and the JSON Schema of its arguments
    (from its ``args_schema``, a pydantic model or a JSON Schema, as LangChain describes it to
    its own models). A call runs the tool's ``ainvoke`` (LangChain runs a sync tool in a
    thread); its result reaches the model as text (a string as it is, anything else as
    JSON), and an exception it raises as a tool error the model reads. The agent's approval
    policy gates it like any tool, by its name and arguments. The tool runs in the event
    loop LangChain models share (see `LangChainChatModel`), so it works under trio too.

    Args:
        tool: The LangChain tool.
        name: The name the model calls it by, instead of the tool's own (which must be 1 to 64
            letters, digits, ``_`` or ``-``).
        description: What it does, for the model, instead of the tool's description.
        dangerous: As for `Tool`: make each call at most once (None: when the policy makes
            it wait for approval).
        idempotent: As for `Tool`: safe to repeat.

    Raises:
        TypeError: ``tool`` is not a LangChain tool.
        ValueError: Its name is not a valid tool name, or its arguments have no usable JSON
            Schema.

    Examples:
        >>> from langchain_core.tools import tool as langchain_tool
        >>> @langchain_tool
        ... def shout(text: str) -> str:
        ...     '''Say it louder.'''
        ...     return text.upper()
        >>> from_langchain(shout).parameters["required"]
        ['text']
    """
    if not isinstance(tool, BaseTool):
        raise TypeError(
            "from_langchain() takes a LangChain tool (a langchain_core BaseTool, such as a "
            f"@tool function or a StructuredTool), not {type(tool).__name__}"
        )
    source = tool.name
    try:
        function = convert_to_openai_function(tool)
    except Exception as exc:
        raise ValueError(
            f"LangChain tool {source!r}: its arguments have no usable JSON Schema "
            f"({type(exc).__name__}: {exc}); give it an args_schema (a pydantic model)"
        ) from exc
    parameters = function.get("parameters") or {"type": "object", "properties": {}}

    async def call(**arguments: Any) -> Any:
        # In the loop LangChain models share: LangChain runs on asyncio only (a sync tool
        # goes to asyncio's thread pool), and the tool's clients stay in one loop.
        result = await _shared_loop().call(lambda: tool.ainvoke(arguments))
        if isinstance(result, lc.BaseMessage):  # a tool that answers with a ToolMessage
            return _text(result.content) if not isinstance(result.content, str) else result.content
        return result

    call.__name__ = call.__qualname__ = name or source
    try:
        return Tool(
            name or source,
            description if description is not None else (tool.description or ""),
            parameters,
            call,
            dangerous=dangerous,
            idempotent=idempotent,
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"LangChain tool {source!r} cannot be used as it is: {exc}; pass name= (a valid "
            "name) or fix its args_schema"
        ) from exc
