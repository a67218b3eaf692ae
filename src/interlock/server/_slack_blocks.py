"""What the Slack channel shows: a question as a Block Kit message, its modals, their answers.

Everything here is pure: it builds Slack's JSON from the server's views and reads the values
people typed back out of a modal's state. The message is a view of the durable question; it is
rebuilt from the question's current state each time it is posted or updated.
"""

from __future__ import annotations

import math
import time
from typing import Any, Final

import msgspec

from ..runtime import Decision, schema_problem
from ._views import InterruptView

__all__ = [
    "ACTIONS",
    "MODALS",
    "decision_text",
    "edit_modal",
    "edited_arguments",
    "question_message",
    "reject_modal",
    "respond_modal",
]

APPROVE: Final = "interlock.approve"
REJECT: Final = "interlock.reject"
EDIT: Final = "interlock.edit"
RESPOND: Final = "interlock.respond"
ACTIONS: Final = frozenset({APPROVE, REJECT, EDIT, RESPOND})
"""The ``action_id`` of each button of a question's message."""
MODALS: Final = frozenset({REJECT, EDIT, RESPOND})
"""The ``callback_id`` of each modal (the button that opens it has the same id)."""

ARGUMENTS_CHARS: Final = 2500
"""How much of the arguments' JSON a message shows (a section's text holds 3000)."""
CONFIRM_BLOCK: Final = "interlock.confirm"
"""The block of an edit modal's confirmation box (a question that asks for confirmation)."""
_REASON_BLOCK: Final = "reason"
_ANSWER_BLOCK: Final = "answer"
_VALUE: Final = "value"
_TRUE: Final = "true"
_MAX_FIELDS: Final = 90
"""Properties an edit modal shows as fields (a modal holds 100 blocks)."""


def mrkdwn(text: str) -> str:
    """Text as Slack's mrkdwn shows it literally (only &, < and > are special there)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def when(at: float) -> str:
    """A Unix time as people read it in messages: ``2026-12-03 10:00:00 UTC``."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def _plain(text: str, limit: int) -> dict[str, Any]:
    return {"type": "plain_text", "text": (text[: limit - 1] + "…") if len(text) > limit else text}


def _info(view: InterruptView) -> dict[str, Any]:
    return view.info if isinstance(view.info, dict) else {}


def is_tool_question(view: InterruptView) -> bool:
    """Whether the question is an agent's tool call waiting for approval (four answers)."""
    return _info(view).get("type") == "tool_approval"


def arguments_json(arguments: Any) -> str:
    """The arguments as indented JSON."""
    return msgspec.json.format(msgspec.json.encode(arguments), indent=2).decode()


def decision_text(decision: Decision) -> str:
    """What a decision did, in words: ``Approved by ana at 2026-12-03 10:00:00 UTC``."""
    who = decision.actor or "someone"
    at = when(decision.decided_at)
    if not decision.final:
        got = len(decision.approved_by)
        return f"Approved by {who} at {at} ({got} of {decision.approvals} approvals)"
    answer = _answer_of(decision.answer)
    action = answer.get("action") if isinstance(answer, dict) else answer
    if action in (True, "approve"):
        text = f"Approved by {who} at {at}"
    elif action in (False, "reject"):
        text = f"Rejected by {who} at {at}"
        message = answer.get("message") if isinstance(answer, dict) else None
        reason = decision.reason or (message if isinstance(message, str) else None)
        if reason:
            text += f": {reason}"
    elif action == "edit":
        text = f"Approved with edited arguments by {who} at {at}"
    elif action == "respond":
        text = f"Answered in place of the tool by {who} at {at}"
    else:
        text = f"Decided by {who} at {at}"
    if decision.override:
        text += f" (override: {decision.override})"
    return text


def _answer_of(answer: Any) -> Any:
    try:
        return msgspec.to_builtins(answer, enc_hook=str)
    except (TypeError, ValueError):
        return str(answer)


def question_message(
    view: InterruptView,
    *,
    link: str | None,
    outcome: str | None = None,
    votes: str | None = None,
) -> dict[str, Any]:
    """The message for a question: ``{"text": ..., "blocks": [...]}``.

    Args:
        view: The question as the API shows it.
        link: Its page in the web inbox, if the server knows its public URL.
        outcome: What became of it (decided, expired, withdrawn): the buttons go.
        votes: For a question that needs several approvals, who approved so far.
    """
    info = _info(view)
    headline = view.summary or f"Decision needed on thread {view.thread}"
    state = "Decision needed" if outcome is None else "Done"
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": _plain(state, 150)},
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{mrkdwn(headline)[:2900]}*"}},
    ]
    fields = []
    agent = info.get("agent")
    if isinstance(agent, str) and agent:
        fields.append(f"*Agent*\n{mrkdwn(agent)}")
    if view.tool:
        fields.append(f"*Tool*\n`{mrkdwn(view.tool)}`")
    rule = info.get("rule")
    if isinstance(rule, str) and rule:
        fields.append(f"*Rule*\n{mrkdwn(rule)}")
    who = view.authority.text if view.authority is not None else "anyone with the approver role"
    fields.append(f"*Who may decide*\n{mrkdwn(who)}")
    if view.approvals > 1:
        fields.append(f"*Approvals*\n{len(view.approved_by)} of {view.approvals}")
    if view.deadline is not None:
        fields.append(f"*Deadline*\n{when(view.deadline)}")
    fields.append(f"*Thread*\n`{mrkdwn(view.thread)}` ({mrkdwn(view.app)})")
    blocks.append(
        {"type": "section", "fields": [{"type": "mrkdwn", "text": f[:2000]} for f in fields]}
    )
    if "arguments" in info:
        shown = arguments_json(info["arguments"])
        cut = len(shown) > ARGUMENTS_CHARS
        text = f"```{mrkdwn(shown[:ARGUMENTS_CHARS])}{'…' if cut else ''}```"
        if cut:
            text += f"\n_Truncated: {len(shown)} characters in all._"
            if link:
                text += f" <{link}|See the full arguments in the inbox>"
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text}})
    if outcome is not None:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn(outcome)}})
    else:
        if votes:
            blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": votes}]})
        blocks.append({"type": "actions", "block_id": "decide", "elements": _buttons(view, link)})
    context = f"Interrupt `{view.id}`"
    if link:
        context += f" · <{link}|Open in the inbox>"
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": context}]})
    text = f"{state}: {headline}" + (f" — {outcome}" if outcome else "")
    return {"text": text[:3000], "blocks": blocks}


def _buttons(view: InterruptView, link: str | None) -> list[dict[str, Any]]:
    shown: dict[str, Any] = {"i": view.id, "h": view.payload_hash}
    if view.confirm:
        # Slack sends the action only once the person went through the confirm dialog.
        shown["c"] = 1
    value = msgspec.json.encode(shown).decode()
    approve: dict[str, Any] = {
        "type": "button",
        "action_id": APPROVE,
        "text": _plain("Approve", 75),
        "style": "primary",
        "value": value,
    }
    if view.confirm:
        approve["confirm"] = {
            "title": _plain("Approve this call?", 100),
            "text": {
                "type": "mrkdwn",
                "text": mrkdwn(f"{view.summary or 'This question'}\n\nIt asks for a confirmation.")[
                    :300
                ],
            },
            "confirm": _plain("Approve", 30),
            "deny": _plain("Cancel", 30),
            "style": "primary",
        }
    buttons = [approve]
    buttons.append(
        {
            "type": "button",
            "action_id": REJECT,
            "text": _plain("Reject", 75),
            "style": "danger",
            "value": value,
        }
    )
    if is_tool_question(view):
        if isinstance(_info(view).get("schema"), dict):
            buttons.append(
                {"type": "button", "action_id": EDIT, "text": _plain("Edit", 75), "value": value}
            )
        buttons.append(
            {"type": "button", "action_id": RESPOND, "text": _plain("Respond", 75), "value": value}
        )
    if link:
        buttons.append(
            {
                "type": "button",
                "action_id": "interlock.open",
                "text": _plain("Open", 75),
                "url": link,
            }
        )
    return buttons


# --- modals ----------------------------------------------------------------------------------


def _modal(callback: str, title: str, submit: str, meta: str, blocks: list[Any]) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": callback,
        "private_metadata": meta,
        "title": _plain(title, 24),
        "submit": _plain(submit, 24),
        "close": _plain("Cancel", 24),
        "blocks": blocks,
    }


def _context(view: InterruptView) -> dict[str, Any]:
    text = view.summary or f"A question on thread {view.thread}"
    return {"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn(text)[:2900]}}


def reject_modal(view: InterruptView, meta: str) -> dict[str, Any]:
    """The modal that asks why a call is rejected (the reason is what the model is told)."""
    reason = {
        "type": "input",
        "block_id": _REASON_BLOCK,
        "label": _plain("Reason", 2000),
        "element": {
            "type": "plain_text_input",
            "action_id": _VALUE,
            "multiline": True,
            "max_length": 3000,
        },
    }
    return _modal(REJECT, "Reject", "Reject", meta, [_context(view), reason])


def respond_modal(view: InterruptView, meta: str) -> dict[str, Any]:
    """The modal that takes a text answer given in place of the tool."""
    answer = {
        "type": "input",
        "block_id": _ANSWER_BLOCK,
        "label": _plain("The tool's answer", 2000),
        "hint": _plain("The agent reads this as the tool's result; the tool does not run.", 2000),
        "element": {
            "type": "plain_text_input",
            "action_id": _VALUE,
            "multiline": True,
            "max_length": 3000,
        },
    }
    return _modal(RESPOND, "Respond", "Send", meta, [_context(view), answer])


def reason_of(values: dict[str, Any]) -> str | None:
    """The reason typed into a reject modal (None: left empty)."""
    text = _typed(values, _REASON_BLOCK)
    return text.strip() or None if isinstance(text, str) else None


def response_of(values: dict[str, Any]) -> str | None:
    """The answer typed into a respond modal (None: left empty)."""
    text = _typed(values, _ANSWER_BLOCK)
    return text if isinstance(text, str) and text.strip() else None


def _typed(values: dict[str, Any], block: str) -> Any:
    element = values.get(block, {}).get(_VALUE, {})
    return element.get("value") if isinstance(element, dict) else None


def _kind(spec: dict[str, Any]) -> str:
    """How an edit modal asks for one property: text, number, select, checkbox or json."""
    enum = spec.get("enum")
    if (
        isinstance(enum, list)
        and 0 < len(enum) <= 100
        and all(isinstance(v, str | int | float | bool) or v is None for v in enum)
    ):
        return "select"
    kind = spec.get("type")
    if kind == "string":
        return "text"
    if kind in ("integer", "number"):
        return "number"
    if kind == "boolean":
        return "checkbox"
    return "json"


def _option(value: Any) -> dict[str, Any]:
    encoded = msgspec.json.encode(value).decode()
    return {"text": _plain(str(value) if isinstance(value, str) else encoded, 75), "value": encoded}


def edit_modal(view: InterruptView, meta: str) -> dict[str, Any]:
    """The modal that edits a call's arguments: one field per property of the tool's schema."""
    info = _info(view)
    schema = info.get("schema") if isinstance(info.get("schema"), dict) else {}
    assert isinstance(schema, dict)
    arguments = info.get("arguments") if isinstance(info.get("arguments"), dict) else {}
    assert isinstance(arguments, dict)
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    assert isinstance(properties, dict)
    required = set(schema.get("required") or ())
    blocks: list[dict[str, Any]] = [_context(view)]
    for name, spec in list(properties.items())[:_MAX_FIELDS]:
        spec = spec if isinstance(spec, dict) else {}
        blocks.append(
            _field(str(name), spec, arguments.get(name), name in arguments, name in required)
        )
    if view.confirm:
        # The question asks for a confirmation step: an edit lets the call run too.
        option = {"text": _plain("Run the call with these arguments", 75), "value": _TRUE}
        blocks.append(
            {
                "type": "input",
                "block_id": CONFIRM_BLOCK,
                "label": _plain("Confirm", 2000),
                "element": {"type": "checkboxes", "action_id": _VALUE, "options": [option]},
            }
        )
    return _modal(EDIT, "Edit the arguments", "Approve edited", meta, blocks)


def edit_confirmed(values: dict[str, Any]) -> bool:
    """Whether the confirmation box of an edit modal was ticked."""
    element = values.get(CONFIRM_BLOCK, {}).get(_VALUE)
    return isinstance(element, dict) and bool(element.get("selected_options"))


def _field(name: str, spec: dict[str, Any], current: Any, given: bool, required: bool) -> Any:
    kind = _kind(spec)
    label = spec.get("title") if isinstance(spec.get("title"), str) else name
    element: dict[str, Any]
    if kind == "text":
        element = {"type": "plain_text_input", "action_id": _VALUE}
        if isinstance(current, str) and current:
            element["initial_value"] = current[:3000]
            element["multiline"] = len(current) > 80 or "\n" in current
    elif kind == "number":
        element = {
            "type": "number_input",
            "action_id": _VALUE,
            "is_decimal_allowed": spec.get("type") == "number",
        }
        if (
            isinstance(current, int | float)
            and not isinstance(current, bool)
            and math.isfinite(current)
        ):
            element["initial_value"] = str(current)
    elif kind == "select":
        options = [_option(v) for v in spec["enum"]]
        element = {"type": "static_select", "action_id": _VALUE, "options": options}
        if given:
            chosen = [o for o in options if o["value"] == msgspec.json.encode(current).decode()]
            if chosen:
                element["initial_option"] = chosen[0]
    elif kind == "checkbox":
        option = {"text": _plain(str(label), 75), "value": _TRUE}
        element = {"type": "checkboxes", "action_id": _VALUE, "options": [option]}
        if current is True:
            element["initial_options"] = [option]
    else:
        element = {"type": "plain_text_input", "action_id": _VALUE, "multiline": True}
        if given:
            element["initial_value"] = arguments_json(current)[:3000]
    block: dict[str, Any] = {
        "type": "input",
        "block_id": name[:255],
        "label": _plain(str(label), 2000),
        "element": element,
        # A checkbox left unticked is a value (false), never a missing one.
        "optional": kind == "checkbox" or not required,
    }
    hint = spec.get("description")
    if kind == "json":
        hint = (f"{hint} " if isinstance(hint, str) else "") + "(JSON)"
    if isinstance(hint, str) and hint:
        block["hint"] = _plain(hint, 2000)
    return block


def edited_arguments(
    view: InterruptView, values: dict[str, Any]
) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """The arguments an edit modal's state holds, checked against the tool's schema.

    Returns the arguments and no errors, or None and the errors by block id (Slack's
    ``response_action: errors`` shows each under its field).
    """
    info = _info(view)
    schema = info.get("schema") if isinstance(info.get("schema"), dict) else None
    if schema is None:
        return None, {}
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    assert isinstance(properties, dict)
    shown = [str(name) for name in list(properties)[:_MAX_FIELDS]]
    before = info.get("arguments") if isinstance(info.get("arguments"), dict) else {}
    assert isinstance(before, dict)
    # Properties beyond what the modal shows keep their values.
    arguments: dict[str, Any] = {k: v for k, v in before.items() if k not in shown}
    errors: dict[str, str] = {}
    for name in shown:
        spec = properties[name] if isinstance(properties[name], dict) else {}
        element = values.get(name[:255], {}).get(_VALUE)
        if not isinstance(element, dict):
            continue
        try:
            value, present = _read(_kind(spec), spec, element)
        except ValueError as exc:
            errors[name[:255]] = str(exc)
            continue
        if present:
            arguments[name] = value
    if errors:
        return None, errors
    problem = schema_problem(arguments, schema)
    if problem is not None:
        return None, {_block_for(problem, shown): problem[:150]}
    return arguments, {}


def _read(kind: str, spec: dict[str, Any], element: dict[str, Any]) -> tuple[Any, bool]:
    if kind == "checkbox":
        return bool(element.get("selected_options")), True
    if kind == "select":
        chosen = element.get("selected_option")
        if not isinstance(chosen, dict):
            return None, False
        return msgspec.json.decode(str(chosen.get("value"))), True
    text = element.get("value")
    if text is None or (kind != "text" and not str(text).strip()):
        return None, False
    if kind == "text":
        return str(text), True
    if kind == "number":
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number") from None
        if spec.get("type") == "integer":
            if not number.is_integer():
                raise ValueError(f"{text} is not a whole number")
            return int(number), True
        return number, True
    try:
        return msgspec.json.decode(str(text)), True
    except msgspec.DecodeError:
        raise ValueError('not valid JSON: write it as JSON, e.g. ["a", "b"] or {"k": 1}') from None


def _block_for(problem: str, shown: list[str]) -> str:
    """The field a schema problem is about (else the first one), for Slack to show it under."""
    for name in sorted(shown, key=len, reverse=True):
        if f"'{name}'" in problem or f"/{name}" in problem or f".{name}" in problem:
            return name[:255]
    return shown[0][:255] if shown else "decide"
