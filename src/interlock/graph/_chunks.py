"""Chat-message chunks as a model streams them (the OpenAI delta shape), and how they join."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from ._concat import register_concat

__all__ = ["MessageChunk", "ToolCallChunk", "join_message_chunks"]


class ToolCallChunk(msgspec.Struct, frozen=True, kw_only=True):
    """A piece of one tool call of a streamed message; pieces with one ``index`` join."""

    index: int
    """Which tool call of the message this piece belongs to."""
    id: str | None = None
    """The call's id (usually in the first piece only)."""
    name: str | None = None
    """The tool's name (usually in the first piece only)."""
    arguments: str = ""
    """A piece of the JSON arguments."""


class MessageChunk(msgspec.Struct, frozen=True, kw_only=True):
    """A piece of a streamed chat message.

    Joined chunks make the whole message: the first role, the content pieces in order, and the
    tool calls merged by index (first id and name, argument pieces in order).
    """

    role: str | None = None
    """``assistant``, ``user``... (usually in the first chunk only)."""
    content: str | None = None
    """A piece of the text."""
    tool_calls: tuple[ToolCallChunk, ...] = ()
    """Pieces of tool calls."""


def join_message_chunks(chunks: Sequence[MessageChunk]) -> MessageChunk:
    """Join streamed message chunks into one message (the registered concat rule)."""
    role = next((c.role for c in chunks if c.role), None)
    texts = [c.content for c in chunks if c.content is not None]
    calls: dict[int, list[ToolCallChunk]] = {}
    for chunk in chunks:
        for piece in chunk.tool_calls:
            calls.setdefault(piece.index, []).append(piece)
    joined = tuple(
        ToolCallChunk(
            index=index,
            id=next((p.id for p in pieces if p.id), None),
            name=next((p.name for p in pieces if p.name), None),
            arguments="".join(p.arguments for p in pieces),
        )
        for index, pieces in sorted(calls.items())
    )
    return MessageChunk(role=role, content="".join(texts) if texts else None, tool_calls=joined)


register_concat(MessageChunk, join_message_chunks)
