"""A message on a waiting task, read as answers to its questions and recorded by `App.decide`.

The shape of an answer (documented in the A2A how-to):

- a data part per question: ``{"interrupt": ID, "decision": "approve"}``,
  ``{"interrupt": ID, "decision": "edit", "arguments": {...}}``,
  ``{"interrupt": ID, "decision": "reject", "message": "why"}``,
  ``{"interrupt": ID, "decision": "respond", "content": "..."}`` for a tool call waiting for
  approval; ``{"interrupt": ID, "answer": VALUE}`` for any other question. ``"reason"`` is
  kept with the decision. ``"interrupt"`` may be left out when one question waits.
- plain text when one question waits: ``approve`` or ``reject`` for an approval, the text
  itself as the answer to any other question.

Every refusal is an A2A error (``InvalidParamsError``, JSON-RPC -32602) whose data says what
went wrong (``{"error": "not_authorized", "rule": ..., ...}``); nothing is recorded and the
task still waits. A question someone else decided first is not decided again: the call goes
on, and its task says who decided.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from a2a.helpers.proto_helpers import get_data_parts, get_text_parts
from a2a.server.context import ServerCallContext
from a2a.types import InvalidParamsError, InvalidRequestError, Message

from .._errors import (
    CheckpointNotFound,
    InterruptAlreadyResolved,
    InvalidResume,
    NotAuthorized,
    ThreadBusy,
    UnknownInterrupt,
)
from ..runtime import App, Decision, Interrupt
from ._serve_tasks import identity_of, is_approval

__all__ = ["DECISIONS", "OUTCOME_KEY", "Outcome", "decide_message"]

DECISIONS: Final = ("approve", "edit", "reject", "respond")
"""The decisions a caller may send on a tool call waiting for approval."""

OUTCOME_KEY: Final = "interlock.a2a.outcome"
"""Where the outcome of a message's answers is kept in the call's ``ServerCallContext.state``."""


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What a message on a waiting task did."""

    decided: tuple[Decision, ...] = ()
    """The decisions it recorded."""
    earlier: tuple[Decision, ...] = field(default_factory=tuple)
    """Decisions someone recorded first, which it did not repeat."""

    def notes(self) -> str:
        """In words, for the status message that follows."""
        said = []
        for d in self.decided:
            if not d.final:
                said.append(
                    f"Approval of {d.interrupt_id} by {d.actor} recorded "
                    f"({len(d.approved_by)} of {d.approvals})."
                )
        for d in self.earlier:
            by = d.actor or "someone"
            said.append(
                f"Interrupt {d.interrupt_id} was already decided by {by} "
                f"({_said(d.answer)}); it was not decided again."
            )
        return "".join(s + " " for s in said)


def _said(answer: Any) -> str:
    if isinstance(answer, Mapping) and "action" in answer:
        return str(answer["action"])
    return answer if isinstance(answer, str) else repr(answer)


def _whole(value: Any) -> Any:
    """``value`` with the whole numbers a protobuf ``Value`` turned into floats made whole."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {k: _whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole(v) for v in value]
    return value


def _refused(error: str, message: str, **data: str) -> InvalidParamsError:
    return InvalidParamsError(message=message, data={"error": error, **data})


def _one(pending: Sequence[Interrupt]) -> Interrupt:
    if len(pending) != 1:
        ids = ", ".join(i.id for i in pending)
        raise _refused(
            "ambiguous",
            f"{len(pending)} questions wait on this task ({ids}): answer each with a data part "
            '{"interrupt": ID, ...}',
            pending=ids,
        )
    return pending[0]


def _from_data(item: Mapping[str, Any], pending: Sequence[Interrupt]) -> tuple[Interrupt, Any]:
    target = item.get("interrupt")
    if target is None:
        asked = _one(pending)
    else:
        found = [i for i in pending if i.id == target]
        if not found:
            ids = ", ".join(i.id for i in pending)
            raise _refused(
                "unknown_interrupt",
                f"no question {target!r} waits on this task; the ones waiting: {ids}",
                interrupt=str(target),
                pending=ids,
            )
        asked = found[0]
    if is_approval(asked):
        decision = item.get("decision")
        if decision not in DECISIONS:
            raise _refused(
                "invalid_answer",
                f"interrupt {asked.id} is a tool call waiting for approval: its data part needs "
                f'"decision": one of {", ".join(DECISIONS)} (got {decision!r})',
                interrupt=asked.id,
            )
        rest = {k: v for k, v in item.items() if k not in ("interrupt", "decision", "reason")}
        return asked, {"action": decision, **rest}
    if "answer" not in item:
        raise _refused(
            "invalid_answer",
            f"interrupt {asked.id} is a question: send "
            f'{{"interrupt": "{asked.id}", "answer": ...}}',
            interrupt=asked.id,
        )
    return asked, item["answer"]


def read_answers(
    message: Message, pending: Sequence[Interrupt]
) -> tuple[dict[str, Any], str | None]:
    """``({interrupt_id: answer}, reason)`` from a message; refused with an A2A error."""
    answers: dict[str, Any] = {}
    reason: str | None = None
    for item in _whole(get_data_parts(list(message.parts))):
        if not isinstance(item, Mapping):
            continue
        if isinstance(item.get("reason"), str):
            reason = item["reason"]
        asked, answer = _from_data(item, pending)
        answers[asked.id] = answer
    if answers:
        return answers, reason
    text = " ".join(get_text_parts(list(message.parts))).strip()
    if not text:
        raise _refused("no_answer", "the message answers no question: send text or a data part")
    asked = _one(pending)
    if is_approval(asked):
        word = text.lower()
        if word not in ("approve", "reject"):
            raise _refused(
                "invalid_answer",
                f'interrupt {asked.id} waits for approval: answer "approve" or "reject" in '
                'text, or edit with a data part {"interrupt": ID, "decision": "edit", '
                '"arguments": {...}}',
                interrupt=asked.id,
            )
        return {asked.id: word}, None
    return {asked.id: text}, None


async def decide_message(
    app: App[Any], message: Message, context: ServerCallContext, asked: Sequence[str] = ()
) -> None:
    """Record what a message on a waiting task answers, before the task goes on.

    A message on a task with nothing waiting records nothing; when the questions it answers
    (the ones it names, or ``asked``: those the task showed) were decided meanwhile, it says
    who decided them. The outcome is left in the call's state for the executor
    (`OUTCOME_KEY`).

    Raises:
        InvalidParamsError: The message is not an answer, or the caller may not decide (its
            role, its tool scope, the question's authority); nothing was recorded.
        InvalidRequestError: The thread is being continued right now: try again.
    """
    thread = message.task_id
    try:
        snapshot = await app.get_state(thread)
    except CheckpointNotFound:
        return  # the SDK says the task does not exist
    pending = [i for i in snapshot.interrupts if i.needs_answer]
    if not pending:
        # The questions the task showed were decided meanwhile, elsewhere (the web inbox, the
        # command line, another caller): nothing is decided again, and the reply says who did.
        named = [
            item["interrupt"]
            for item in get_data_parts(list(message.parts))
            if isinstance(item, Mapping) and isinstance(item.get("interrupt"), str)
        ]
        earlier = []
        for interrupt_id in named or asked:
            question = await app.question(interrupt_id)
            if question is not None and question.decision is not None:
                earlier.append(question.decision)
        if earlier:
            context.state[OUTCOME_KEY] = Outcome(earlier=tuple(earlier))
        return
    answers, reason = read_answers(message, pending)
    identity = identity_of(context)
    if identity is not None:
        if not identity.can("approver"):
            raise _refused(
                "not_authorized",
                f"{identity.name} is a {identity.role} and may not decide: it needs the "
                "approver role; nothing was recorded",
                rule="role",
            )
        for waiting in pending:
            tool = waiting.info.get("tool") if isinstance(waiting.info, Mapping) else None
            if waiting.id in answers and not identity.sees_tool(tool):
                raise _refused(
                    "not_authorized",
                    f"{identity.name} may not decide calls of {tool}: it is outside its tool "
                    "scope; nothing was recorded",
                    rule="scope",
                    interrupt=waiting.id,
                )
    actor = identity.principal() if identity is not None else None
    nonce = message.message_id or None
    try:
        decided = await app.decide(thread, answers, actor=actor, reason=reason, nonce=nonce)
    except InterruptAlreadyResolved as exc:
        context.state[OUTCOME_KEY] = Outcome(earlier=(exc.resolved_value,))
        return
    except NotAuthorized as exc:
        raise _refused("not_authorized", str(exc), rule=exc.rule) from exc
    except (InvalidResume, UnknownInterrupt) as exc:
        raise _refused("invalid_answer", str(exc)) from exc
    except ThreadBusy as exc:
        raise InvalidRequestError(
            message=f"{exc}; send the answer again in a moment",
            data={"error": "thread_busy"},
        ) from exc
    context.state[OUTCOME_KEY] = Outcome(decided=tuple(decided))
