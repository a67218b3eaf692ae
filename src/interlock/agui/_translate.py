"""An agent run's events as AG-UI events: small synchronous steps, no I/O.

`Translator` takes the runtime's events one by one (`App.stream` with the ``custom`` and
``interrupts`` modes) and returns the AG-UI events each one makes:

- a `TextDelta` opens an assistant message (``TEXT_MESSAGE_START``) and adds to it
  (``TEXT_MESSAGE_CONTENT``); the `AssistantTurn` that ends the model's reply closes it, or,
  when nothing was streamed, sends its text whole;
- each tool call of an `AssistantTurn` is ``TOOL_CALL_START`` / ``ARGS`` / ``END`` under that
  message; a `ToolResult` is ``TOOL_CALL_RESULT``;
- a `Transfer` between agents, and what a node reports with ``emit_event``, are ``CUSTOM``
  events (``interlock.transfer``, ``interlock.event``);
- an `InterruptEvent` is kept: the questions end the run (`finish`).

Invariant: a text message opened is closed before any other event is returned.
"""

from __future__ import annotations

import secrets
from typing import Final, get_args

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from .._plain import plain
from ..agents import AgentEvent, AssistantTurn, TextDelta, ToolResult, Transfer
from ..runtime import CustomEvent as RuntimeCustom
from ..runtime import Event, Interrupt, InterruptEvent
from ._wire import arguments_text, result_id

__all__ = ["Translator"]

_AGENT_EVENTS: Final = get_args(AgentEvent)
"""The agents' own events: those not translated above have no AG-UI counterpart."""


class Translator:
    """Turns one run's runtime events into AG-UI events (see the module docstring)."""

    def __init__(self) -> None:
        self._open: str | None = None
        """The id of the text message being streamed, if one is open."""
        self.interrupts: list[Interrupt] = []
        """The questions the run raised, in order."""

    def __repr__(self) -> str:
        return f"<Translator open={self._open} interrupts={len(self.interrupts)}>"

    def translate(self, event: Event) -> list[BaseEvent]:
        """The AG-UI events one runtime event makes (none for what a front-end has no use for)."""
        if isinstance(event, InterruptEvent):
            self.interrupts.append(event.interrupt)
            return self.close()
        if not isinstance(event, RuntimeCustom):
            return []
        data = event.data
        if isinstance(data, TextDelta):
            return self._text(data)
        if isinstance(data, AssistantTurn):
            return self._turn(data)
        out = self.close()
        if isinstance(data, ToolResult):
            out.append(
                ToolCallResultEvent(
                    message_id=result_id(data.call_id),
                    tool_call_id=data.call_id,
                    content=data.content,
                    role="tool",
                )
            )
        elif isinstance(data, Transfer):
            value = {"source": data.source, "target": data.target}
            out.append(CustomEvent(name="interlock.transfer", value=value))
        elif not isinstance(data, _AGENT_EVENTS):
            value = {"node": event.node, "address": str(event.address), "data": plain(data)}
            out.append(CustomEvent(name="interlock.event", value=value))
        return out

    def close(self) -> list[BaseEvent]:
        """``TEXT_MESSAGE_END`` of the text message being streamed, if one is open."""
        if self._open is None:
            return []
        opened, self._open = self._open, None
        return [TextMessageEndEvent(message_id=opened)]

    def _text(self, delta: TextDelta) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if self._open is None:
            # The stored message gets its id when the reply is whole; the snapshot that ends
            # the run carries that one.
            self._open = f"stream-{secrets.token_hex(8)}"
            out.append(TextMessageStartEvent(message_id=self._open, role="assistant"))
        if delta.text:
            out.append(TextMessageContentEvent(message_id=self._open, delta=delta.text))
        return out

    def _turn(self, turn: AssistantTurn) -> list[BaseEvent]:
        message = turn.message
        parent = self._open or message.id or f"turn-{secrets.token_hex(8)}"
        out: list[BaseEvent]
        if self._open is not None:
            out = self.close()
        elif message.content:
            out = [
                TextMessageStartEvent(message_id=parent, role="assistant"),
                TextMessageContentEvent(message_id=parent, delta=message.content),
                TextMessageEndEvent(message_id=parent),
            ]
        else:
            out = []
        for call in message.tool_calls:
            out += [
                ToolCallStartEvent(
                    tool_call_id=call.id, tool_call_name=call.name, parent_message_id=parent
                ),
                ToolCallArgsEvent(tool_call_id=call.id, delta=arguments_text(call)),
                ToolCallEndEvent(tool_call_id=call.id),
            ]
        return out
