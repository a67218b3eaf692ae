"""A person's decision on a gated tool call: approve, reject, edit the arguments, or answer.

Each decision has a typed form (`Approve`, `Reject`, `Edit`, `Respond`) and a plain-JSON form
for HTTP clients (``{"action": "edit", "arguments": {...}}``); ``True`` and ``"approve"`` also
approve, ``False`` and ``"reject"`` reject. The interrupt's answer schema holds the tool's
argument schema, so an edit that does not fit the tool is refused (`InvalidResume`) before
anything is recorded.

A call that needs several approvals (a quorum) counts each approving form as one person's
approval (`APPROVING`); its answer schema refuses an approval that carries conversation edits,
which a vote could not apply.
"""

from __future__ import annotations

from typing import Any, Final, TypeAlias

import msgspec

from ..runtime import register_answer_details
from ._messages import RemoveMessage, ReplaceMessage

__all__ = [
    "APPROVAL",
    "APPROVING",
    "Approve",
    "ConversationEdit",
    "Edit",
    "Reject",
    "Respond",
    "ToolDecision",
    "decision_schema",
    "parse_decision",
]

APPROVAL: Final = "tool_approval"
"""The ``info["type"]`` of a tool call waiting for approval."""

REJECTED: Final = "The user rejected this tool call."

ConversationEdit: TypeAlias = ReplaceMessage | RemoveMessage
"""A change a decision makes to the conversation of the agent that asked."""

_EDITED_MESSAGE: Final = {
    "type": "object",
    "required": ["role", "content"],
    "properties": {
        "role": {"enum": ["system", "user", "assistant"]},
        "content": {"type": "string"},
        "name": {"type": "string"},
    },
    "additionalProperties": False,
}
_EDITS: Final = {
    "type": "array",
    "items": {
        "anyOf": [
            {
                "type": "object",
                "required": ["type", "id", "message"],
                "properties": {
                    "type": {"const": "replace"},
                    "id": {"type": "string", "minLength": 1},
                    "message": _EDITED_MESSAGE,
                },
                "additionalProperties": False,
            },
            {
                "type": "object",
                "required": ["type", "id"],
                "properties": {
                    "type": {"const": "remove"},
                    "id": {"type": "string", "minLength": 1},
                },
                "additionalProperties": False,
            },
        ]
    },
}
"""``conversation``, as every decision object may carry it: messages replaced by id (a system,
user or assistant text) or removed by id."""


class Approve(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="action", tag="approve", omit_defaults=True
):
    """Run the call with the arguments the person was shown."""

    __interlock_name__ = "interlock.Approve"  # its stable name in checkpoints

    conversation: tuple[ConversationEdit, ...] = ()
    """Edits of the asking agent's conversation, applied before it continues."""


class Reject(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="action", tag="reject", omit_defaults=True
):
    """Do not run the call; the model is told ``message`` and carries on."""

    __interlock_name__ = "interlock.Reject"  # its stable name in checkpoints

    message: str = REJECTED
    conversation: tuple[ConversationEdit, ...] = ()
    """Edits of the asking agent's conversation, applied before it continues."""


class Edit(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="action", tag="edit", omit_defaults=True
):
    """Run the call with these arguments instead (checked against the tool's schema)."""

    __interlock_name__ = "interlock.Edit"  # its stable name in checkpoints

    arguments: dict[str, Any]
    conversation: tuple[ConversationEdit, ...] = ()
    """Edits of the asking agent's conversation, applied before it continues."""


class Respond(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="action", tag="respond", omit_defaults=True
):
    """Do not run the tool; ``content`` is its answer, as if the tool had given it."""

    __interlock_name__ = "interlock.Respond"  # its stable name in checkpoints

    content: str
    conversation: tuple[ConversationEdit, ...] = ()
    """Edits of the asking agent's conversation, applied before it continues."""


ToolDecision: TypeAlias = Approve | Reject | Edit | Respond
"""Any decision on a gated tool call."""

_DECISION_TYPES = (Approve, Reject, Edit, Respond)
_BY_ACTION: Final[dict[str, type[ToolDecision]]] = {
    "approve": Approve,
    "reject": Reject,
    "edit": Edit,
    "respond": Respond,
}
_APPROVE: Final = Approve()


APPROVING: Final = {
    "anyOf": [
        {"const": True},
        {"const": "approve"},
        {
            "type": "object",
            "required": ["action"],
            "properties": {"action": {"const": "approve"}},
            "additionalProperties": False,
        },
    ]
}
"""The answers that count as one approval of a call that needs several: ``Approve()``,
``{"action": "approve"}``, ``true``, ``"approve"``. The quorum's answer schema accepts no other
approving form, so every answer that runs the call is counted as a vote."""


def decision_schema(parameters: dict[str, Any], *, quorum: bool = False) -> dict[str, Any]:
    """The answer schema of an approval for a tool whose arguments follow ``parameters``.

    A decision object is checked by its ``action``, so a refusal names what is wrong with that
    form (``answer.arguments: 'command' is a required property``) rather than with every form.
    With ``quorum`` (the call needs several approvals) an approval carries nothing but itself:
    it is one vote, which cannot bring conversation edits with it.

    The schema of ``conversation`` is written once, beside ``action``; each form that allows
    it only names it (``true``), so the schema stored with every approval holds it once, not
    once per form.

    Example:
        >>> from jsonschema import Draft202012Validator
        >>> schema = decision_schema({"type": "object", "properties": {"n": {"type": "integer"}}})
        >>> check = Draft202012Validator(schema).is_valid
        >>> check({"action": "edit", "arguments": {"n": 2}}), check({"action": "edit"})
        (True, False)
        >>> check({"action": "approve", "conversation": [{"type": "remove", "id": "m1"}]})
        True
        >>> check({"action": "approve", "conversation": [{"type": "remove"}]})
        False
    """
    arguments = {k: v for k, v in parameters.items() if k != "$defs"}
    forms = {
        "approve": _action("approve", {}, conversation=not quorum),
        "reject": _action("reject", {"message": {"type": "string"}}),
        "edit": _action("edit", {"arguments": arguments}, required=("arguments",)),
        "respond": _action("respond", {"content": {"type": "string"}}, required=("content",)),
    }
    decision = {
        "type": "object",
        "required": ["action"],
        "properties": {"action": {"enum": list(forms)}, "conversation": _EDITS},
        "allOf": [
            {"if": {"properties": {"action": {"const": name}}}, "then": form}
            for name, form in forms.items()
        ],
    }
    schema: dict[str, Any] = {
        "anyOf": [decision, {"type": "boolean"}, {"enum": ["approve", "reject"]}]
    }
    if "$defs" in parameters:  # the arguments' references point at the root
        schema["$defs"] = parameters["$defs"]
    return schema


def _action(
    name: str,
    fields: dict[str, Any],
    *,
    required: tuple[str, ...] = (),
    conversation: bool = True,
) -> dict[str, Any]:
    # ``conversation`` is checked beside ``action`` (see decision_schema); here it is only
    # allowed, or, left out, refused by additionalProperties.
    edits = {"conversation": True} if conversation else {}
    return {
        "properties": {"action": {"const": name}, **edits, **fields},
        "required": ["action", *required],
        "additionalProperties": False,
    }


def parse_decision(answer: Any) -> ToolDecision:
    """Read an answer (typed, plain JSON, a bool or ``"approve"``/``"reject"``) as a decision.

    Raises:
        ValueError: It is no decision (the answer schema refuses these before they are
            recorded, so this means a caller bypassed it).
    """
    if type(answer) is dict:  # plain JSON, the usual answer: no decision type to look for
        # Converting to the one form the answer names costs a seventh of converting to the
        # union (msgspec builds a union's converter on every call); errors come from the union.
        action = answer.get("action")
        form = _BY_ACTION.get(action) if isinstance(action, str) else None
        if form is Approve and len(answer) == 1:
            return _APPROVE
        if form is not None:
            try:
                return msgspec.convert(answer, form)
            except msgspec.ValidationError:
                pass
    elif isinstance(answer, _DECISION_TYPES):
        return answer
    elif answer is True or answer == "approve":
        return _APPROVE
    elif answer is False or answer == "reject":
        return Reject()
    try:
        decision: ToolDecision = msgspec.convert(answer, ToolDecision)
    except msgspec.ValidationError as exc:
        raise ValueError(f"{answer!r:.80} is no tool decision: {exc}") from exc
    return decision


def _diff(before: Any, after: Any, path: str = "") -> list[dict[str, Any]]:
    """What changed from ``before`` to ``after``, as JSON-pointer paths."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[dict[str, Any]] = []
        for key in sorted(set(before) | set(after), key=str):
            where = f"{path}/{str(key).replace('~', '~0').replace('/', '~1')}"
            if key not in after:
                out.append({"op": "remove", "path": where, "before": before[key]})
            elif key not in before:
                out.append({"op": "add", "path": where, "after": after[key]})
            else:
                out.extend(_diff(before[key], after[key], where))
        return out
    if before == after and type(before) is type(after):
        return []
    return [{"op": "replace", "path": path or "/", "before": before, "after": after}]


def _details(info: Any, answer: Any) -> Any:
    decision = parse_decision(answer)
    if not isinstance(decision, Edit):
        return None
    before = info.get("arguments") if isinstance(info, dict) else None
    return {
        "tool": info.get("tool") if isinstance(info, dict) else None,
        "call_id": info.get("call_id") if isinstance(info, dict) else None,
        "before": before,
        "after": decision.arguments,
        "diff": _diff(before, decision.arguments),
    }


register_answer_details(APPROVAL, _details)
