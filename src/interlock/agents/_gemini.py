"""`GeminiChatModel`: a chat model served by Google's Gemini API.

The model talks through the official ``google-genai`` SDK (``pip install 'interlock[gemini]'``)
and its asynchronous API (``client.aio.models``). On every call it converts interlock's
conversation to Gemini's ``contents`` and back, so a thread may switch between Gemini and any
other model between turns:

- `SystemMessage`\\ s become the request's ``system_instruction`` (joined, in order);
- a `UserMessage` is a ``user`` content with one text part;
- an `AssistantMessage` is a ``model`` content: its text, then one ``function_call`` part per
  tool call;
- the `ToolMessage`\\ s answering one assistant message become one ``user`` content of
  ``function_response`` parts, in the order of the calls (Gemini pairs parallel answers with
  their calls by order and name): ``{"result": ...}``, or ``{"error": ...}`` for a call that
  failed, was rejected or denied;
- each `ToolSpec` becomes a function declaration whose JSON Schema is rewritten into the
  OpenAPI subset Gemini accepts (see `gemini_schema`).

Gemini's function calls carry no ids; the model gives each one an id derived from the request
and the call (``gemini_<digest>``), the same whether the reply was streamed or not, and unique
in a conversation, so that approvals and tool results are matched to their calls.

Every failure reaches the caller as one `ModelError` that names the endpoint and the model,
carries the HTTP status when there was one, and says what to check. The model retries 408,
429 and 5xx answers, timeouts and lost connections itself (``max_retries``), waiting as long
as the server asks (a ``Retry-After`` header, or the ``RetryInfo`` of Gemini's error body).

A client belongs to the event loop it is used in, so the model builds one for each event loop
and closes it as that loop ends: ``app.run_sync(...)`` then ``app.resume_sync(...)``, each in a
loop of its own, share one model (asyncio or trio).

Under trio, a stream closed early leaves the SDK's inner async generator to the garbage
collector; trio closes it and reports a ``ResourceWarning`` (seen only when such warnings are
shown).

Examples:
    Gemini, with the key in ``GEMINI_API_KEY`` (or ``GOOGLE_API_KEY``)::

        model = GeminiChatModel("gemini-2.5-flash", temperature=0)

    Any extra keyword is a field of the SDK's ``GenerateContentConfig``::

        model = GeminiChatModel("gemini-2.5-pro", max_output_tokens=1024, top_p=0.9)
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import math
import os
import random
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from email.utils import parsedate_to_datetime
from functools import partial
from types import TracebackType
from typing import Any, Final, NoReturn, Self

import anyio
import msgspec

from .._errors import ModelError
from ..graph import MessageChunk, ToolCallChunk, Usage
from ._clients import LoopClients, closed_error
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
from ._models import ToolSpec, check_endpoint

try:
    import httpx2
    from google import genai
    from google.genai import errors as genai_errors
    from google.genai import types
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "GeminiChatModel needs the google-genai package: pip install 'interlock[gemini]'"
    ) from exc

__all__ = ["GeminiChatModel", "gemini_schema"]

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
"""Google's Gemini API."""

_NO_KEY = "not-needed"
"""The API key sent to a server that takes none: the SDK insists on one."""

_RESERVED = frozenset({"system_instruction", "tools", "automatic_function_calling", "http_options"})
"""Config fields the model sets itself; they cannot be passed as parameters."""

_RETRIED = frozenset({408, 429, 500, 502, 503, 504})
"""The statuses worth asking again."""

_MAX_WAIT = 60.0
"""The longest wait between two tries; a server asking for longer gets no retry."""


class GeminiChatModel:
    """A chat model served by Google's Gemini API (or a server that speaks it).

    Args:
        model: The model's name (``"gemini-2.5-flash"``, ``"gemini-2.0-flash"``...).
        base_url: The API's root URL, without the version. Defaults to
            ``GOOGLE_GEMINI_BASE_URL``, then to Google's API.
        api_key: The API key. Defaults to ``GEMINI_API_KEY``, then ``GOOGLE_API_KEY``; when
            there is none and the endpoint is not Google's, a placeholder is sent.
        api_version: The API version in the request path.
        timeout: Seconds to wait for the endpoint (to connect, and between bytes of the
            reply); None for no limit.
        max_retries: How many times a request that failed with 408, 429, a 5xx status, a
            timeout or a lost connection is sent again before giving up.
        stream: Whether `generate` streams the reply and joins it. `stream` always streams.
        **params: Fields of the SDK's ``types.GenerateContentConfig`` sent with every request
            (``temperature=0``, ``max_output_tokens=512``, ``safety_settings=[...]``,
            ``thinking_config=...``).

    Raises:
        TypeError: An argument has the wrong type.
        ValueError: An argument has a wrong value (an empty model name, a negative timeout,
            a parameter the model sets itself or that the config does not have).
        ModelError: No client can be built: no API key for Google's API.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_version: str = "v1beta",
        timeout: float | None = None,
        max_retries: int = 2,
        stream: bool = False,
        **params: Any,
    ) -> None:
        if max_retries is None:
            raise TypeError("max_retries must be an int, not None")
        check_endpoint(
            model,
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            stream=stream,
            examples=("'gemini-2.5-flash'", DEFAULT_BASE_URL),
        )
        if not isinstance(api_version, str) or not api_version:
            raise ValueError(
                f"api_version must name a version such as 'v1beta', not {api_version!r}"
            )
        reserved = sorted(_RESERVED.intersection(params))
        if reserved:
            raise ValueError(
                f"{', '.join(reserved)} cannot be passed as parameters: the model sets them "
                "from the conversation and the tools"
            )
        try:
            types.GenerateContentConfig(**params)
        except Exception as exc:  # pydantic's ValidationError
            raise ValueError(
                f"the parameters are not fields of google.genai.types.GenerateContentConfig: "
                f"{_preview(str(exc))}"
            ) from exc

        url = (base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        key = api_key or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
        if not key:
            if url == DEFAULT_BASE_URL:
                raise ModelError(
                    f"cannot set up model {model!r} at {url}: no API key; pass api_key= or set "
                    "GEMINI_API_KEY (or GOOGLE_API_KEY)",
                    endpoint=url,
                )
            key = _NO_KEY
        self._model = model
        self._url = url
        self._key = key
        self._api_version = api_version
        self._timeout = None if timeout is None else float(timeout)
        self._max_retries = max_retries
        self._stream = stream
        self._params = dict(params)
        self._kept: tuple[str | None, tuple[ToolSpec, ...], types.GenerateContentConfig] | None = (
            None
        )
        """The last request config built, with the system prompt and tools it was built for."""
        # One client per running event loop, closed as that loop ends.
        self._clients = LoopClients.owned(
            self._build_client, _close_client, closed_error=self._closed_error
        )

    # -- what it is ------------------------------------------------------------------------

    @property
    def model(self) -> str:
        """The model's name."""
        return self._model

    @property
    def endpoint(self) -> str:
        """The API's root URL (how errors name it)."""
        return self._url

    @property
    def params(self) -> Mapping[str, Any]:
        """The config fields sent with every request."""
        return dict(self._params)

    def __repr__(self) -> str:
        mode = " streaming" if self._stream else ""
        closed = " closed" if self._clients.closed else ""
        return f"<GeminiChatModel {self._model!r} at {self.endpoint}{mode}{closed}>"

    @property
    def _where(self) -> str:
        return f"model {self._model!r} at {self.endpoint}"

    # -- lifetime --------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the HTTP client of the running event loop; those of other loops still
        running are closed as those loops end."""
        await self._clients.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _build_client(self) -> genai.Client:
        options = types.HttpOptions(
            base_url=self._url,
            api_version=self._api_version,
            timeout=None if self._timeout is None else math.ceil(self._timeout * 1000),
            # A transport of its own: the SDK then uses httpx2 (which runs under asyncio and
            # trio) whatever else is installed, and leaves retries to this model.
            async_client_args={"transport": httpx2.AsyncHTTPTransport()},
        )
        return genai.Client(api_key=self._key, http_options=options)

    def _closed_error(self) -> ModelError:
        return closed_error(self, self._where, self.endpoint)

    # -- the protocol ----------------------------------------------------------------------

    async def generate(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantMessage:
        """Return the model's reply to the conversation, given the tools it may call.

        With ``stream=True`` the reply is streamed and its chunks joined.

        Raises:
            ModelError: The endpoint failed, could not be reached, or answered something that
                is not a Gemini response.
        """
        if self._stream:
            return message_from_chunks([chunk async for chunk in self.stream(messages, tools)])
        contents, config, salt = self._request(messages, tools)
        client = await self._clients.here()

        async def once() -> Any:
            return await client.aio.models.generate_content(
                model=self._model, contents=contents, config=config
            )

        response = await self._with_retries(once)
        return self._reply(response, salt)

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AsyncGenerator[MessageChunk, None]:
        """Yield the reply as the endpoint writes it; the chunks join into what `generate`
        returns.

        Raises:
            ModelError: As `generate`, and when the stream breaks off before the reply is
                finished or carries something that is not a response.
        """
        contents, config, salt = self._request(messages, tools)
        client = await self._clients.here()

        async def opened() -> tuple[AsyncIterator[Any], Any]:
            chunks = await client.aio.models.generate_content_stream(
                model=self._model, contents=contents, config=config
            )
            try:
                first = await anext(chunks, None)
            except BaseException:
                await _close(chunks)
                raise
            return chunks, first

        # Only the opening is retried: once a piece was yielded, a retry would repeat it.
        chunks, item = await self._with_retries(opened)
        reading = _Reading(salt)
        wrote = False
        try:
            while item is not None:
                for piece in self._chunk(item, reading):
                    wrote = wrote or piece.content is not None or bool(piece.tool_calls)
                    yield piece
                with self._guard():
                    item = await anext(chunks, None)
        finally:
            with anyio.CancelScope(shield=True):
                await _close(chunks)
        if reading.finish is None:
            raise ModelError(
                f"{self._where} ended its stream before the reply was finished (no chunk gave "
                "a finish reason); the server may have dropped the connection: run again, or "
                "check the server",
                endpoint=self.endpoint,
            )
        if not wrote:  # no text, no call: the text "" that `generate` gives
            yield MessageChunk(role="assistant", content="")
        if reading.usage is not None:  # reported whole on each chunk: counted once, at the end
            yield MessageChunk(usage=reading.usage)

    # -- the request -----------------------------------------------------------------------

    def _request(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> tuple[list[types.Content], types.GenerateContentConfig, str]:
        """The contents, the config, and a digest of the request (what call ids derive from)."""
        for spec in tools:
            if not isinstance(spec, ToolSpec):
                raise TypeError(f"tools must be ToolSpec objects, not {type(spec).__name__}")
        system, contents = to_gemini(messages)
        config = self._config(system, tools)
        # The call ids derive from the request: the same conversation gives the same ids.
        digest = hashlib.sha256(msgspec.json.encode([system, *messages]))
        return contents, config, digest.hexdigest()[:12]

    def _config(self, system: str | None, tools: Sequence[ToolSpec]) -> types.GenerateContentConfig:
        """The request's config: built (and checked by the SDK) once for a system prompt and a
        set of tools, then reused while an agent's turns offer the same ones."""
        kept = self._kept
        if (
            kept is not None
            and kept[0] == system
            and len(kept[1]) == len(tools)
            and all(a is b or a == b for a, b in zip(kept[1], tools, strict=True))
        ):
            return kept[2]
        config: dict[str, Any] = dict(self._params)
        if system:
            config["system_instruction"] = system
        if tools:
            config["tools"] = [
                types.Tool(
                    function_declarations=[
                        types.FunctionDeclaration(
                            name=spec.name,
                            description=spec.description,
                            parameters=types.Schema.model_validate(gemini_schema(spec.parameters)),
                        )
                        for spec in tools
                    ]
                )
            ]
            # Tools are declared, never run by the SDK: the agent runs them, under its policy.
            config["automatic_function_calling"] = types.AutomaticFunctionCallingConfig(
                disable=True
            )
        built = types.GenerateContentConfig(**config)
        self._kept = (system, tuple(tools), built)
        return built

    # -- the answer ------------------------------------------------------------------------

    def _reply(self, response: Any, salt: str) -> AssistantMessage:
        """Read the assistant message of a whole response."""
        reading = _Reading(salt)
        chunks = self._chunk(response, reading)
        if reading.finish is None:
            self._malformed(f"its candidate gives no finish reason: {_preview(_dump(response))}")
        if reading.usage is not None:
            chunks.append(MessageChunk(usage=reading.usage))
        message = message_from_chunks(chunks)
        if message.content is None and not message.tool_calls:
            message = msgspec.structs.replace(message, content="")
        return message

    def _chunk(self, response: Any, reading: _Reading) -> list[MessageChunk]:
        """The pieces of message one response (or streamed chunk) carries; what it says of
        the finish and the usage is kept in ``reading``."""
        if not isinstance(response, types.GenerateContentResponse):
            self._malformed(f"it is {_preview(response)}")
        usage = _usage(response.usage_metadata)
        if usage is not None:
            reading.usage = usage
        candidates = response.candidates or []
        if not candidates:
            feedback = response.prompt_feedback
            if feedback is not None and feedback.block_reason is not None:
                # The prompt itself was blocked: no candidate, a reason.
                reading.finish = "content_filter"
                return [MessageChunk(role="assistant", content="", finish_reason="content_filter")]
            if usage is not None:  # a chunk that only reports usage
                return []
            self._malformed(f"it has no candidates: {_preview(_dump(response))}")
        candidate = candidates[0]
        pieces: list[MessageChunk] = []
        parts = candidate.content.parts if candidate.content is not None else None
        for part in parts or ():
            if part.thought:  # the model's thinking, when asked for: not part of the reply
                continue
            if part.function_call is not None:
                call = part.function_call
                if not call.name:
                    self._malformed(f"a function call has no name: {_preview(_dump(response))}")
                index = reading.calls
                reading.calls += 1
                args = call.args if call.args is not None else {}
                pieces.append(
                    MessageChunk(
                        role="assistant",
                        tool_calls=(
                            ToolCallChunk(
                                index=index,
                                id=call.id or reading.call_id(index, call.name, args),
                                name=call.name,
                                arguments=msgspec.json.encode(args).decode(),
                            ),
                        ),
                    )
                )
            elif part.text is not None:
                pieces.append(MessageChunk(role="assistant", content=part.text))
        raw = candidate.finish_reason
        if raw is not None:
            name = raw.value if isinstance(raw, types.FinishReason) else str(raw)
            finish = _FINISH_REASONS.get(name)
            if finish == "stop" and reading.calls:
                finish = "tool_calls"
            reading.finish = finish or "unknown"
            if finish is not None:
                pieces.append(MessageChunk(finish_reason=finish))
        return pieces

    # -- failures --------------------------------------------------------------------------

    async def _with_retries(self, attempt: Any) -> Any:
        """Run ``attempt`` (a coroutine function), trying again after a failure worth a retry,
        waiting as long as the server asks."""
        tries = 0
        while True:
            tries += 1
            wait: float | None = None
            try:
                with self._guard(tries):
                    return await attempt()
            except ModelError as exc:
                cause = exc.__cause__
                if tries > self._max_retries or not _worth_retrying(exc, cause):
                    raise
                asked = _retry_after(cause) if isinstance(cause, genai_errors.APIError) else None
                if asked is not None and asked > _MAX_WAIT:
                    raise
                wait = asked if asked is not None else min(_MAX_WAIT, 0.5 * 2 ** (tries - 1))
                wait *= 1 if asked is not None else 0.75 + random.random() / 2
            await anyio.sleep(wait)

    def _guard(self, tries: int = 1) -> _Guard:
        return _Guard(self, tries)

    def _malformed(self, detail: str, *, cause: BaseException | None = None) -> NoReturn:
        raise ModelError(
            f"{self._where} sent a reply that is not a Gemini response ({detail}); check that "
            "base_url points to a Gemini API (without the /v1beta part) and look at the "
            "server's logs",
            endpoint=self.endpoint,
        ) from cause

    def _status_error(self, exc: genai_errors.APIError, tries: int) -> ModelError:
        status = exc.code
        message = _preview(exc.message or str(exc.details))
        retried = f"tried {_times(tries)}"
        asked = _retry_after(exc)
        if status in (401, 403):
            advice = (
                "the API key was refused or may not use this model: check api_key= (or "
                "GEMINI_API_KEY)"
            )
        elif status == 404:
            advice = "check the model's name and base_url (the API's root, without /v1beta)"
        elif status in (400, 422):
            advice = (
                "the server refused the request: check the model's params and the tools' "
                "JSON Schemas"
            )
        elif status == 429:
            wait = f"; it asks to wait {asked:g}s" if asked is not None else ""
            advice = (
                f"the server is rate limiting or the quota is spent ({retried}{wait}): wait, "
                "send fewer requests, or raise max_retries"
            )
        elif status >= 500 or status == 408:
            wait = f"; it asks to wait {asked:g}s" if asked is not None else ""
            advice = f"the server failed ({retried}{wait}): check its status, then run again"
        else:
            advice = "check the server's logs"
        state = f" {exc.status}" if exc.status else ""
        return ModelError(
            f"{self._where} answered HTTP {status}{state}: {message}; {advice}",
            endpoint=self.endpoint,
            status=status,
        )


class _Guard:
    """Turns whatever the SDK raises into a `ModelError` that says what to check."""

    def __init__(self, model: GeminiChatModel, tries: int) -> None:
        self._model = model
        self._tries = tries

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None or isinstance(exc, ModelError) or not isinstance(exc, Exception):
            return  # cancellation and the like pass through
        model = self._model
        where, tries = model._where, self._tries
        if isinstance(exc, genai_errors.APIError):
            raise model._status_error(exc, tries) from exc
        if isinstance(exc, httpx2.TimeoutException | TimeoutError):
            raise ModelError(
                f"{where} did not answer in time (timeout {_seconds(model._timeout)}, tried "
                f"{_times(tries)}); the server may be overloaded: check it, or raise timeout=",
                endpoint=model.endpoint,
            ) from exc
        if isinstance(exc, httpx2.ConnectError):
            raise ModelError(
                f"could not reach {where} (tried {_times(tries)}): {exc}; check base_url and "
                "that the server is running",
                endpoint=model.endpoint,
            ) from exc
        if isinstance(exc, httpx2.TransportError):
            raise ModelError(
                f"the connection to {where} failed ({type(exc).__name__}: {exc}): a transport "
                "problem, not a malformed reply; check that the server is reachable, then run "
                "again",
                endpoint=model.endpoint,
            ) from exc
        if isinstance(exc, ValueError | TypeError | KeyError):
            # The SDK's own reading of the body failed: not JSON, not a response.
            model._malformed(f"{type(exc).__name__}: {_preview(str(exc))}", cause=exc)
        raise ModelError(
            f"{where} failed ({type(exc).__name__}: {exc}); check that the server is running "
            "and reachable, then run again",
            endpoint=model.endpoint,
        ) from exc


class _Reading:
    """What the chunks of one reply said so far."""

    def __init__(self, salt: str) -> None:
        self.salt = salt
        self.calls = 0
        self.finish: str | None = None
        self.usage: Usage | None = None

    def call_id(self, index: int, name: str, args: Mapping[str, Any]) -> str:
        """A call's id: the same for the same request and call, unique in a conversation."""
        text = f"{self.salt}/{index}/{name}/".encode() + msgspec.json.encode(args)
        return f"gemini_{hashlib.sha256(text).hexdigest()[:16]}"


# -- conversion ------------------------------------------------------------------------------


def to_gemini(messages: Sequence[Message]) -> tuple[str | None, list[types.Content]]:
    """The conversation as Gemini takes it: the system instruction, and the ``contents``.

    Raises:
        TypeError: An item is not a message.
    """
    system: list[str] = []
    contents: list[types.Content] = []
    calls: dict[str, ToolCall] = {}  # the open calls of the last assistant message, by id
    order: list[str] = []
    answers: dict[str, types.Part] = {}

    def flush() -> None:
        if answers:
            ranked = sorted(answers, key=lambda i: order.index(i) if i in order else len(order))
            contents.append(_content("user", [answers[i] for i in ranked]))
            answers.clear()

    for message in messages:
        if isinstance(message, ToolMessage):
            call = calls.get(message.tool_call_id)
            name = message.name or (call.name if call is not None else "") or "tool"
            key = "result" if message.status in ("ok", "responded") else "error"
            answers[message.tool_call_id] = _converted(
                message, name, partial(_result_parts, message, name, key)
            )[0]
            continue
        flush()
        if isinstance(message, SystemMessage):
            system.append(message.content)
        elif isinstance(message, UserMessage):
            contents.append(
                _content("user", _converted(message, "", partial(_text_parts, message)))
            )
        elif isinstance(message, AssistantMessage):
            parts = _converted(message, "", partial(_assistant_parts, message))
            calls = {call.id: call for call in message.tool_calls}
            order = [call.id for call in message.tool_calls]
            if parts:
                contents.append(_content("model", parts))
        else:
            raise TypeError(f"a conversation holds messages, not {type(message).__name__}")
    flush()
    return ("\n\n".join(system) if system else None), contents


_CONVERTED: dict[int, tuple[Message, str, list[types.Part]]] = {}
"""Message → its parts, by the message's identity: a conversation grows by a few messages a
turn, and the rest are the same (immutable) objects as at the turn before. The message is kept
with its parts, so an id is never taken for another object's."""
_CONVERTED_MOST: Final = 4096


def _converted(
    message: Message, name: str, convert: Callable[[], list[types.Part]]
) -> list[types.Part]:
    """The parts of ``message`` (a tool result's under the call's ``name``), converted once."""
    found = _CONVERTED.get(id(message))
    if found is not None and found[0] is message and found[1] == name:
        return found[2]
    parts = convert()
    if len(_CONVERTED) >= _CONVERTED_MOST:
        _CONVERTED.clear()
    _CONVERTED[id(message)] = (message, name, parts)
    return parts


def _text_parts(message: UserMessage) -> list[types.Part]:
    """A user's message as a part."""
    return [_part(text=message.content)]


def _result_parts(message: ToolMessage, name: str, key: str) -> list[types.Part]:
    """A tool's result (``key``: ``result`` or ``error``) as the response to call ``name``."""
    response = types.FunctionResponse.model_construct(name=name, response={key: message.content})
    return [_part(function_response=response)]


def _assistant_parts(message: AssistantMessage) -> list[types.Part]:
    """An assistant message's text and calls as parts."""
    parts = [_part(text=message.content)] if message.content else []
    parts.extend(
        _part(function_call=types.FunctionCall.model_construct(name=c.name, args=c.arguments))
        for c in message.tool_calls
    )
    return parts


def _part(**fields: Any) -> types.Part:
    """A part built from interlock's own typed messages, without the SDK's checks of each field
    (they cost more than the rest of a request; the messages were checked when made)."""
    return types.Part.model_construct(**fields)


def _content(role: str, parts: list[types.Part]) -> types.Content:
    """A turn of the conversation, built as `_part` builds its parts."""
    return types.Content.model_construct(role=role, parts=list(parts))


_KEPT = frozenset(
    {
        "description",
        "title",
        "nullable",
        "minimum",
        "maximum",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "minProperties",
        "maxProperties",
        "pattern",
        "default",
        "example",
        "propertyOrdering",
    }
)
"""JSON Schema keywords Gemini's schema takes as they are."""

_FORMATS = frozenset({"enum", "date-time", "int32", "int64", "float", "double"})
"""The ``format`` values Gemini accepts; others are dropped."""

_TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})


def gemini_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A tool's JSON Schema rewritten into the OpenAPI subset Gemini's function declarations take.

    Gemini refuses a declaration whose schema holds keywords outside its subset. So:
    ``$ref`` is replaced by the ``$defs`` (or ``definitions``) entry it names; ``type: [T,
    "null"]`` becomes ``type: T`` with ``nullable``; ``const`` becomes a one-value ``enum``;
    ``oneOf`` becomes ``anyOf``; an ``allOf`` of one schema becomes that schema; an ``enum``
    that is not all strings is dropped (its values are added to the description); ``format``
    is kept only when Gemini knows it; and every other keyword (``$schema``,
    ``additionalProperties``, ``patternProperties``, ``exclusiveMinimum``, ``multipleOf``,
    ``uniqueItems``, ``not``, ``if``...) is dropped. The tool still checks its arguments
    against its whole schema when it is called.

    Raises:
        ValueError: The schema refers to a definition it does not hold, or is recursive.
    """
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        found = schema.get(key)
        if isinstance(found, Mapping):
            defs.update({f"#/{key}/{name}": value for name, value in found.items()})
    return _rewrite(schema, defs, ())


def _rewrite(schema: Any, defs: Mapping[str, Any], seen: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(schema, Mapping):
        return {}  # `true`, or nonsense: any value
    ref = schema.get("$ref")
    if isinstance(ref, str):
        if ref in seen:
            raise ValueError(
                f"the tool's JSON Schema is recursive ({ref} refers to itself), which Gemini's "
                "function declarations cannot express: flatten it"
            )
        if ref not in defs:
            raise ValueError(f"the tool's JSON Schema refers to {ref}, which it does not define")
        merged = {**defs[ref], **{k: v for k, v in schema.items() if k != "$ref"}}
        return _rewrite(merged, defs, (*seen, ref))
    out: dict[str, Any] = {}
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) < len(kind):
            out["nullable"] = True
        kind = kinds[0] if len(kinds) == 1 else None
        if len(kinds) > 1:
            out["anyOf"] = [{"type": k.upper()} for k in kinds if k in _TYPES]
    if isinstance(kind, str) and kind in _TYPES:
        out["type"] = kind.upper()
    for key in _KEPT:
        if key in schema:
            out[key] = schema[key]
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt in _FORMATS:
        out["format"] = fmt
    values = schema.get("enum")
    if "const" in schema:
        values = [schema["const"]]
    if isinstance(values, list):
        if all(isinstance(v, str) for v in values):
            out["enum"] = values
        else:
            allowed = ", ".join(msgspec.json.encode(v).decode() for v in values)
            text = out.get("description")
            out["description"] = f"{text} (one of: {allowed})" if text else f"One of: {allowed}."
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        out["properties"] = {
            name: _rewrite(value, defs, seen) for name, value in properties.items()
        }
    required = schema.get("required")
    if isinstance(required, list):
        out["required"] = [r for r in required if isinstance(r, str)]
    items = schema.get("items")
    if isinstance(items, Mapping):
        out["items"] = _rewrite(items, defs, seen)
    alternatives = schema.get("anyOf", schema.get("oneOf"))
    if isinstance(alternatives, list):
        options = [_rewrite(option, defs, seen) for option in alternatives]
        nulls = [o for o in options if o == {"nullable": True}]  # a {"type": "null"}
        options = [o for o in options if o != {"nullable": True}]
        if nulls:
            out["nullable"] = True
        if len(options) == 1:
            out = {**options[0], **out}
        elif options:
            out["anyOf"] = options
    every = schema.get("allOf")
    if isinstance(every, list) and len(every) == 1:
        out = {**_rewrite(every[0], defs, seen), **out}
    if out.get("type") == "NULL":
        out.pop("type")
        out["nullable"] = True
    return out


# -- the answer's fields ---------------------------------------------------------------------

_FINISH_REASONS: Mapping[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
    "IMAGE_RECITATION": "content_filter",
}
"""Gemini's finish reasons as a message records them (``STOP`` with function calls is
``tool_calls``); the others (``OTHER``, ``LANGUAGE``, ``MALFORMED_FUNCTION_CALL``...) are not
recorded."""


def _usage(metadata: types.GenerateContentResponseUsageMetadata | None) -> Usage | None:
    """The tokens a response reports, or None when it reports none."""
    if metadata is None:
        return None
    counts = [
        metadata.prompt_token_count,
        metadata.candidates_token_count,
        metadata.thoughts_token_count,
        metadata.cached_content_token_count,
    ]
    if all(n is None for n in counts):
        return None
    prompt, written, thoughts, cached = (n if n is not None and n >= 0 else 0 for n in counts)
    return Usage(input_tokens=prompt, output_tokens=written + thoughts, cached_tokens=cached)


def _worth_retrying(exc: ModelError, cause: BaseException | None) -> bool:
    if exc.status is not None:
        return exc.status in _RETRIED
    return isinstance(cause, httpx2.TimeoutException | httpx2.TransportError | TimeoutError)


def _retry_after(exc: genai_errors.APIError) -> float | None:
    """How long the server asks to wait: ``Retry-After`` (seconds or a date), ``retry-after-ms``,
    or the ``RetryInfo`` detail of Gemini's error body (``"retryDelay": "13s"``)."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is not None:
        try:
            ms = headers.get("retry-after-ms")
            if ms is not None:
                return max(0.0, float(ms) / 1000)
            value = headers.get("retry-after")
            if value is not None:
                try:
                    return max(0.0, float(value))
                except ValueError:
                    when = parsedate_to_datetime(value)
                    now = datetime.datetime.now(when.tzinfo)
                    return max(0.0, (when - now).total_seconds())
        except (TypeError, ValueError):
            pass
    details = exc.details
    error = details.get("error") if isinstance(details, Mapping) else None
    items = error.get("details") if isinstance(error, Mapping) else None
    for item in items if isinstance(items, list) else ():
        if isinstance(item, Mapping) and str(item.get("@type", "")).endswith("RetryInfo"):
            delay = item.get("retryDelay")
            if isinstance(delay, str) and delay.endswith("s"):
                try:
                    return max(0.0, float(delay[:-1]))
                except ValueError:
                    return None
    return None


async def _close(chunks: Any) -> None:
    close = getattr(chunks, "aclose", None)
    if close is not None:
        with contextlib.suppress(Exception):  # the stream is given up: how it ends is no news
            await close()


async def _close_client(client: genai.Client) -> None:
    await client.aio.aclose()


def _dump(response: Any) -> object:
    try:
        return response.model_dump(exclude_none=True, mode="json", exclude={"sdk_http_response"})
    except Exception:
        return response


def _preview(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _seconds(timeout: float | None) -> str:
    return "the SDK's default" if timeout is None else f"{timeout:g}s"


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"
