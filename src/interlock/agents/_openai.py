"""`OpenAIChatModel`: a chat model behind any OpenAI-compatible endpoint.

OpenAI itself, and the servers that speak its chat-completions API: vLLM, Ollama, llama.cpp's
``llama-server``, LiteLLM, and the hosted providers that copy it. The model sends the
conversation and the tools on offer, and reads back one assistant message; it talks through
the official ``openai`` SDK (``pip install 'interlock[openai]'``), whose client does the
retries (429, 5xx, connection errors, honouring ``retry-after``) and the timeouts.

Every failure of the endpoint reaches the caller as one `ModelError` that names the endpoint
and the model, carries the HTTP status when there was one, and says what to check: an error
status (once the retries are spent), a refused connection, a timeout, a body that is not a
chat completion, a stream that breaks off or carries garbage.

An ``openai.AsyncOpenAI`` client belongs to the event loop it is used in (its pooled
connections do), and the SDK asks for it to be closed before its loop ends. So the model
builds a client for each event loop it is used in, and closes it as that loop ends
(``asyncio.run``, ``anyio.run`` and ``trio.run`` finalize the async generators still open when
their main task returns; the model keeps one open per loop for that): ``app.run_sync(...)``
then ``app.resume_sync(...)``, each in a loop of its own, share one model.

Under trio, the SDK leaves the async generators of a finished stream to the garbage
collector; trio closes them and reports a ``ResourceWarning`` (seen only when such warnings
are shown).

Examples:
    OpenAI, with the key in ``OPENAI_API_KEY``::

        model = OpenAIChatModel("gpt-4o-mini", temperature=0)

    A local Ollama or vLLM server (no key needed; any extra keyword is a request parameter)::

        model = OpenAIChatModel("llama3.1", base_url="http://localhost:11434/v1")
        model = OpenAIChatModel(
            "Qwen/Qwen2.5-7B-Instruct", base_url="http://gpu-box:8000/v1", stream=True, top_k=20
        )

    The model owns the HTTP client it builds: close it when done, or use it as a context::

        async with OpenAIChatModel("llama3.1", base_url="http://localhost:11434/v1") as model:
            reply = await model.generate([UserMessage(content="Hello")], [])
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, NoReturn, Self

import anyio
import msgspec

from .._errors import ModelError
from ..graph import MessageChunk, ToolCallChunk, Usage
from ._clients import LoopClients, closed_error, elsewhere_error
from ._messages import (
    AssistantMessage,
    FinishReason,
    Message,
    from_openai,
    message_from_chunks,
    to_openai,
)
from ._models import ToolSpec, check_endpoint

try:
    import openai
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "OpenAIChatModel needs the openai package: pip install 'interlock[openai]'"
    ) from exc

__all__ = ["OpenAIChatModel"]

_NO_KEY = "not-needed"
"""The API key sent to a server that takes none: the SDK insists on one."""

_RESERVED = frozenset({"model", "messages", "tools", "stream", "stream_options"})
"""Request fields the model sets itself; they cannot be passed as parameters."""


class OpenAIChatModel:
    """A chat model served by an OpenAI-compatible endpoint.

    Args:
        model: The model's name on the endpoint (``"gpt-4o-mini"``, ``"llama3.1"``...).
        base_url: The API's base URL, usually ending in ``/v1``
            (``http://localhost:11434/v1`` for Ollama). Defaults to ``OPENAI_BASE_URL``, then
            to OpenAI's API.
        api_key: The key sent as a bearer token. Defaults to ``OPENAI_API_KEY``; when there is
            none and the endpoint is not OpenAI's (``base_url`` or ``OPENAI_BASE_URL`` is
            set), a placeholder is sent, for local servers that take no key.
        client: A configured ``openai.AsyncOpenAI`` to use as it is, instead of building one.
            Its base URL, key, timeout and retries are its own, so ``base_url``, ``api_key``,
            ``timeout`` and ``max_retries`` cannot be passed with it; the model does not close
            it. Like any ``AsyncOpenAI``, it works in the event loop it is first used in: the
            model refuses to use it in another (build the model in each loop then, or leave
            ``client`` out and the model builds a client per loop).
        timeout: Seconds to wait for the endpoint (to connect, and between bytes of the
            reply); None for the SDK's default (ten minutes).
        max_retries: How many times the client retries a request that failed with 408, 409,
            429, a 5xx status, a timeout or a lost connection, before giving up; None for the
            SDK's default (2).
        stream: Whether `generate` streams the reply and joins it (some servers answer tool
            calls only when streaming, and a stream keeps a slow reply from timing out).
            `stream` always streams.
        stream_usage: Whether a streamed request asks for the tokens used
            (``stream_options={"include_usage": True}``), which the endpoint reports in a
            last chunk, and the stream yields as a `MessageChunk` with ``usage``. Some
            OpenAI-compatible servers refuse ``stream_options``: pass False for them (their
            streamed replies then carry no usage).
        **params: Extra request fields, sent as they are (``temperature=0``,
            ``max_tokens=512``, ``tool_choice="auto"``, or a server's own such as vLLM's
            ``top_k``).

    Raises:
        TypeError: An argument has the wrong type.
        ValueError: An argument has a wrong value (an empty model name, a negative
            timeout, a parameter the model sets itself).
        ModelError: No client can be built: no API key for OpenAI's API.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        stream: bool = False,
        stream_usage: bool = True,
        **params: Any,
    ) -> None:
        check_endpoint(
            model,
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            stream=stream,
            examples=("'gpt-4o-mini' or 'llama3.1'", "http://localhost:11434/v1"),
        )
        if not isinstance(stream_usage, bool):
            raise TypeError(f"stream_usage must be True or False, not {stream_usage!r}")
        reserved = sorted(_RESERVED.intersection(params))
        if reserved:
            raise ValueError(
                f"{', '.join(reserved)} cannot be passed as request parameters: the model sets "
                "them from its name, the conversation, the tools and its stream and "
                "stream_usage settings"
            )

        if client is not None:
            if not isinstance(client, openai.AsyncOpenAI):
                raise TypeError(
                    f"client must be an openai.AsyncOpenAI, not {type(client).__name__}"
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
                is_closed=openai.AsyncOpenAI.is_closed,
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
                openai.AsyncOpenAI.close,
                closed_error=self._closed_error,
                first=self._client,
            )
        # `_client` is where the settings are read; `_clients` gives the client to ask.
        self._model = model
        self._stream = stream
        self._stream_usage = stream_usage
        # What a streamed request adds: the SDK's own argument for the usage report.
        self._stream_options: dict[str, Any] = (
            {"stream_options": {"include_usage": True}} if stream_usage else {}
        )
        self._params = dict(params)

    @staticmethod
    def _build_client(
        model: str,
        base_url: str | None,
        api_key: str | None,
        timeout: float | None,
        max_retries: int | None,
    ) -> openai.AsyncOpenAI:
        url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = api_key or os.environ.get("OPENAI_API_KEY") or (_NO_KEY if url else None)
        try:
            return openai.AsyncOpenAI(
                api_key=key,
                base_url=url,
                timeout=openai.NOT_GIVEN if timeout is None else timeout,
                max_retries=openai.DEFAULT_MAX_RETRIES if max_retries is None else max_retries,
            )
        except openai.OpenAIError as exc:
            endpoint = url or "https://api.openai.com/v1"
            raise ModelError(
                f"cannot set up model {model!r} at {endpoint}: {exc} For OpenAI, pass "
                "api_key= or set OPENAI_API_KEY; for a local server, pass its base_url "
                "(such as http://localhost:11434/v1)",
                endpoint=endpoint,
            ) from exc

    # -- what it is ------------------------------------------------------------------------

    @property
    def model(self) -> str:
        """The model's name on the endpoint."""
        return self._model

    @property
    def endpoint(self) -> str:
        """The endpoint's base URL (how errors name it)."""
        return str(self._client.base_url).rstrip("/")

    @property
    def params(self) -> Mapping[str, Any]:
        """The extra request fields sent with every request."""
        return dict(self._params)

    @property
    def stream_usage(self) -> bool:
        """Whether a streamed request asks for the tokens used."""
        return self._stream_usage

    def __repr__(self) -> str:
        mode = " streaming" if self._stream else ""
        closed = " closed" if self._clients.closed else ""
        return f"<OpenAIChatModel {self._model!r} at {self.endpoint}{mode}{closed}>"

    # -- lifetime --------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the HTTP clients the model built (a client passed in is left open).

        The clients of other event loops that still run are closed as those loops end.
        """
        await self._clients.aclose()

    def _closed_error(self) -> ModelError:
        return closed_error(self, self._where, self.endpoint)

    def _elsewhere_error(self) -> ModelError:
        return elsewhere_error("openai.AsyncOpenAI", self._where, self.endpoint)

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
                is not a chat completion.
        """
        if self._stream:
            return message_from_chunks([chunk async for chunk in self.stream(messages, tools)])
        wire, offered = self._request(messages, tools)
        client = await self._clients.here()
        with self._guard():
            completion = await client.chat.completions.create(
                model=self._model, messages=wire, extra_body=self._params, **offered
            )
        return self._reply(completion)

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AsyncGenerator[MessageChunk, None]:
        """Yield the reply as the endpoint writes it; the chunks join into one message.

        With ``stream_usage`` (the default), the last chunk carries the tokens the call used,
        as the endpoint reported them.

        Close the generator (``aclose()``, or ``contextlib.aclosing``) to stop reading early:
        the connection is given back at once.

        Raises:
            ModelError: As `generate`, and when the stream breaks off before the reply is
                finished or carries something that is not a chunk.
        """
        wire, offered = self._request(messages, tools)
        client = await self._clients.here()
        with self._guard():
            chunks = await client.chat.completions.create(
                model=self._model,
                messages=wire,
                stream=True,
                extra_body=self._params,
                **self._stream_options,
                **offered,
            )
        finished = refused = False
        usage: Usage | None = None
        try:
            while True:
                with self._guard():
                    item = await anext(chunks, None)
                if item is None:
                    break
                piece, done, refused, reported = self._chunk(item, refused)
                finished = finished or done
                if reported is not None:
                    usage = reported
                if piece is not None:
                    yield piece
        finally:
            # Shielded: a cancelled consumer must still give the connection back.
            with anyio.CancelScope(shield=True), self._guard():
                await chunks.close()
        if not finished:
            raise ModelError(
                f"{self._where} ended its stream before the reply was finished (no chunk "
                "gave a finish_reason); the server may have crashed or dropped the "
                "connection: check its logs",
                endpoint=self.endpoint,
            )
        if usage is not None:  # the last report counts (a server may send one on more chunks)
            yield MessageChunk(usage=usage)

    # -- the request -----------------------------------------------------------------------

    def _request(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> tuple[Any, dict[str, Any]]:
        """The messages in the wire shape, and the ``tools`` argument (omitted when empty)."""
        wire = [to_openai(m) for m in messages]
        for spec in tools:
            if not isinstance(spec, ToolSpec):
                raise TypeError(f"tools must be ToolSpec objects, not {type(spec).__name__}")
        offered: dict[str, Any] = {"tools": [t.to_openai() for t in tools]} if tools else {}
        return wire, offered

    @property
    def _where(self) -> str:
        return f"model {self._model!r} at {self.endpoint}"

    # -- the answer ------------------------------------------------------------------------

    def _reply(self, completion: object) -> AssistantMessage:
        """Read the assistant message of a non-streamed completion, checking each field."""
        data = _plain(completion)
        if not isinstance(data, Mapping):
            self._malformed(f"the body is not a JSON object but {_preview(data)}")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            problem = data.get("error")
            if isinstance(problem, Mapping) and isinstance(problem.get("message"), str):
                self._malformed(f"it reports an error instead: {_preview(problem['message'])}")
            self._malformed(f"it has no choices: {_preview(data)}")
        fields = choices[0].get("message")
        if not isinstance(fields, Mapping):
            self._malformed(f"its first choice has no message: {_preview(choices[0])}")
        fields = dict(fields)
        fields["role"] = fields.get("role") or "assistant"
        if fields["role"] != "assistant":
            self._malformed(f"its message has role {fields['role']!r}, not 'assistant'")
        refused = fields.get("content") is None and isinstance(fields.get("refusal"), str)
        if refused:
            fields["content"] = fields["refusal"]
        try:
            message = from_openai(fields)
        except (TypeError, ValueError) as exc:
            self._malformed(str(exc), cause=exc)
        assert isinstance(message, AssistantMessage)  # the role is checked above
        finish = _finish_reason(choices[0].get("finish_reason"), refused=refused)
        if finish is not None:
            message = msgspec.structs.replace(message, finish_reason=finish)
        usage = _usage(data.get("usage"))
        if usage is not None:
            message = msgspec.structs.replace(message, usage=usage)
        if any(not call.id for call in message.tool_calls):
            calls = tuple(
                call if call.id else msgspec.structs.replace(call, id=f"call_{i}")
                for i, call in enumerate(message.tool_calls)
            )
            message = msgspec.structs.replace(message, tool_calls=calls)
        return message

    def _chunk(
        self, item: object, refused: bool
    ) -> tuple[MessageChunk | None, bool, bool, Usage | None]:
        """Read one streamed chunk: its piece of the message (None if none), whether it
        finishes the reply, whether the reply is a refusal so far (``refused``: it was
        before this chunk), and the usage it reports (None if none)."""
        data = _plain(item)
        if not isinstance(data, Mapping) or not isinstance(data.get("choices"), list):
            self._malformed_chunk(data)
        usage = _usage(data.get("usage"))
        choice = next(
            (c for c in data["choices"] if isinstance(c, Mapping) and c.get("index", 0) == 0),
            None,
        )
        if choice is None:  # a chunk for another choice, or the closing usage report
            return None, False, refused, usage
        delta = choice.get("delta") or {}
        if not isinstance(delta, Mapping):
            self._malformed_chunk(data)
        role, content = delta.get("role"), delta.get("content")
        if content is None and isinstance(delta.get("refusal"), str):
            content, refused = delta["refusal"], True
        raw_calls = delta.get("tool_calls") or []
        if not _optional_str(role, content) or not isinstance(raw_calls, list):
            self._malformed_chunk(data)
        calls = []
        for position, raw in enumerate(raw_calls):
            if not isinstance(raw, Mapping):
                self._malformed_chunk(data)
            function = raw.get("function") or {}
            if not isinstance(function, Mapping):
                self._malformed_chunk(data)
            index = raw.get("index", position)
            call_id, name = raw.get("id"), function.get("name")
            arguments = function.get("arguments") or ""
            if (
                isinstance(index, bool)
                or not isinstance(index, int)
                or not _optional_str(call_id, name, arguments)
            ):
                self._malformed_chunk(data)
            calls.append(ToolCallChunk(index=index, id=call_id, name=name, arguments=arguments))
        raw_finish = choice.get("finish_reason")
        finished = raw_finish is not None
        finish = _finish_reason(raw_finish, refused=refused) if finished else None
        if role is None and content is None and not calls and finish is None:
            return None, finished, refused, usage
        piece = MessageChunk(
            role=role, content=content, tool_calls=tuple(calls), finish_reason=finish
        )
        return piece, finished, refused, usage

    # -- failures --------------------------------------------------------------------------

    def _malformed(self, detail: str, *, cause: BaseException | None = None) -> NoReturn:
        raise ModelError(
            f"{self._where} sent a reply that is not a chat completion ({detail}); check that "
            "base_url points to an OpenAI-compatible API (it usually ends in /v1) and look at "
            "the server's logs",
            endpoint=self.endpoint,
        ) from cause

    def _malformed_chunk(self, data: object) -> NoReturn:
        raise ModelError(
            f"{self._where} streamed something that is not a chat completion chunk "
            f"({_preview(data)}); check that base_url points to an OpenAI-compatible API and "
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
        except openai.APIStatusError as exc:
            raise self._status_error(exc, retries) from exc
        except openai.APITimeoutError as exc:
            raise ModelError(
                f"{self._where} did not answer in time (timeout {_seconds(self._client.timeout)}, "
                f"tried {_times(retries + 1)}); the server may be overloaded or still loading the "
                "model: check it, or raise timeout=",
                endpoint=self.endpoint,
            ) from exc
        except openai.APIConnectionError as exc:
            reason = f": {exc.__cause__}" if exc.__cause__ is not None else ""
            raise ModelError(
                f"could not reach {self._where} (tried {_times(retries + 1)}){reason}; check "
                "base_url and that the server is running",
                endpoint=self.endpoint,
            ) from exc
        except openai.APIResponseValidationError as exc:
            self._malformed(exc.message, cause=exc)
        except openai.APIError as exc:  # an error event in the middle of a stream
            raise ModelError(
                f"{self._where} reported an error: {_server_message(exc)}; check the server's logs",
                endpoint=self.endpoint,
            ) from exc
        except openai.OpenAIError as exc:
            raise ModelError(f"{self._where} failed: {exc}", endpoint=self.endpoint) from exc
        except (ValueError, TypeError, KeyError) as exc:
            # The SDK's own reading of the body failed: invalid JSON, a broken event stream.
            self._malformed(f"{type(exc).__name__}: {exc}", cause=exc)
        except Exception as exc:
            # Whatever else failed beneath the reply (the connection, the event loop, the
            # HTTP library) is no fault of the server's answer: never report it as one.
            raise ModelError(
                f"the connection to {self._where} failed ({type(exc).__name__}: {exc}): a "
                "transport problem, not a malformed reply; check that the server is running "
                "and reachable, then run again",
                endpoint=self.endpoint,
            ) from exc

    def _status_error(self, exc: openai.APIStatusError, retries: int) -> ModelError:
        status = exc.status_code
        if status == 401:
            advice = "the API key was refused: check api_key= (or OPENAI_API_KEY)"
        elif status == 403:
            advice = "the API key may not use this model: check the key's permissions"
        elif status == 404:
            advice = "check base_url (it usually ends in /v1) and that the server serves this model"
        elif status in (400, 422):
            advice = (
                "the server refused the request: check the model's params and that the model "
                "supports the tools offered"
            )
        elif status == 429:
            advice = (
                f"the server is rate limiting (still after {_retries(retries)}): wait, send "
                "fewer requests, or raise max_retries"
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


_FINISH_REASONS: Mapping[object, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
    "function_call": "tool_calls",  # the deprecated single-function form
}
"""The ``finish_reason`` values of the chat-completions API, as a message records them."""


def _usage(raw: object) -> Usage | None:
    """The tokens a completion reports (``usage``), or None when it reports none."""
    if not isinstance(raw, Mapping):
        return None
    details = raw.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    counts = [raw.get("prompt_tokens"), raw.get("completion_tokens"), cached]
    if not any(isinstance(n, int) and not isinstance(n, bool) for n in counts):
        return None
    whole = [n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else 0 for n in counts]
    return Usage(input_tokens=whole[0], output_tokens=whole[1], cached_tokens=whole[2])


def _finish_reason(raw: object, *, refused: bool) -> FinishReason | None:
    """Why a reply ended; a refusal (the model's ``refusal`` text) is one, whatever the finish
    reason; a value outside the API's set (some servers' own) is not recorded."""
    if refused:
        return "refusal"
    return _FINISH_REASONS.get(raw) if isinstance(raw, str) else None


def _plain(value: object) -> object:
    """An SDK object as the JSON it was built from (the SDK does not validate replies)."""
    if isinstance(value, openai.BaseModel):
        return value.to_dict(warnings=False)
    return value


def _optional_str(*values: object) -> bool:
    return all(v is None or isinstance(v, str) for v in values)


def _preview(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _seconds(timeout: object) -> str:
    return f"{timeout:g}s" if isinstance(timeout, int | float) else str(timeout)


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _retries(n: int) -> str:
    return "1 retry" if n == 1 else f"{n} retries"


def _server_message(exc: openai.APIError) -> str:
    """What the server said, from its error body when it has the OpenAI shape."""
    body = exc.body
    if isinstance(body, Mapping) and isinstance(body.get("message"), str):
        return _preview(body["message"])
    return _preview(exc.message)
