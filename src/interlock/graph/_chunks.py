"""Chat-message chunks as a model streams them (the OpenAI delta shape), and how they join."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeAlias

import msgspec

from ._concat import register_concat

__all__ = ["FinishReason", "MessageChunk", "ToolCallChunk", "Usage", "join_message_chunks"]

FinishReason: TypeAlias = Literal["stop", "length", "tool_calls", "content_filter", "refusal"]
"""Why a model's reply ended: it was finished (``stop``), it hit the token limit (``length``:
the reply is cut short), it calls tools (``tool_calls``), the provider's filter withheld
content (``content_filter``), or the model refused (``refusal``, the text says why)."""


class Usage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The tokens one model call used, as its provider reported them."""

    __interlock_name__ = "interlock.Usage"  # its stable name in checkpoints

    input_tokens: int = 0
    """Tokens of the request: the conversation, the tools, the system prompt."""
    output_tokens: int = 0
    """Tokens the model wrote."""
    cached_tokens: int = 0
    """Of ``input_tokens``, those the provider read from its prompt cache (0 when it does
    not say)."""

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
        )


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
    finish_reason: FinishReason | None = None
    """Why the reply ended (on the last chunk, when the model says)."""
    usage: Usage | None = None
    """Tokens used, on the chunk that reports them (pieces of usage add up when joined)."""


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
    finish = next((c.finish_reason for c in reversed(chunks) if c.finish_reason), None)
    reported = [c.usage for c in chunks if c.usage is not None]
    usage = sum(reported[1:], reported[0]) if reported else None
    return MessageChunk(
        role=role,
        content="".join(texts) if texts else None,
        tool_calls=joined,
        finish_reason=finish,
        usage=usage,
    )


register_concat(MessageChunk, join_message_chunks)
