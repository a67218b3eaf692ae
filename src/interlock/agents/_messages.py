"""Chat messages in the OpenAI shape, and the edits a person may make to a conversation.

A conversation is a list of messages: ``system``, ``user``, ``assistant`` (text and/or
``tool_calls``) and ``tool`` (the answer to one call, by ``tool_call_id``). The classes are
msgspec Structs, so an agent's state checkpoints them safely, and an agent's ``messages`` key
uses the `append` reducer: a checkpoint stores only the messages added since the previous one.

A conversation is edited by appending an edit (`ReplaceMessage`, `RemoveMessage`) rather than
by rewriting the list: the history keeps what changed, and the checkpoint stays a delta.
`conversation` folds the edits into the messages a model sees.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

import msgspec

from ..graph._chunks import MessageChunk, join_message_chunks

__all__ = [
    "AssistantMessage",
    "ConversationItem",
    "Message",
    "RemoveMessage",
    "ReplaceMessage",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "UserMessage",
    "conversation",
    "from_openai",
    "message_from_chunks",
    "to_messages",
    "to_openai",
]


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """A model's request to call one tool.

    Args:
        id: The call's id, unique in its conversation (the model gives it).
        name: The tool to call.
        arguments: The arguments, decoded from the model's JSON.
        raw_arguments: The model's text when it was not a JSON object (the call then fails
            with a message to the model); None otherwise.
    """

    id: str
    name: str
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    raw_arguments: str | None = None


class SystemMessage(msgspec.Struct, frozen=True, kw_only=True, tag_field="role", tag="system"):
    """Instructions for the model."""

    content: str
    id: str | None = None
    """Names the message for edits (`ReplaceMessage`, `RemoveMessage`)."""


class UserMessage(msgspec.Struct, frozen=True, kw_only=True, tag_field="role", tag="user"):
    """What the user said."""

    content: str
    name: str | None = None
    """Who said it, if there are several users."""
    id: str | None = None
    """Names the message for edits."""


class AssistantMessage(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="role", tag="assistant"
):
    """A model's reply: text, tool calls, or both."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    name: str | None = None
    """The agent that wrote it (set by the agent when the model leaves it empty)."""
    id: str | None = None
    """Names the message for edits."""


ToolStatus = Literal["ok", "error", "rejected", "denied", "responded"]
"""How a tool call ended: it ran, it failed, a person rejected it, the policy denied it, or a
person answered in place of the tool."""


class ToolMessage(msgspec.Struct, frozen=True, kw_only=True, tag_field="role", tag="tool"):
    """The answer to one tool call, as the model reads it."""

    content: str
    tool_call_id: str
    name: str | None = None
    """The tool."""
    status: ToolStatus = "ok"
    """How the call ended (not sent to the model; the content says it)."""
    id: str | None = None
    """Names the message for edits."""


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolMessage
"""Any chat message."""


class ReplaceMessage(msgspec.Struct, frozen=True, kw_only=True, tag="replace"):
    """A conversation edit: the message with ``id`` reads ``message`` from now on."""

    id: str
    message: Message


class RemoveMessage(msgspec.Struct, frozen=True, kw_only=True, tag="remove"):
    """A conversation edit: the message with ``id`` is no longer shown to the model."""

    id: str


ConversationItem: TypeAlias = Message | ReplaceMessage | RemoveMessage
"""What an agent's ``messages`` list holds: messages, and edits of earlier ones."""

_MESSAGE_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolMessage)


def conversation(items: Iterable[ConversationItem]) -> list[Message]:
    """Fold edits into the messages they edit: what the model is shown.

    An edit naming no message is ignored (the message may have been removed already). Items
    given as a string (a user message) or an OpenAI-shaped dict are read as messages.

    Raises:
        TypeError, ValueError: An item is no message.
    """
    messages: list[Message] = []
    where: dict[str, int] = {}
    dropped: set[int] = set()
    for item in items:
        if isinstance(item, ReplaceMessage):
            i = where.get(item.id)
            if i is not None and i not in dropped:
                replacement = item.message
                if replacement.id != item.id:
                    replacement = msgspec.structs.replace(replacement, id=item.id)
                messages[i] = replacement
        elif isinstance(item, RemoveMessage):
            i = where.get(item.id)
            if i is not None:
                dropped.add(i)
        else:
            if not isinstance(item, _MESSAGE_TYPES):
                # Input given as text or OpenAI dicts ({"messages": ["hi"]}): read it so.
                (item,) = to_messages(item) if isinstance(item, str | Mapping) else (item,)
            if item.id is not None:
                where[item.id] = len(messages)
            messages.append(item)
    if not dropped:
        return messages
    return [m for i, m in enumerate(messages) if i not in dropped]


# -- the OpenAI wire shape -------------------------------------------------------------------


def to_openai(message: Message) -> dict[str, Any]:
    """The message as the OpenAI chat API takes it (``tool_calls`` with JSON arguments)."""
    if isinstance(message, AssistantMessage):
        out: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": (
                            call.raw_arguments
                            if call.raw_arguments is not None
                            else msgspec.json.encode(call.arguments).decode()
                        ),
                    },
                }
                for call in message.tool_calls
            ]
        if message.name:
            out["name"] = message.name
        return out
    if isinstance(message, ToolMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if isinstance(message, UserMessage):
        out = {"role": "user", "content": message.content}
        if message.name:
            out["name"] = message.name
        return out
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": message.content}
    raise TypeError(f"to_openai() takes a message, not {type(message).__name__}")


def parse_arguments(text: str | None) -> tuple[dict[str, Any], str | None]:
    """Decode a tool call's JSON arguments: ``(arguments, None)``, or ``({}, text)`` if bad."""
    if not text:
        return {}, None
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return {}, text
    if not isinstance(value, dict):
        return {}, text
    return value, None


def _content_text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    raise ValueError(f"message content must be a string or a list of parts, not {content!r:.80}")


def from_openai(data: Mapping[str, Any]) -> Message:
    """Build a message from its OpenAI dict form (``{"role": ..., "content": ...}``).

    Raises:
        ValueError: The dict is not a chat message.
    """
    if not isinstance(data, Mapping):
        raise TypeError(f"from_openai() takes a dict, not {type(data).__name__}")
    role = data.get("role")
    content = _content_text(data.get("content"))
    mid = data.get("id") if isinstance(data.get("id"), str) else None
    if role == "assistant":
        calls = []
        for raw in data.get("tool_calls") or ():
            if not isinstance(raw, Mapping):
                raise ValueError(f"a tool call must be a dict, not {raw!r:.80}")
            fn = raw.get("function") or {}
            arguments = fn.get("arguments")
            if isinstance(arguments, Mapping):
                parsed, bad = dict(arguments), None
            else:
                parsed, bad = parse_arguments(arguments)
            calls.append(
                ToolCall(
                    id=str(raw.get("id") or ""),
                    name=str(fn.get("name") or ""),
                    arguments=parsed,
                    raw_arguments=bad,
                )
            )
        return AssistantMessage(
            content=content, tool_calls=tuple(calls), name=data.get("name"), id=mid
        )
    if content is None:
        raise ValueError(f"a {role!r} message needs content")
    if role == "user":
        return UserMessage(content=content, name=data.get("name"), id=mid)
    if role == "system" or role == "developer":
        return SystemMessage(content=content, id=mid)
    if role == "tool":
        call_id = data.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise ValueError("a tool message needs the tool_call_id it answers")
        return ToolMessage(content=content, tool_call_id=call_id, name=data.get("name"), id=mid)
    raise ValueError(
        f"unknown message role {role!r}; a chat message has role system, user, assistant or tool"
    )


def to_messages(value: str | Message | Mapping[str, Any] | Sequence[Any]) -> list[Message]:
    """Read a caller's input as messages.

    Takes a string (one user message), a message, a dict in the OpenAI shape, or a list of
    those.

    Raises:
        TypeError: Something else was passed.
        ValueError: A dict is not a chat message.
    """
    if isinstance(value, str):
        if not value:
            raise ValueError("an empty string is no message; pass the user's text")
        return [UserMessage(content=value)]
    if isinstance(value, _MESSAGE_TYPES):
        return [value]
    if isinstance(value, Mapping):
        return [from_openai(value)]
    if isinstance(value, Sequence):
        out: list[Message] = []
        for item in value:
            if isinstance(item, (str | Mapping, _MESSAGE_TYPES)):
                out.extend(to_messages(item))
            else:
                raise TypeError(
                    f"a message must be a str, a dict or a message, not {type(item).__name__}"
                )
        return out
    raise TypeError(
        f"messages must be a str, a dict, a message or a list of them, not {type(value).__name__}"
    )


def message_from_chunks(chunks: Sequence[MessageChunk]) -> AssistantMessage:
    """Join a model's streamed chunks into the assistant message they spell."""
    if not chunks:
        return AssistantMessage(content="")
    joined = chunks[0] if len(chunks) == 1 else join_message_chunks(chunks)
    calls = []
    for piece in joined.tool_calls:
        arguments, bad = parse_arguments(piece.arguments)
        calls.append(
            ToolCall(
                id=piece.id or f"call_{piece.index}",
                name=piece.name or "",
                arguments=arguments,
                raw_arguments=bad,
            )
        )
    return AssistantMessage(content=joined.content, tool_calls=tuple(calls))
