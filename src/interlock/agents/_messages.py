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
from typing import Any, Final, Literal, TypeAlias

import msgspec

from ..graph import FinishReason, MessageChunk, Usage, join_message_chunks

__all__ = [
    "AssistantMessage",
    "ConversationItem",
    "FinishReason",
    "Message",
    "RemoveMessage",
    "ReplaceMessage",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "Usage",
    "UserMessage",
    "conversation",
    "from_openai",
    "message_from_chunks",
    "shown_to_model",
    "to_messages",
    "to_openai",
]


class ToolCall(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A model's request to call one tool.

    Attributes:
        id: The call's id, unique in its conversation (the model gives it).
        name: The tool to call.
        arguments: The arguments, decoded from the model's JSON.
        raw_arguments: The model's text when it was not a JSON object (the call then fails
            with a message to the model); None otherwise.
    """

    # Stored by position under a short name (every message is stored twice, in a delta and a
    # snapshot); data written under the long name, with field names, still reads.
    __interlock_name__ = "il.Call"
    __interlock_aliases__ = ("interlock.ToolCall",)
    __interlock_fields__ = (
        "id",
        "name",
        "arguments",
        "raw_arguments",
    )  # a new field goes at the end, never elsewhere

    id: str
    name: str
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    raw_arguments: str | None = None


class SystemMessage(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="role", tag="system", omit_defaults=True
):
    """Instructions for the model."""

    # Stored by position under a short name (every message is stored twice, in a delta and a
    # snapshot); data written under the long name, with field names, still reads.
    __interlock_name__ = "il.System"
    __interlock_aliases__ = ("interlock.SystemMessage",)
    __interlock_fields__ = ("content", "id")  # a new field goes at the end, never elsewhere

    content: str
    id: str | None = None
    """Names the message for edits (`ReplaceMessage`, `RemoveMessage`)."""


class UserMessage(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="role", tag="user", omit_defaults=True
):
    """What the user said."""

    # Stored by position under a short name (every message is stored twice, in a delta and a
    # snapshot); data written under the long name, with field names, still reads.
    __interlock_name__ = "il.User"
    __interlock_aliases__ = ("interlock.UserMessage",)
    __interlock_fields__ = ("content", "name", "id")  # a new field goes at the end, never elsewhere

    content: str
    name: str | None = None
    """Who said it, if there are several users."""
    id: str | None = None
    """Names the message for edits."""


class AssistantMessage(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="role", tag="assistant", omit_defaults=True
):
    """A model's reply: text, tool calls, or both."""

    # Stored by position under a short name (every message is stored twice, in a delta and a
    # snapshot); data written under the long name, with field names, still reads.
    __interlock_name__ = "il.Assistant"
    __interlock_aliases__ = ("interlock.AssistantMessage",)
    __interlock_fields__ = (
        "content",
        "tool_calls",
        "name",
        "id",
        "finish_reason",
        "usage",
    )  # a new field goes at the end, never elsewhere

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    name: str | None = None
    """The agent that wrote it (set by the agent when the model leaves it empty)."""
    id: str | None = None
    """Names the message for edits."""
    finish_reason: FinishReason | None = None
    """Why the model stopped writing (``length``: the reply is cut short); None when the
    model did not say (a scripted reply, a message stored before this was recorded). Not sent
    back to the model."""
    usage: Usage | None = None
    """The tokens the call that wrote it used, when its provider reported them. Not sent
    back to the model."""


ToolStatus = Literal["ok", "error", "rejected", "denied", "responded"]
"""How a tool call ended: it ran, it failed, a person rejected it, the policy denied it, or a
person answered in place of the tool."""


class ToolMessage(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="role", tag="tool", omit_defaults=True
):
    """The answer to one tool call, as the model reads it."""

    # Stored by position under a short name (every message is stored twice, in a delta and a
    # snapshot); data written under the long name, with field names, still reads.
    __interlock_name__ = "il.Tool"
    __interlock_aliases__ = ("interlock.ToolMessage",)
    __interlock_fields__ = (
        "content",
        "tool_call_id",
        "name",
        "status",
        "id",
    )  # a new field goes at the end, never elsewhere

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


class ReplaceMessage(msgspec.Struct, frozen=True, kw_only=True, tag="replace", omit_defaults=True):
    """A conversation edit: the message with ``id`` reads ``message`` from now on."""

    __interlock_name__ = "interlock.ReplaceMessage"  # its stable name in checkpoints

    id: str
    message: Message


class RemoveMessage(msgspec.Struct, frozen=True, kw_only=True, tag="remove", omit_defaults=True):
    """A conversation edit: the message with ``id`` is no longer shown to the model."""

    __interlock_name__ = "interlock.RemoveMessage"  # its stable name in checkpoints

    id: str


ConversationItem: TypeAlias = Message | ReplaceMessage | RemoveMessage
"""What an agent's ``messages`` list holds: messages, and edits of earlier ones."""

_MESSAGE_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolMessage)
_EDIT_TYPES = (ReplaceMessage, RemoveMessage)  # a tuple: ``A | B`` builds a union each time


def conversation(items: Iterable[ConversationItem]) -> list[Message]:
    """Fold edits into the messages they edit: what the model is shown.

    An edit naming no message is ignored (the message may have been removed already). Items
    given as a string (a user message) or an OpenAI-shaped dict are read as messages.

    Folding a live conversation again after it grew costs only the new items (see `_Fold`).

    Raises:
        TypeError, ValueError: An item is no message.
    """
    return list(_fold(items).messages)


def shown_to_model(items: Iterable[ConversationItem]) -> list[Message]:
    """`conversation`, with an answer for every tool call (what a model may be shown).

    A call left unanswered before a later message — its approval was cancelled by new input —
    gets a tool message saying it did not run; the stored conversation is not changed.
    """
    return list(_fold(items).shown)


def folded(items: Iterable[ConversationItem]) -> Sequence[Message]:
    """`conversation` without the copy: the folded messages themselves, to read only.

    For the agent's own nodes, which read the conversation several times a superstep and
    change nothing: the result is the memoised fold's list, which later folds extend.
    """
    return _fold(items).messages


def folded_shown(items: Iterable[ConversationItem]) -> Sequence[Message]:
    """`shown_to_model` without the copy: to read only (see `folded`)."""
    return _fold(items).shown


CANCELLED: Final = "Not run: the call was cancelled when the conversation moved on."


class _Fold:
    """The folded form of one conversation list, extended as the list grows.

    An agent's ``messages`` list only ever grows (the `append` reducer), and each superstep
    reads it several times: refolding it whole each time would make turn *n* cost O(*n*).
    While no edit has appeared, new items are folded onto the previous result. An edit makes
    the list be folded whole again (edits are rare). A list that got shorter is folded whole; a
    node that rewrote an item of its state's list in place (which no reducer does) would not be
    seen.
    """

    __slots__ = ("edited", "items", "messages", "open_calls", "seen", "shown")

    def __init__(self, items: Any) -> None:
        self.items = items
        self.seen = 0
        self.edited = False
        self.messages: list[Message] = []
        self.shown: list[Message] = []
        self.open_calls: list[ToolCall] = []

    def extend(self, new: Iterable[Any]) -> None:
        for item in new:
            if isinstance(item, _EDIT_TYPES):
                self.edited = True
                return
            item = _as_message(item)
            self.messages.append(item)
            self._show(item)

    def _show(self, m: Message) -> None:
        open_calls = self.open_calls
        if isinstance(m, ToolMessage):
            if open_calls:
                self.open_calls = [c for c in open_calls if c.id != m.tool_call_id]
        elif open_calls:
            self.shown.extend(
                ToolMessage(content=CANCELLED, tool_call_id=c.id, name=c.name, status="error")
                for c in open_calls
            )
            self.open_calls = []
        self.shown.append(m)
        if isinstance(m, AssistantMessage) and m.tool_calls:
            self.open_calls = list(m.tool_calls)


_FOLDS: dict[int, _Fold] = {}
"""Folds of live conversation lists by ``id``; each holds its list, so the id stays its own."""
_MAX_FOLDS: Final = 64


def _fold(items: Iterable[ConversationItem]) -> _Fold:
    if isinstance(items, list):
        memo = _FOLDS.get(id(items))
        if memo is not None and memo.items is items and memo.seen <= len(items):
            if not memo.edited:
                memo.extend(items[memo.seen :])
                memo.seen = len(items)
            if not memo.edited:
                return memo
        fold = _full(items)
        if len(_FOLDS) >= _MAX_FOLDS:
            _FOLDS.pop(next(iter(_FOLDS)))
        _FOLDS[id(items)] = fold
        return fold
    return _full(list(items))


def _as_message(item: Any) -> Message:
    """An item of a conversation as a message; input given as text or as an OpenAI dict
    (``{"messages": ["hi"]}``) is read so."""
    if isinstance(item, _MESSAGE_TYPES):
        return item
    if isinstance(item, str | Mapping):
        (message,) = to_messages(item)
        return message
    raise TypeError(f"a conversation holds messages, not {type(item).__name__}")


def _full(items: list[Any]) -> _Fold:
    """Fold a whole list, edits included."""
    fold = _Fold(items)
    fold.seen = len(items)
    if not any(isinstance(i, _EDIT_TYPES) for i in items):
        fold.extend(items)
        return fold
    fold.edited = True
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
            item = _as_message(item)
            if item.id is not None:
                where[item.id] = len(messages)
            messages.append(item)
    shown = _Fold(items)
    shown.extend(m for i, m in enumerate(messages) if i not in dropped)
    fold.messages, fold.shown = shown.messages, shown.shown
    return fold


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
    return AssistantMessage(
        content=joined.content,
        tool_calls=tuple(calls),
        finish_reason=joined.finish_reason,
        usage=joined.usage,
    )
