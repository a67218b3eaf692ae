"""Chat models: the protocol an agent calls, and `ScriptedModel`, a deterministic one.

A model takes the conversation and the tools on offer and returns one assistant message
(`ChatModel.generate`), or streams it as `MessageChunk`s (`ChatModel.stream`). Any object with
these two methods is a model; `OpenAIChatModel` (the ``openai`` extra) talks to any
OpenAI-compatible endpoint, and `ScriptedModel` plays a script, for tests, examples and the demo.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, runtime_checkable

import msgspec

from .._errors import ModelError
from ..graph import MessageChunk, ToolCallChunk
from ._messages import AssistantMessage, Message, ToolCall

__all__ = [
    "ChatModel",
    "ModelRequest",
    "Reply",
    "ScriptedModel",
    "ToolSpec",
    "call",
    "check_endpoint",
]


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A tool as a model is offered it: a name, what it does, and its arguments' JSON Schema."""

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON Schema (Draft 2020-12) of the arguments object."""

    def to_openai(self) -> dict[str, Any]:
        """The tool in the OpenAI ``tools=[...]`` shape."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@runtime_checkable
class ChatModel(Protocol):
    """What an agent needs of a model."""

    async def generate(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantMessage:
        """Return the model's reply to the conversation, given the tools it may call.

        Raises:
            ModelError: The model cannot reply (its endpoint failed, or answered nonsense).
        """
        ...

    def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AsyncIterator[MessageChunk]:
        """Yield the reply as it is written; the chunks join into what `generate` returns."""
        ...


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One request a `ScriptedModel` received."""

    messages: tuple[Message, ...]
    """The conversation it was shown."""
    tools: tuple[ToolSpec, ...]
    """The tools it was offered."""

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The names of the tools offered."""
        return tuple(t.name for t in self.tools)


def call(
    name: str, arguments: Mapping[str, Any] | None = None, /, *, id: str | None = None
) -> ToolCall:
    """A tool call for a script: ``call("execute", {"command": "ls"})``.

    Without ``id``, the model numbers the calls of each reply (``call_<turn>_<n>``, or
    ``call_<name>_<turn>_<n>`` for a model with a name).
    """
    if not isinstance(name, str) or not name:
        raise ValueError("call() needs the tool's name")
    return ToolCall(id=id or "", name=name, arguments=dict(arguments or {}))


Reply: TypeAlias = str | ToolCall | Sequence[ToolCall] | AssistantMessage
"""One scripted reply: text, one tool call, several (parallel) calls, or a whole message."""

Script: TypeAlias = Sequence[Reply] | Callable[[Sequence[Message], Sequence[ToolSpec]], Reply]


class ScriptedModel:
    """A model that plays a script: the same conversation always gets the same reply.

    Args:
        script: A list of replies, or a function ``fn(messages, tools) -> reply``. A reply is
            a string (the answer), `call(...)` (a tool call), a list of calls (parallel calls)
            or an `AssistantMessage`.
        name: The name it writes on its replies. A list script plays the reply whose position
            is the number of replies already in the conversation under this name, so a
            conversation resumed in another process (with a new model object) continues the
            script where it stopped. In a conversation shared by several scripted agents, give
            each its own name (the agent's name is a good one).
        chunk_size: How many characters each streamed chunk carries.

    Every request is kept in `requests`, to count and inspect the model's calls.

    Examples:
        >>> model = ScriptedModel([call("search", {"q": "weather"}), "It is sunny."])
    """

    def __init__(self, script: Script, *, name: str | None = None, chunk_size: int = 8) -> None:
        if not callable(script) and (
            isinstance(script, str | bytes) or not isinstance(script, Sequence)
        ):
            raise TypeError(
                "script must be a list of replies or a function fn(messages, tools) -> reply, "
                f"not {type(script).__name__}"
            )
        if name is not None and (not isinstance(name, str) or not name):
            raise ValueError("name must be a non-empty string or None")
        if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive int, not {chunk_size!r}")
        self._script = script
        self.name = name
        self.chunk_size = chunk_size
        self.requests: list[ModelRequest] = []

    def __repr__(self) -> str:
        kind = "function" if callable(self._script) else f"{len(self._script)} replies"
        return f"<ScriptedModel {self.name or ''} {kind}, {len(self.requests)} requests>"

    @property
    def endpoint(self) -> str:
        """How errors name this model."""
        return f"scripted:{self.name or 'model'}"

    async def generate(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantMessage:
        """Return the scripted reply to this conversation (see the class)."""
        self.requests.append(ModelRequest(tuple(messages), tuple(tools)))
        turn = sum(
            1
            for m in messages
            if isinstance(m, AssistantMessage) and (self.name is None or m.name == self.name)
        )
        if callable(self._script):
            try:
                reply = self._script(messages, tools)
            except ModelError:
                raise
            except Exception as exc:
                raise ModelError(
                    f"the script of {self.endpoint} raised {type(exc).__name__}: {exc}",
                    endpoint=self.endpoint,
                ) from exc
        else:
            if turn >= len(self._script):
                raise ModelError(
                    f"{self.endpoint} has no reply left: its script has {len(self._script)} "
                    f"replies and the conversation already holds {turn}; add replies to the "
                    "script",
                    endpoint=self.endpoint,
                )
            reply = self._script[turn]
        return self._message(reply, turn)

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AsyncIterator[MessageChunk]:
        """Stream the scripted reply in pieces of ``chunk_size`` characters."""
        message = await self.generate(messages, tools)
        size = self.chunk_size
        first = True
        text = message.content or ""
        for i in range(0, len(text), size):
            yield MessageChunk(role="assistant" if first else None, content=text[i : i + size])
            first = False
        for index, tc in enumerate(message.tool_calls):
            args = msgspec.json.encode(tc.arguments).decode()
            pieces = [args[i : i + size] for i in range(0, len(args), size)] or [""]
            for n, piece in enumerate(pieces):
                head = n == 0
                yield MessageChunk(
                    role="assistant" if first else None,
                    tool_calls=(
                        ToolCallChunk(
                            index=index,
                            id=tc.id if head else None,
                            name=tc.name if head else None,
                            arguments=piece,
                        ),
                    ),
                )
                first = False
        if first:
            yield MessageChunk(role="assistant", content="", finish_reason=message.finish_reason)
        elif message.finish_reason is not None:  # why it ended: on a last chunk, as OpenAI's
            yield MessageChunk(finish_reason=message.finish_reason)

    def _message(self, reply: Reply, turn: int) -> AssistantMessage:
        if isinstance(reply, AssistantMessage):
            message = reply
        elif isinstance(reply, str):
            message = AssistantMessage(content=reply)
        elif isinstance(reply, ToolCall):
            message = AssistantMessage(tool_calls=(reply,))
        elif isinstance(reply, Sequence) and all(isinstance(c, ToolCall) for c in reply):
            message = AssistantMessage(
                tool_calls=tuple(c for c in reply if isinstance(c, ToolCall))
            )
        else:
            raise ModelError(
                f"{self.endpoint} was scripted a reply of type {type(reply).__name__}; a reply "
                "is a str, call(...), a list of call(...) or an AssistantMessage",
                endpoint=self.endpoint,
            )
        if any(not c.id for c in message.tool_calls):
            # Unique in a conversation several scripted agents share: named after the model.
            prefix = f"call_{self.name}_" if self.name else "call_"
            counter = itertools.count()
            calls = tuple(
                c if c.id else msgspec.structs.replace(c, id=f"{prefix}{turn}_{next(counter)}")
                for c in message.tool_calls
            )
            message = msgspec.structs.replace(message, tool_calls=calls)
        if self.name is not None and message.name is None:
            message = msgspec.structs.replace(message, name=self.name)
        return message


def check_endpoint(
    model: object,
    *,
    base_url: object,
    api_key: object,
    timeout: object,
    max_retries: object,
    stream: object,
    examples: tuple[str, str],
) -> None:
    """Refuse a model adapter's endpoint settings that are of the wrong type or out of range.

    ``examples`` are a model name and a base URL of the provider, for the messages. None
    leaves ``base_url``, ``api_key``, ``timeout`` and ``max_retries`` to their defaults.
    """
    if not isinstance(model, str):
        raise TypeError(f"model must be the model's name as a str, not {type(model).__name__}")
    if not model.strip():
        raise ValueError(f"model must name the model to ask (for example {examples[0]})")
    if base_url is not None:
        if not isinstance(base_url, str):
            raise TypeError(f"base_url must be a str, not {type(base_url).__name__}")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"base_url must be an http(s) URL such as {examples[1]}, not {base_url!r}"
            )
    if api_key is not None and not isinstance(api_key, str):
        raise TypeError(f"api_key must be a str, not {type(api_key).__name__}")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise TypeError(f"timeout must be a number of seconds, not {timeout!r}")
        if not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if max_retries is not None:
        if isinstance(max_retries, bool) or not isinstance(max_retries, int):
            raise TypeError(f"max_retries must be an int, not {max_retries!r}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, not {max_retries}")
    if not isinstance(stream, bool):
        raise TypeError(f"stream must be True or False, not {stream!r}")
