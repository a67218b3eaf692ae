"""``interlock approve | reject | edit | respond | answer``: a person's decision, recorded.

Each command reads the question, turns the verb into the answer that question takes, records it
with the hash of the question as read (``seen``: a question that changed since is refused),
and by default continues the thread in this process. What each verb answers:

==========  ===============================  ====================  ==================
verb        agent tool call                  ``approve()``         any other question
==========  ===============================  ====================  ==================
approve     ``{"action": "approve"}``        True                  True
reject      ``{"action": "reject", ...}``    False                 False
edit        ``{"action": "edit", ...}``      refused               refused
respond     ``{"action": "respond", ...}``   refused               refused
answer      the JSON given                   the JSON given        the JSON given
==========  ===============================  ====================  ==================

A question that several people must approve counts each approval as one person's vote; the
thread goes on only after the last one needed. A refusal records nothing and exits 1.
"""

from __future__ import annotations

import dataclasses
import getpass
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import click
from rich.markup import escape

from .._args import check_name
from .._errors import InterlockError, InterruptAlreadyResolved, InvalidResume, ThreadBusy
from .._principals import principal_key
from ..runtime import App, Decision, Interrupt, Principal, RunResult, needs_confirmation
from ..stores import Store
from ._load import Target, open_target, target_options
from ._output import Refused, err_console, out_console, run
from ._read import QuestionForm, form_of, question, question_hash
from ._views import again, describe_answer, describe_decision, print_outcome

__all__ = ["actor_name", "answer", "approve", "edit", "reject", "respond"]

Verb = Literal["approve", "reject", "edit", "respond", "answer"]

_F = TypeVar("_F", bound=Callable[..., Any])


def _decision_options(fn: _F) -> _F:
    """The options every decision command shares."""
    fn = target_options(fn)
    fn = click.option(
        "--continue/--no-continue",
        "continue_",
        default=True,
        help="Continue the thread here once the decision is recorded (default), or only record it.",
    )(fn)
    fn = click.option(
        "--yes",
        "confirmed",
        is_flag=True,
        help=(
            "Confirm without being asked, for a question that asks for a confirmation step "
            "before it is approved (a script that has shown the question)."
        ),
    )(fn)
    fn = click.option(
        "--nonce",
        metavar="KEY",
        help="An idempotency key: sending the same decision again with it is not an error.",
    )(fn)
    fn = click.option(
        "--override",
        metavar="REASON",
        help=(
            "Decide outside the question's authority (who may decide it), for this reason: "
            "only a principal with the admin role may; recorded and audited."
        ),
    )(fn)
    fn = click.option(
        "--actor",
        metavar="NAME",
        help=(
            "Who decides (default: your user name on this machine). A principal of the store "
            "decides with its groups and role."
        ),
    )(fn)
    return fn


@dataclass(frozen=True, kw_only=True)
class _Request:
    """One decision, as the command line gave it."""

    verb: Verb
    interrupt_id: str
    reason: str | None = None
    arguments: dict[str, Any] | None = None
    content: str | None = None
    value: Any = None
    actor: str | None = None
    nonce: str | None = None
    continue_: bool = True
    override: str | None = None
    confirmed: bool = False


@click.command()
@click.argument("interrupt_id", metavar="ID")
@click.option("--reason", help="Why, for the record.")
@_decision_options
def approve(interrupt_id: str, reason: str | None, **options: Any) -> None:
    """Approve a question: a tool call runs as shown; an approve() question gets True."""
    _decide(_Request(verb="approve", interrupt_id=interrupt_id, reason=reason, **_own(options)))


@click.command()
@click.argument("interrupt_id", metavar="ID")
@click.option("--reason", required=True, help="Why; an agent's model is told it.")
@_decision_options
def reject(interrupt_id: str, reason: str, **options: Any) -> None:
    """Reject a question: a tool call does not run and the model reads the reason."""
    _decide(_Request(verb="reject", interrupt_id=interrupt_id, reason=reason, **_own(options)))


@click.command()
@click.argument("interrupt_id", metavar="ID")
@click.option(
    "--arguments",
    "arguments_json",
    required=True,
    metavar="JSON",
    help="The tool call's new arguments, a JSON object checked against the tool's schema.",
)
@click.option("--reason", help="Why, for the record.")
@_decision_options
def edit(interrupt_id: str, arguments_json: str, reason: str | None, **options: Any) -> None:
    """Run a waiting tool call with other arguments (tool calls only)."""
    arguments = _json(arguments_json, "'--arguments'")
    if not isinstance(arguments, dict):
        raise click.BadParameter(
            'give a JSON object of the tool\'s arguments, such as \'{"command": "ls"}\'',
            param_hint="'--arguments'",
        )
    request = _Request(
        verb="edit", interrupt_id=interrupt_id, reason=reason, arguments=arguments, **_own(options)
    )
    _decide(request)


@click.command()
@click.argument("interrupt_id", metavar="ID")
@click.argument("content", metavar="TEXT")
@click.option("--reason", help="Why, for the record.")
@_decision_options
def respond(interrupt_id: str, content: str, reason: str | None, **options: Any) -> None:
    """Answer in place of the tool: the model reads TEXT as the tool's result (tool calls only)."""
    request = _Request(
        verb="respond", interrupt_id=interrupt_id, reason=reason, content=content, **_own(options)
    )
    _decide(request)


@click.command()
@click.argument("interrupt_id", metavar="ID")
@click.argument("value_json", metavar="JSON")
@click.option("--reason", help="Why, for the record.")
@_decision_options
def answer(interrupt_id: str, value_json: str, reason: str | None, **options: Any) -> None:
    """Answer any question with a JSON value (checked against its answer schema).

    Quote the JSON for the shell: interlock answer ID '{"plan": "pro"}'. A string is
    '"text"'; true, false, numbers and null are written as they are.
    """
    value = _json(value_json, "'JSON'")
    request = _Request(
        verb="answer", interrupt_id=interrupt_id, reason=reason, value=value, **_own(options)
    )
    _decide(request)


def _own(options: dict[str, Any]) -> dict[str, Any]:
    """The shared options a `_Request` keeps (``--app``/``--store`` stay in the context)."""
    return {k: options[k] for k in ("actor", "nonce", "continue_", "override", "confirmed")}


def _json(text: str, hint: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(
            f'{text!r} is not JSON ({exc}); quote it for the shell, e.g. \'{{"plan": "pro"}}\' '
            "or '\"some text\"'",
            param_hint=hint,
        ) from exc


def actor_name(given: str | None) -> str:
    """``--actor``, or else the user name this process runs as; refused unless a safe name."""
    if given:
        name = given
    else:
        try:
            name = getpass.getuser()
        except (OSError, KeyError) as exc:
            raise click.UsageError(
                f"cannot tell who you are ({exc}): name yourself with --actor NAME"
            ) from exc
    try:
        check_name(name, "actor")
        principal_key(name, "actor")  # decided as a principal: one name however it is typed
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--actor'") from exc
    return name


@dataclass(frozen=True, kw_only=True)
class _Outcome:
    """What a decision command did."""

    interrupt: Interrupt
    """The question, as read."""
    value: Any
    """The answer sent."""
    decision: Decision
    """The decision the store holds for it (this one, or an earlier one with the same nonce)."""
    repeated: bool
    """The question was decided before this command read it; the nonce matched."""
    result: RunResult[Any] | None = None
    """How the run ended, when the command continued the thread."""
    failed: str | None = None
    """Why continuing the thread failed, if it did."""


def _decide(request: _Request) -> None:
    ctx = click.get_current_context()
    actor = actor_name(request.actor)
    target = open_target(ctx.params["app_spec"], ctx.params["store_url"], decides=True)
    app = target.app
    assert app is not None  # decides=True: open_target refused the command without one

    async def body() -> _Outcome:
        try:
            interrupt, row = await question(target, request.interrupt_id)
            value = _answer_for(request, interrupt)
            if needs_confirmation(interrupt.info, value) and not request.confirmed:
                _confirm(interrupt)
            who = await _principal(target, actor)
            decided = await _record(app, interrupt, value, request, who, target)
            done = _Outcome(
                interrupt=interrupt,
                value=value,
                decision=next(d for d in decided if d.interrupt_id == interrupt.id),
                repeated=row.status != "pending",
            )
            # A vote (one approval of several) leaves the question open: nothing to continue.
            if not request.continue_ or not done.decision.final:
                return done
            try:
                result = await app.resume(interrupt.thread, actor=actor)
            except InterlockError as exc:
                return dataclasses.replace(done, failed=str(exc))
            return dataclasses.replace(done, result=result)
        finally:
            await target.aclose()

    _report(run(body), request, actor)


def _report(done: _Outcome, request: _Request, actor: str) -> None:
    out = out_console()
    i, d = done.interrupt, done.decision
    thread = escape(i.thread)
    if not d.final:
        out.print(
            f"Recorded {escape(d.actor or actor)}'s approval of {i.id} (thread {thread}): "
            f"{len(d.approved_by)} of {d.approvals} ({escape(', '.join(d.approved_by))}). It "
            f"waits for {d.approvals - len(d.approved_by)} more approval(s) from other people."
        )
        return
    if done.repeated:
        out.print(
            f"Already recorded with nonce {escape(request.nonce or '')}: "
            f"{escape(describe_decision(d))}"
        )
    else:
        out.print(
            f"Recorded: {escape(describe_answer(done.value))} on {i.id} (thread {thread}) by "
            f"{escape(actor)}."
        )
    if done.failed is not None:
        raise Refused(
            f"the decision is recorded, but continuing thread {i.thread!r} failed: "
            f"{done.failed}. Once that is fixed, continue it with: {again('resume', i.thread)}"
        )
    if done.result is None:
        out.print(
            f"The thread waits to be continued; continue it with: "
            f"{escape(again('resume', i.thread))}"
        )
        return
    print_outcome(out, done.result)


async def _record(
    app: App[Any],
    interrupt: Interrupt,
    value: Any,
    request: _Request,
    actor: Principal,
    target: Target,
) -> list[Decision]:
    """Record the decision; turn each refusal into what a person needs to know."""
    try:
        return await app.decide(
            interrupt.thread,
            {interrupt.id: value},
            actor=actor,
            reason=request.reason,
            nonce=request.nonce,
            seen={interrupt.id: question_hash(target, interrupt)},
            override=request.override,
        )
    except InterruptAlreadyResolved as exc:
        first = exc.resolved_value
        who = (
            f": {describe_decision(first)}"
            if isinstance(first, Decision)
            else " (no decision was recorded with it)"
        )
        raise Refused(
            f"interrupt {interrupt.id} is already {exc.status}{who}. Nothing was recorded. See "
            f"what happened next with: {again('history', interrupt.thread)}"
        ) from exc
    except InvalidResume as exc:
        hint = ""
        if request.verb in ("approve", "reject") and form_of(interrupt) == "other":
            hint = (
                f" This question does not take yes or no: answer it with "
                f"{again('answer', interrupt.id, 'JSON')} (see what it takes with "
                f"{again('show', interrupt.id)})."
            )
        raise Refused(f"{_sentence(exc)}{hint}") from exc
    except ThreadBusy as exc:
        raise Refused(
            f"{_sentence(exc)} Nothing was recorded; `interlock pause {interrupt.thread}` asks "
            "the run to stop."
        ) from exc
    except InterlockError as exc:
        raise Refused(f"{_sentence(exc)} Nothing was recorded.") from exc


async def _principal(target: Target, actor: str) -> Principal:
    """Who decides: the store's principal of that name (its groups and role), or else a
    principal of that name alone.

    Raises:
        Refused: The store's principal of that name is disabled.
    """
    return await store_principal(target.store, actor) or Principal(name=actor)


async def store_principal(
    store: Store, actor: str, *, undone: str = "recorded"
) -> Principal | None:
    """The store's principal named ``actor`` (its groups and role); None when the store
    knows no principal of that name. ``undone`` says what a refusal left undone ("nothing
    was recorded").

    Raises:
        Refused: The store's principal of that name is disabled.
    """
    record = await store.get_principal(actor)
    if record is None:
        return None
    if record.disabled:
        raise Refused(
            f"the principal {record.name!r} is disabled; nothing was {undone} "
            f"(`interlock principal enable {record.name}` enables it again)"
        )
    return Principal(name=record.name, groups=record.groups, roles=(record.role,))


def _at_a_terminal() -> bool:
    """Whether a person can be asked: the command reads from a terminal."""
    return sys.stdin.isatty()


def _confirm(interrupt: Interrupt) -> None:
    """Ask the person at the terminal to confirm an approval the question asks them to.

    Raises:
        Refused: They did not confirm, or nobody is at a terminal to ask (``--yes``).
    """
    info = interrupt.info
    asked = info.get("question") if isinstance(info, dict) else None
    if not _at_a_terminal():
        raise Refused(
            f"interrupt {interrupt.id} asks for a confirmation step before it is approved; "
            f"read it with {again('show', interrupt.id)}, then run this command again with "
            "--yes. Nothing was recorded."
        )
    err_console().print(f"This question asks you to confirm: {escape(str(asked or interrupt.id))}")
    if not click.confirm("Approve it?", default=False, err=True):
        raise Refused("Not confirmed; nothing was recorded.")


def _sentence(exc: Exception) -> str:
    """An error's message as a sentence, to write more after it."""
    text = str(exc).rstrip()
    return text if text.endswith((".", "!", "?")) else f"{text}."


def _answer_for(request: _Request, interrupt: Interrupt) -> Any:
    """The answer ``request.verb`` gives to this question, or a refusal saying what fits."""
    form: QuestionForm = form_of(interrupt)
    verb = request.verb
    if form == "pause":
        raise Refused(
            f"interrupt {interrupt.id} is a pause ({interrupt.kind}), not a question: nothing "
            f"to {verb}. Continue the thread with: {again('resume', interrupt.thread)}"
        )
    if verb == "answer":
        return request.value
    if form == "tool_call":
        if verb == "approve":
            return {"action": "approve"}
        if verb == "reject":
            return {"action": "reject", "message": request.reason}
        if verb == "edit":
            return {"action": "edit", "arguments": request.arguments}
        return {"action": "respond", "content": request.content}
    if verb in ("edit", "respond"):
        if form == "approval":
            instead = (
                f"an approve() question: answer it with {again('approve', interrupt.id)} or "
                f"{again('reject', interrupt.id, '--reason', 'WHY')}"
            )
        else:
            instead = (
                f"not a tool call: answer it with {again('answer', interrupt.id, 'JSON')} (see "
                f"what it takes with {again('show', interrupt.id)})"
            )
        raise Refused(
            f"`interlock {verb}` is for an agent's tool calls, and interrupt {interrupt.id} is "
            f"{instead}"
        )
    return verb == "approve"
