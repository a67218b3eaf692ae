"""`AnthropicChatModel`: a Claude model behind Anthropic's Messages API.

The model sends the conversation and the tools on offer, and reads back one assistant message;
it talks through the official ``anthropic`` SDK (``pip install 'interlock[anthropic]'``), whose
client does the retries (429, 529 overloaded, 5xx, connection errors, honouring
``retry-after``) and the timeouts.

interlock keeps a conversation in its own message types, and the model turns them into the
Messages API's shape on every call (so a thread may switch provider between turns):

- the `SystemMessage` s become the request's ``system`` prompt (in their order, wherever they
  stand in the conversation: the API takes no system message among the turns);
- an `AssistantMessage` becomes an ``assistant`` turn of a ``text`` block and one ``tool_use``
  block per call (arguments that were not a JSON object are sent as ``{}``: the API takes an
  object only, and the tool's answer already told the model its arguments were wrong);
- a `ToolMessage` becomes a ``tool_result`` block (``is_error`` unless the call went through),
  and consecutive tool results, with any user text after them, are merged into one ``user``
  turn, as the API requires;
- a `UserMessage` becomes a ``user`` turn (its ``name`` has no place in the API and is left out).

Every failure reaches the caller as one `ModelError` that names the endpoint and the model,
carries the HTTP status when there was one, and says what to check.

As `OpenAIChatModel` does, the model builds an ``anthropic.AsyncAnthropic`` client for each
event loop it is used in and closes it as that loop ends, so ``app.run_sync(...)`` then
``app.resume_sync(...)``, each in a loop of its own, share one model.

Examples:
    Claude, with the key in ``ANTHROPIC_API_KEY``::

        model = AnthropicChatModel("claude-sonnet-4-5", max_tokens=2048, temperature=0)

    The model owns the HTTP client it builds: close it when done, or use it as a context::

        async with AnthropicChatModel("claude-haiku-4-5") as model:
            reply = await model.generate([UserMessage(content="Hello")], [])
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, NoReturn, Self, TypeGuard

import anyio
import msgspec

from .._errors import ModelError
from ..graph import MessageChunk, ToolCallChunk, Usage
from ._clients import LoopClients, closed_error, elsewhere_error
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
    import anthropic
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "AnthropicChatModel needs the anthropic package: pip install 'interlock[anthropic]'"
    ) from exc

__all__ = ["AnthropicChatModel", "to_anthropic"]

DEFAULT_MAX_TOKENS = 4096
"""The ``max_tokens`` sent when none is given (the API requires one)."""

_NO_KEY = "not-needed"
"""The API key sent to a server that takes none: the SDK insists on one."""

_RESERVED = frozenset({"model", "messages", "tools", "stream", "system", "max_tokens"})
"""Request fields the model sets itself; they cannot be passed as parameters."""


class AnthropicChatModel:
    """A Claude model served by Anthropic's Messages API (or a server that speaks it).

    Args:
        model: The model's name (``"claude-sonnet-4-5"``, ``"claude-haiku-4-5"``...).
        max_tokens: The most tokens a reply may have (the API requires a limit); a reply that
            reaches it ends with ``finish_reason="length"``.
        base_url: The API's base URL, without ``/v1``. Defaults to ``ANTHROPIC_BASE_URL``, then
            to Anthropic's API.
        api_key: The key sent in ``x-api-key``. Defaults to ``ANTHROPIC_API_KEY``; when there
            is none and the endpoint is not Anthropic's (``base_url`` or
            ``ANTHROPIC_BASE_URL`` is set), a placeholder is sent.
        client: A configured ``anthropic.AsyncAnthropic`` to use as it is, instead of building
            one. Its base URL, key, timeout and retries are its own, so ``base_url``,
            ``api_key``, ``timeout`` and ``max_retries`` cannot be passed with it; the model
            does not close it, and uses it only in the event loop it was first used in.
        timeout: Seconds to wait for the endpoint; None for the SDK's default (ten minutes).
        max_retries: How many times the client retries a request that failed with 408, 409,
            429, 529 (overloaded), another 5xx status, a timeout or a lost connection; None for
            the SDK's default (2).
        stream: Whether `generate` streams the reply and joins it (a stream keeps a long reply
            from timing out). `stream` always streams.
        **params: Extra request fields, sent as they are (``temperature=0``,
            ``stop_sequences=[...]``, ``tool_choice={"type": "any"}``, ``metadata=...``).

    Raises:
        TypeError: An argument has the wrong type.
        ValueError: An argument has a wrong value (an empty model name, a negative timeout or
            ``max_tokens``, a parameter the model sets itself).
        ModelError: No client can be built: no API key for Anthropic's API.
    """

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        base_url: str | None = None,
        api_key: str | None = None,
        client: anthropic.AsyncAnthropic | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        stream: bool = False,
        **params: Any,
    ) -> None:
        check_endpoint(
            model,
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            stream=stream,
            examples=("'claude-sonnet-4-5'", "https://api.anthropic.com"),
        )
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise TypeError(f"max_tokens must be an int, not {max_tokens!r}")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be 1 or more, not {max_tokens}")
        reserved = sorted(_RESERVED.intersection(params))
        if reserved:
            raise ValueError(
                f"{', '.join(reserved)} cannot be passed as request parameters: the model sets "
                "them from its name, max_tokens=, the conversation, the tools and its stream "
                "setting"
            )

        if client is not None:
            if not isinstance(client, anthropic.AsyncAnthropic):
                raise TypeError(
                    f"client must be an anthropic.AsyncAnthropic, not {type(client).__name__}"
                )
            given = [
                name
                for name, value in (
                    ("base_url", base_url),
                    ("api_key", api_key),
                    ("timeout", timeout),
                    ("max_retries", max_retries),
                )
                if value is not None
            ]
            if given:
                raise ValueError(
                    f"{', '.join(given)} cannot be passed with client=: configure the client "
                    "with them, or leave client out and the model builds one"
                )
            self._client = client
            self._clients = LoopClients.given(
                client,
                is_closed=anthropic.AsyncAnthropic.is_closed,
                closed_error=self._closed_error,
                elsewhere_error=self._elsewhere_error,
            )
        else:
            # Built now, so that a missing key fails here; the first loop to ask takes it.
            self._client = self._build_client(model, base_url, api_key, timeout, max_retries)
            self._clients = LoopClients.owned(
                functools.partial(
                    self._build_client, model, base_url, api_key, timeout, max_retries
                ),
                anthropic.AsyncAnthropic.close,
                closed_error=self._closed_error,
                first=self._client,
            )
        # `_client` is where the settings are read; `_clients` gives the client to ask (one per
        # event loop, as OpenAIChatModel does).
        self._model = model
        self._max_tokens = max_tokens
        self._stream = stream
        self._params = dict(params)

    @staticmethod
    def _build_client(
        model: str,
        base_url: str | None,
        api_key: str | None,
        timeout: float | None,
        max_retries: int | None,
    ) -> anthropic.AsyncAnthropic:
        url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        key = api_key or os.environ.get("ANTHROPIC_API_KEY") or None
        token = os.environ.get("ANTHROPIC_AUTH_TOKEN") or None
        endpoint = url or "https://api.anthropic.com"
        if key is None and token is None:
            if url is None:
                raise ModelError(
                    f"cannot set up model {model!r} at {endpoint}: no API key. Pass api_key= "
                    "or set ANTHROPIC_API_KEY; for a server that takes no key, pass its base_url",
                    endpoint=endpoint,
                )
            key = _NO_KEY
        try:
            return anthropic.AsyncAnthropic(
                api_key=key,
                base_url=url,
                timeout=anthropic.NOT_GIVEN if timeout is None else timeout,
                max_retries=anthropic.DEFAULT_MAX_RETRIES if max_retries is None else max_retries,
            )
        except anthropic.AnthropicError as exc:  # pragma: no cover - the SDK checks little here
            raise ModelError(
                f"cannot set up model {model!r} at {endpoint}: {exc}", endpoint=endpoint
            ) from exc

    # -- what it is ------------------------------------------------------------------------

    @property
    def model(self) -> str:
        """The model's name on the endpoint."""
        return self._model

    @property
    def max_tokens(self) -> int:
        """The most tokens a reply may have."""
        return self._max_tokens

    @property
    def endpoint(self) -> str:
        """The endpoint's base URL (how errors name it)."""
        return str(self._client.base_url).rstrip("/")

    @property
    def params(self) -> Mapping[str, Any]:
        """The extra request fields sent with every request."""
        return dict(self._params)

    def __repr__(self) -> str:
        mode = " streaming" if self._stream else ""
        closed = " closed" if self._clients.closed else ""
        return f"<AnthropicChatModel {self._model!r} at {self.endpoint}{mode}{closed}>"

    # -- lifetime --------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the HTTP clients the model built (a client passed in is left open).

        The clients of other event loops that still run are closed as those loops end.
        """
        await self._clients.aclose()

    def _closed_error(self) -> ModelError:
        return closed_error(self, self._where, self.endpoint)

    def _elsewhere_error(self) -> ModelError:
        return elsewhere_error("anthropic.AsyncAnthropic", self._where, self.endpoint)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- the protocol ----------------------------------------------------------------------

    async def generate(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantMessage:
        """Return the model's reply to the conversation, given the tools it may call.

        With ``stream=True`` the reply is streamed and its chunks joined.

        Raises:
            ModelError: The endpoint failed, could not be reached, or answered something that
                is not a message.
        """
        if self._stream:
            return message_from_chunks([chunk async for chunk in self.stream(messages, tools)])
        request = self._request(messages, tools)
        client = await self._clients.here()
        with self._guard():
            reply = await client.messages.create(**request)
        return self._reply(reply)

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AsyncGenerator[MessageChunk, None]:
        """Yield the reply as the endpoint writes it; the chunks join into one message.

        Close the generator (``aclose()``, or ``contextlib.aclosing``) to stop reading early:
        the connection is given back at once.

        Raises:
            ModelError: As `generate`, and when the stream breaks off before the reply is
                finished or carries something that is not a stream event.
        """
        request = self._request(messages, tools)
        client = await self._clients.here()
        with self._guard():
            events = await client.messages.create(**request, stream=True)
        reading = _StreamReading()
        try:
            while True:
                with self._guard():
                    item = await anext(events, None)
                if item is None:
                    break
                piece = self._event(item, reading)
                if piece is not None:
                    yield piece
        finally:
            with anyio.CancelScope(shield=True), self._guard():
                await events.close()
        if not reading.finished:
            raise ModelError(
                f"{self._where} ended its stream before the reply was finished (no "
                "message_delta gave a stop_reason); the server may have crashed or dropped the "
                "connection: check its logs",
                endpoint=self.endpoint,
            )

    # -- the request -----------------------------------------------------------------------

    def _request(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> dict[str, Any]:
        """The keyword arguments of ``messages.create`` for this conversation and tools."""
        system, turns = to_anthropic(messages)
        for spec in tools:
            if not isinstance(spec, ToolSpec):
                raise TypeError(f"tools must be ToolSpec objects, not {type(spec).__name__}")
        request: dict[str, Any] = {
            "model": self._model,
            "max_tokens": self._max_tokens,
            "messages": turns,
        }
        if system:
            request["system"] = system
        if tools:
            request["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in tools
            ]
        if self._params:
            request["extra_body"] = self._params
        return request

    @property
    def _where(self) -> str:
        return f"model {self._model!r} at {self.endpoint}"

    # -- the answer ------------------------------------------------------------------------

    def _reply(self, reply: object) -> AssistantMessage:
        """Read the assistant message of a non-streamed reply, checking each field."""
        data = _plain(reply)
        if not isinstance(data, Mapping):
            self._malformed(f"the body is not a JSON object but {_preview(data)}")
        if data.get("type") == "error" or "content" not in data:
            problem = data.get("error")
            if isinstance(problem, Mapping) and isinstance(problem.get("message"), str):
                self._malformed(f"it reports an error instead: {_preview(problem['message'])}")
            self._malformed(f"it has no content: {_preview(data)}")
        role = data.get("role") or "assistant"
        if role != "assistant":
            self._malformed(f"its role is {role!r}, not 'assistant'")
        blocks = data.get("content")
        if not isinstance(blocks, list):
            self._malformed(f"its content is not a list of blocks: {_preview(blocks)}")
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in blocks:
            if not isinstance(block, Mapping):
                self._malformed(f"a content block is not an object: {_preview(block)}")
            kind = block.get("type")
            if kind == "text":
                text = block.get("text")
                if not isinstance(text, str):
                    self._malformed(f"a text block has no text: {_preview(block)}")
                texts.append(text)
            elif kind == "tool_use":
                call_id, name, arguments = block.get("id"), block.get("name"), block.get("input")
                if not isinstance(name, str) or not name or not _optional_str(call_id):
                    self._malformed(f"a tool_use block has no name: {_preview(block)}")
                if isinstance(arguments, Mapping):
                    calls.append(
                        ToolCall(
                            id=call_id or f"call_{len(calls)}", name=name, arguments=dict(arguments)
                        )
                    )
                else:  # not an object: kept raw, so the call fails with a message to the model
                    raw = arguments if isinstance(arguments, str) else _json(arguments)
                    calls.append(
                        ToolCall(id=call_id or f"call_{len(calls)}", name=name, raw_arguments=raw)
                    )
            # Other blocks (thinking, server tools' uses and results) are not part of the
            # conversation interlock keeps.
        return AssistantMessage(
            content="".join(texts) if texts or not calls else None,
            tool_calls=tuple(calls),
            finish_reason=_finish_reason(data.get("stop_reason")),
            usage=_usage(data.get("usage")),
        )

    def _event(self, item: object, reading: _StreamReading) -> MessageChunk | None:
        """Read one stream event: its piece of the message, or None if it carries none."""
        data = _plain(item)
        if not isinstance(data, Mapping) or not isinstance(data.get("type"), str):
            self._malformed_event(data)
        kind = data["type"]
        if kind == "message_start":
            message = data.get("message")
            if not isinstance(message, Mapping):
                self._malformed_event(data)
            reading.usage = _merge_usage(reading.usage, message.get("usage"))
            return MessageChunk(role="assistant")
        if kind == "content_block_start":
            index, block = data.get("index"), data.get("content_block")
            if not _is_int(index) or not isinstance(block, Mapping):
                self._malformed_event(data)
            if block.get("type") == "tool_use":
                call_id, name = block.get("id"), block.get("name")
                if not _optional_str(call_id, name):
                    self._malformed_event(data)
                position = reading.calls[index] = len(reading.calls)
                return MessageChunk(
                    tool_calls=(ToolCallChunk(index=position, id=call_id, name=name),)
                )
            if block.get("type") == "text":
                text = block.get("text") or ""
                if not isinstance(text, str):
                    self._malformed_event(data)
                return MessageChunk(content=text) if text else None
            return None
        if kind == "content_block_delta":
            index, delta = data.get("index"), data.get("delta")
            if not _is_int(index) or not isinstance(delta, Mapping):
                self._malformed_event(data)
            if delta.get("type") == "text_delta":
                text = delta.get("text")
                if not isinstance(text, str):
                    self._malformed_event(data)
                return MessageChunk(content=text)
            if delta.get("type") == "input_json_delta":
                partial = delta.get("partial_json")
                call = reading.calls.get(index)
                if not isinstance(partial, str) or call is None:
                    self._malformed_event(data)
                return MessageChunk(tool_calls=(ToolCallChunk(index=call, arguments=partial),))
            return None  # thinking, signatures, citations
        if kind == "message_delta":
            delta = data.get("delta")
            if not isinstance(delta, Mapping):
                self._malformed_event(data)
            reading.usage = _merge_usage(reading.usage, data.get("usage"))
            stop = delta.get("stop_reason")
            if stop is not None:
                reading.finished = True
            return MessageChunk(finish_reason=_finish_reason(stop), usage=_total(reading.usage))
        if kind == "message_stop":
            reading.finished = True
            return None
        if kind == "error":
            problem = data.get("error")
            detail = problem.get("message") if isinstance(problem, Mapping) else None
            raise ModelError(
                f"{self._where} reported an error in its stream: {_preview(detail or data)}; "
                "check the server's logs",
                endpoint=self.endpoint,
            )
        return None  # ping, and events added to the API later

    # -- failures --------------------------------------------------------------------------

    def _malformed(self, detail: str, *, cause: BaseException | None = None) -> NoReturn:
        raise ModelError(
            f"{self._where} sent a reply that is not a Messages API message ({detail}); check "
            "that base_url points to an Anthropic-compatible API (without /v1) and look at the "
            "server's logs",
            endpoint=self.endpoint,
        ) from cause

    def _malformed_event(self, data: object) -> NoReturn:
        raise ModelError(
            f"{self._where} streamed something that is not a Messages API event "
            f"({_preview(data)}); check that base_url points to an Anthropic-compatible API and "
            "look at the server's logs",
            endpoint=self.endpoint,
        )

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Turn whatever the SDK raises into a `ModelError` that says what to check."""
        retries = self._client.max_retries
        try:
            yield
        except ModelError:
            raise
        except anthropic.APIStatusError as exc:
            raise self._status_error(exc, retries) from exc
        except anthropic.APITimeoutError as exc:
            raise ModelError(
                f"{self._where} did not answer in time (timeout {_seconds(self._client.timeout)}, "
                f"tried {_times(retries + 1)}); the server may be overloaded: check it, or "
                "raise timeout=",
                endpoint=self.endpoint,
            ) from exc
        except anthropic.APIConnectionError as exc:
            reason = f": {exc.__cause__}" if exc.__cause__ is not None else ""
            raise ModelError(
                f"could not reach {self._where} (tried {_times(retries + 1)}){reason}; check "
                "base_url and that the server is running",
                endpoint=self.endpoint,
            ) from exc
        except anthropic.APIResponseValidationError as exc:
            self._malformed(exc.message, cause=exc)
        except anthropic.APIError as exc:
            raise ModelError(
                f"{self._where} reported an error: {_server_message(exc)}; check the server's logs",
                endpoint=self.endpoint,
            ) from exc
        except anthropic.AnthropicError as exc:
            raise ModelError(f"{self._where} failed: {exc}", endpoint=self.endpoint) from exc
        except (ValueError, TypeError, KeyError) as exc:
            # The SDK's own reading of the body failed: invalid JSON, a broken event stream.
            self._malformed(f"{type(exc).__name__}: {exc}", cause=exc)
        except Exception as exc:
            raise ModelError(
                f"the connection to {self._where} failed ({type(exc).__name__}: {exc}): a "
                "transport problem, not a malformed reply; check that the server is running "
                "and reachable, then run again",
                endpoint=self.endpoint,
            ) from exc

    def _status_error(self, exc: anthropic.APIStatusError, retries: int) -> ModelError:
        status = exc.status_code
        if status == 401:
            advice = "the API key was refused: check api_key= (or ANTHROPIC_API_KEY)"
        elif status == 403:
            advice = "the API key may not use this model: check the key's permissions"
        elif status == 404:
            advice = "check base_url (without /v1) and the model's name"
        elif status in (400, 413, 422):
            advice = (
                "the API refused the request: check the model's params, max_tokens= and the "
                "tools offered"
            )
        elif status == 429:
            advice = (
                f"the API is rate limiting (still after {_retries(retries)}): wait, send "
                "fewer requests, or raise max_retries"
            )
        elif status == 529:
            advice = (
                f"the API is overloaded (still after {_retries(retries)}): try again later, "
                "or raise max_retries"
            )
        elif status >= 500 or status == 408:
            advice = f"the server failed (still after {_retries(retries)}): check its logs"
        else:
            advice = "check the server's logs"
        return ModelError(
            f"{self._where} answered HTTP {status}: {_server_message(exc)}; {advice}",
            endpoint=self.endpoint,
            status=status,
        )


class _StreamReading:
    """What a stream has said so far: its tool-use blocks, its usage, whether it finished."""

    __slots__ = ("calls", "finished", "usage")

    def __init__(self) -> None:
        self.calls: dict[int, int] = {}  # content block index -> tool call index
        self.usage: dict[str, int] = {}
        self.finished = False


# -- the conversation in the Messages API's shape --------------------------------------------


def to_anthropic(messages: Sequence[Message]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The conversation in the Messages API's shape: the ``system`` blocks and the turns.

    System messages become the system prompt; consecutive messages of one role (tool results
    and user text) are merged into one turn, tool results first, as the API requires.

    Raises:
        TypeError: An item is not a message.
    """
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for message in messages:
        if isinstance(message, SystemMessage):
            if message.content:
                system.append({"type": "text", "text": message.content})
        elif isinstance(message, UserMessage):
            add("user", [{"type": "text", "text": message.content}] if message.content else [])
        elif isinstance(message, ToolMessage):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.content,
            }
            if message.status != "ok":
                block["is_error"] = True
            add("user", [block])
        elif isinstance(message, AssistantMessage):
            blocks: list[dict[str, Any]] = []
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            blocks.extend(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": call.arguments if call.raw_arguments is None else {},
                }
                for call in message.tool_calls
            )
            add("assistant", blocks)
        else:
            raise TypeError(f"to_anthropic() takes messages, not {type(message).__name__}")
    for turn in turns:  # tool results must open a user turn
        if turn["role"] == "user":
            turn["content"].sort(key=lambda b: b["type"] != "tool_result")
    return system, turns


_STOP_REASONS: Mapping[object, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    # The API paused a long turn of its own server tools; interlock cannot continue that turn,
    # so the reply is unfinished: cut short, as a reply that reached max_tokens.
    "pause_turn": "length",
    "tool_use": "tool_calls",
    "refusal": "refusal",
}
"""The ``stop_reason`` values of the Messages API, as a message records them."""


def _finish_reason(raw: object) -> FinishReason | None:
    """Why a reply ended; a value outside the known set is not recorded."""
    return _STOP_REASONS.get(raw) if isinstance(raw, str) else None


_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def _merge_usage(known: dict[str, int], raw: object) -> dict[str, int]:
    """The usage seen so far, updated by an event's (the API's counts are cumulative)."""
    if not isinstance(raw, Mapping):
        return known
    merged = dict(known)
    for name in _COUNTS:
        value = raw.get(name)
        if _is_int(value) and value >= 0:
            merged[name] = value
    return merged


def _total(counts: Mapping[str, int]) -> Usage | None:
    """The counts as interlock's `Usage`: the input includes the tokens read from and written
    to the prompt cache (the API counts them apart), and ``cached_tokens`` those read."""
    if not counts:
        return None
    cached = counts.get("cache_read_input_tokens", 0)
    return Usage(
        input_tokens=counts.get("input_tokens", 0)
        + cached
        + counts.get("cache_creation_input_tokens", 0),
        output_tokens=counts.get("output_tokens", 0),
        cached_tokens=cached,
    )


def _usage(raw: object) -> Usage | None:
    """The tokens a reply reports (``usage``), or None when it reports none."""
    return _total(_merge_usage({}, raw))


def _plain(value: object) -> object:
    """An SDK object as the JSON it was built from (the SDK does not validate replies)."""
    if isinstance(value, anthropic.BaseModel):
        return value.to_dict(warnings=False)
    return value


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _optional_str(*values: object) -> bool:
    return all(v is None or isinstance(v, str) for v in values)


def _json(value: object) -> str:
    try:
        return msgspec.json.encode(value).decode()
    except (TypeError, msgspec.EncodeError):
        return repr(value)


def _preview(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _seconds(timeout: object) -> str:
    return f"{timeout:g}s" if isinstance(timeout, int | float) else str(timeout)


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _retries(n: int) -> str:
    return "1 retry" if n == 1 else f"{n} retries"


def _server_message(exc: anthropic.APIError) -> str:
    """What the server said, from its error body when it has the Anthropic shape."""
    body = exc.body
    if isinstance(body, Mapping):
        inner = body.get("error")
        if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
            return _preview(inner["message"])
        if isinstance(body.get("message"), str):
            return _preview(body["message"])
    return _preview(exc.message)
