"""What crosses the wire: interlock's messages, questions and decisions in AG-UI's shapes.

Messages keep their ids both ways: a user message the front-end sent is stored under the id it
gave, so the next run (which sends the whole conversation again) adds only what is new. A tool
message is named after its call (``<call id>-result``), in the stream and in snapshots alike.

A question becomes an AG-UI ``Interrupt``: its id is the interlock interrupt id, its
``responseSchema`` the question's answer schema, and its ``metadata["interlock"]`` carries what
the web inbox shows (`QuestionView`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import msgspec
from ag_ui.core import (
    AssistantMessage as AGAssistant,
)
from ag_ui.core import (
    FunctionCall,
    ResumeEntry,
)
from ag_ui.core import (
    Interrupt as AGInterrupt,
)
from ag_ui.core import (
    Message as AGMessage,
)
from ag_ui.core import (
    SystemMessage as AGSystem,
)
from ag_ui.core import (
    ToolCall as AGToolCall,
)
from ag_ui.core import (
    ToolMessage as AGTool,
)
from ag_ui.core import (
    UserMessage as AGUser,
)

from .._plain import plain
from ..agents import (
    APPROVAL,
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from ..runtime import Authority, Decision, Interrupt
from ._errors import RunRefused

__all__ = [
    "KEY",
    "answer_of",
    "decided_view",
    "interrupt_of",
    "messages_of",
    "new_user_messages",
    "plain",
    "result_id",
]

KEY: Final = "interlock"
"""The key of interlock's own data in an AG-UI ``metadata`` object."""

CANCELLED: Final = "The user cancelled this tool call."
"""What the model reads when a front-end cancels an approval (``status: "cancelled"``)."""


def result_id(call_id: str) -> str:
    """The AG-UI message id of the answer to tool call ``call_id``."""
    return f"{call_id}-result"


# -- messages ------------------------------------------------------------------------------------


def messages_of(conversation: Iterable[Message]) -> list[AGMessage]:
    """A conversation (edits folded in) as AG-UI messages, for ``MESSAGES_SNAPSHOT``."""
    out: list[AGMessage] = []
    for index, message in enumerate(conversation):
        mid = message.id or f"m{index}"
        if isinstance(message, UserMessage):
            out.append(AGUser(id=mid, content=message.content, name=message.name))
        elif isinstance(message, SystemMessage):
            out.append(AGSystem(id=mid, content=message.content))
        elif isinstance(message, AssistantMessage):
            calls = [
                AGToolCall(
                    id=call.id,
                    function=FunctionCall(name=call.name, arguments=arguments_text(call)),
                )
                for call in message.tool_calls
            ]
            out.append(
                AGAssistant(
                    id=mid,
                    content=message.content,
                    name=message.name,
                    tool_calls=calls or None,
                )
            )
        elif isinstance(message, ToolMessage):
            out.append(
                AGTool(
                    id=result_id(message.tool_call_id),
                    content=message.content,
                    tool_call_id=message.tool_call_id,
                )
            )
    return out


def arguments_text(call: Any) -> str:
    """A tool call's arguments as the JSON text AG-UI carries (the model's own text, if bad)."""
    raw: str | None = call.raw_arguments
    return raw if raw is not None else msgspec.json.encode(call.arguments).decode()


def new_user_messages(sent: Sequence[AGMessage], known: Iterable[Message]) -> list[UserMessage]:
    """The user messages of ``sent`` the thread does not hold yet, as interlock messages.

    A front-end sends the whole conversation on every run; what the thread holds (by id) is
    left out, and so is what is not a user's (the agent's own messages and tool results come
    from the thread, never from the front-end).

    Raises:
        RunRefused: A new user message has a part that is not text (``invalid_input``).
    """
    ids = {m.id for m in known if m.id} | {
        result_id(m.tool_call_id) for m in known if isinstance(m, ToolMessage)
    }
    out: list[UserMessage] = []
    for message in sent:
        if not isinstance(message, AGUser) or message.id in ids:
            continue
        out.append(UserMessage(content=_text(message), name=message.name, id=message.id))
    return out


def _text(message: AGUser) -> str:
    if isinstance(message.content, str):
        return message.content
    texts = []
    for part in message.content:
        text = getattr(part, "text", None)
        if getattr(part, "type", None) != "text" or not isinstance(text, str):
            raise RunRefused(
                "invalid_input",
                f"message {message.id} has a {getattr(part, 'type', '?')} part: this agent "
                "reads text only; send the message as text",
            )
        texts.append(text)
    return "".join(texts)


# -- questions -----------------------------------------------------------------------------------


def interrupt_of(
    interrupt: Interrupt, *, payload_hash: str, authority: Authority | None
) -> AGInterrupt:
    """An interlock question as an AG-UI interrupt (see the module docstring).

    ``authority`` is who may decide it, as `App.who_decides` says.
    """
    info = interrupt.info if isinstance(interrupt.info, Mapping) else {}
    tool_call = info.get("type") == APPROVAL
    question = info.get("question")
    schema = interrupt.schema
    view = {
        "address": str(interrupt.address),
        "kind": interrupt.kind,
        "key": interrupt.key,
        "tool": info.get("tool") if tool_call else None,
        "arguments": plain(info.get("arguments")) if tool_call else None,
        "toolSchema": plain(info.get("schema")) if tool_call else None,
        "agent": info.get("agent"),
        "rule": plain(info.get("rule")),
        "description": info.get("description"),
        "info": plain(interrupt.info),
        "approvals": interrupt.approvals,
        "approvedBy": list(interrupt.approved_by),
        "authority": _authority(authority, interrupt.started_by),
        "startedBy": interrupt.started_by,
        "payloadHash": payload_hash,
        "confirm": info.get("confirm") is True,
    }
    return AGInterrupt(
        id=interrupt.id,
        reason=APPROVAL if tool_call else "input_required",
        message=question if isinstance(question, str) else None,
        tool_call_id=info.get("call_id") if tool_call else None,
        response_schema=plain(schema) if isinstance(schema, Mapping) else None,
        expires_at=_iso(interrupt.deadline),
        metadata={KEY: view},
    )


def _authority(authority: Authority | None, starter: str | None) -> dict[str, Any] | None:
    if authority is None:
        return None
    return {
        "principals": list(authority.principals),
        "groups": list(authority.groups),
        "roles": list(authority.roles),
        "notStarter": authority.not_starter,
        "notApprovers": authority.not_approvers,
        "text": authority.describe(starter),
    }


def _iso(deadline: float | None) -> str | None:
    if deadline is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(deadline))


def answer_of(entry: ResumeEntry, interrupt: Interrupt) -> Any:
    """The answer a resume entry gives a question, as `App.resume` takes it.

    ``resolved`` answers with the entry's ``payload``: for a tool call, a decision in its
    plain-JSON form (``{"action": "approve"}``, ``{"action": "edit", "arguments": {...}}``,
    ``{"action": "reject", "message": ...}``, ``{"action": "respond", "content": ...}``, or
    ``true`` / ``false``); for any other question, the answer its schema asks for.
    ``cancelled`` rejects a tool call; any other question has no answer that means "cancelled".

    Raises:
        RunRefused: A ``cancelled`` entry for a question that is no tool call
            (``invalid_answer``).
    """
    info = interrupt.info if isinstance(interrupt.info, Mapping) else {}
    if entry.status == "resolved":
        return entry.payload
    if info.get("type") == APPROVAL:
        return {"action": "reject", "message": CANCELLED}
    raise RunRefused(
        "invalid_answer",
        f"interrupt {interrupt.id} is a question, not a tool call: it cannot be cancelled; "
        "answer it with status resolved and the answer its responseSchema asks for",
    )


def decided_view(decision: Decision) -> dict[str, Any]:
    """Who decided a question someone else answered first, for the front-end."""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(decision.decided_at))
    return {
        "interruptId": decision.interrupt_id,
        "actor": decision.actor,
        "decidedAt": decision.decided_at,
        "answer": plain(decision.answer),
        "reason": decision.reason,
        "message": f"already decided by {decision.actor or 'someone'} at {when}",
    }
