"""The server's one way to record a decision, whatever the surface a person used.

The HTTP API, the web inbox (through it), Slack and the links sent by e-mail all decide
through `decide_as`: one rate limit, one check of the question the person was shown, one
authority check (the runtime's, in `App.decide`), one set of refusals and one rule for who
continues the thread. A surface only says who decides, what they answered, and how to tell a
retried request from a second decision (its nonce); it turns a refusal (`ApiError`) into its
own kind of answer: a JSON body, an ephemeral Slack message, a page.

Invariant: a refusal records nothing. Every check that can refuse runs before `App.decide`,
or is `App.decide`'s own (which records nothing when it refuses).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, Final

from .._errors import (
    CheckpointCorrupt,
    InterlockError,
    InterruptAlreadyResolved,
    InvalidResume,
    NotAuthorized,
    ThreadBusy,
    UnknownInterrupt,
)
from .._principals import is_principal, principal_key
from ..runtime import Authority, Decision, Question, needs_confirmation
from ..stores import InterruptRecord, PrincipalRecord, Store
from ._auth import Identity
from ._errors import ApiError
from ._served import Served
from ._state import FailureRecorder, ServerState
from ._store_auth import StoreAuth
from ._views import decision_body

__all__ = [
    "FOUR_EYES",
    "Decided",
    "background",
    "decide_as",
    "find_question",
    "identity_of",
    "principal_directory",
    "require_started",
]

log = logging.getLogger("interlock.server")

FOUR_EYES: Final = Authority(not_starter=True)
"""The rule ``four_eyes=True`` adds to every decision made through the server."""


@dataclass(frozen=True, kw_only=True)
class Decided:
    """What `decide_as` recorded (or found recorded, for a request sent again)."""

    served: Served
    """The served app whose question it was."""
    decision: Decision
    """The decision as recorded (``final`` False for one approval of several needed)."""
    replayed: bool
    """True when the same decision, sent before with the same nonce, was found recorded."""
    continued: bool
    """Whether the thread was continued (``wait``) or handed to the server's background."""


def require_started(state: ServerState) -> None:
    """Refuse (503) what needs the background while the server's lifespan is not running."""
    if not state.ready:
        raise ApiError(
            503,
            "not_started",
            "the interlock server's lifespan is not running: when you mount it, pass its "
            "lifespan to your app (see interlock.server.create_app)",
            headers={"Retry-After": "5"},
        )


def background(
    state: ServerState,
    call: Callable[[], Coroutine[Any, Any, Any]],
    thread: str,
    app: FailureRecorder,
) -> bool:
    """``state.runs.submit``, refused (503) while the server's lifespan is not running."""
    require_started(state)
    return state.runs.submit(call, thread, app)


async def find_question(
    state: ServerState, identity: Identity | None, interrupt_id: str
) -> tuple[Served, Question]:
    """The question with this id and the app that asked it, in ``identity``'s scope.

    A question outside the scope is not this identity's to hear of: it is answered as an
    unknown id is (the same 404), and so is a damaged one outside the scope. With
    ``identity`` None, every question is in scope.
    """
    for served in state.served.values():
        try:
            question = await served.question(interrupt_id)
        except CheckpointCorrupt as exc:
            row = await served.row(interrupt_id)
            if row is not None and identity is not None and not identity.sees(row.thread, row.tool):
                continue
            raise ApiError(
                500, "damaged_record", f"{exc}; restore the store from a backup"
            ) from exc
        if question is not None and (
            identity is None or identity.sees(question.thread, question.tool)
        ):
            return served, question
    raise ApiError(
        404,
        "unknown_interrupt",
        f"no interrupt {interrupt_id}; list pending ones at /v1/interrupts",
    )


def principal_directory(state: ServerState) -> Store:
    """The store whose principals the server knows: its `StoreAuth`'s, else the served app's.

    Serving several apps without a `StoreAuth`, the first app's store is the directory.
    """
    if isinstance(state.auth, StoreAuth):
        return state.auth.store
    return next(iter(state.served.values())).store


def identity_of(principal: PrincipalRecord) -> Identity:
    """The identity a principal decides as without a token: its name, role and groups.

    Its scopes are every tool and every thread: what it may decide is the questions'
    authority's to say (the runtime checks it), not a token's.
    """
    return Identity(name=principal.name, role=principal.role, groups=principal.groups)


async def decide_as(
    state: ServerState,
    identity: Identity,
    interrupt_id: str,
    answer: Any,
    *,
    nonce: str,
    payload_hash: str,
    reason: str | None = None,
    override: str | None = None,
    confirmed: bool = False,
    wait: bool = False,
) -> Decided:
    """Record ``identity``'s ``answer`` to a question, as every surface of the server does.

    Args:
        state: The server.
        identity: Who decides (a token's identity, a signed-in person, a mapped Slack user).
        interrupt_id: The question.
        answer: The answer, as `App.decide` takes it.
        nonce: The request's idempotency key: the same decision sent again with it is found
            recorded (``replayed``), never recorded twice. A surface makes it from what
            identifies a retry: ``<who>.<what>``, where a new ``<what>`` under the same
            ``<who>`` on a decided question is a key used for another decision.
        payload_hash: The question's hash as the person was shown it.
        reason: Why, in their words.
        override: An admin's reason for deciding outside the question's authority.
        confirmed: The person went through the question's confirmation step.
        wait: Continue the thread before returning (else the server's background does, when
            the server continues threads).

    Raises:
        ApiError: Nothing was recorded: ``rate_limited``, ``unknown_interrupt``,
            ``already_decided``, ``not_pending``, ``idempotency_key_reused``,
            ``question_changed``, ``confirmation_required``, ``not_started``, ``four_eyes``,
            ``not_authorized``, ``invalid_answer`` or ``thread_busy``.
    """
    wait_for = state.limiter.take(identity.name)
    if wait_for > 0:
        state.metrics.decisions.labels("rate_limited").inc()
        raise ApiError(
            429,
            "rate_limited",
            f"{identity.name} sent too many decisions; retry in {wait_for:.1f} s",
            headers={"Retry-After": str(max(1, round(wait_for)))},
        )
    served, question = await find_question(state, identity, interrupt_id)
    row = question.record
    mine = nonce.split(".")[0]
    if row.status != "pending":
        vote = await _vote_resolved_since(
            served, row, identity, answer, nonce=nonce, payload_hash=payload_hash, reason=reason
        )
        if vote is not None:
            return _replayed(state, served, vote)
        return _refused(state, served, row, mine, nonce)
    interrupt = question.interrupt
    # The runtime refuses a second vote by one person on a quorum question, and gives back the
    # vote itself for the same request sent again: a success now, after this identity has
    # voted, is that vote.
    voted = interrupt.approvals > 1 and _among(identity, interrupt.approved_by)
    if question.payload_hash != payload_hash:
        state.metrics.decisions.labels("stale").inc()
        raise ApiError(
            412,
            "question_changed",
            "the question is not the one you were shown (its payload hash differs); "
            "read it again and decide on what it says now",
        )
    if needs_confirmation(interrupt.info, answer) and not confirmed:
        state.metrics.decisions.labels("unconfirmed").inc()
        raise ApiError(
            428,
            "confirmation_required",
            "this question asks for a confirmation step before it is approved: show the "
            "person what will run, and send the decision again with confirmed set once they "
            "confirm",
        )
    if state.continue_runs and not wait:
        # Checked before the decision is recorded: it would be continued by nobody.
        require_started(state)
    starter = question.meta.get("started_by")
    try:
        # Who may decide is the runtime's to check (the question's authority, the App's, and
        # this server's four eyes as one more rule): the same check as on every surface.
        decisions = await served.app.decide(
            row.thread,
            {interrupt_id: answer},
            actor=identity.principal(),
            require=FOUR_EYES if state.four_eyes else None,
            override=override,
            reason=reason,
            nonce=nonce,
            seen={interrupt_id: payload_hash},
        )
    except InterruptAlreadyResolved:
        fresh = await served.row(interrupt_id)
        assert fresh is not None
        return _refused(state, served, fresh, mine, nonce)
    except NotAuthorized as exc:
        # Separation of duties keeps its old name; any other rule is "not_authorized".
        error = "four_eyes" if exc.rule == "starter" else "not_authorized"
        state.metrics.decisions.labels(error).inc()
        raise ApiError(403, error, str(exc)) from exc
    except InvalidResume as exc:
        state.metrics.decisions.labels("invalid").inc()
        raise ApiError(422, "invalid_answer", str(exc)) from exc
    except UnknownInterrupt as exc:
        raise ApiError(404, "unknown_interrupt", str(exc)) from exc
    except ThreadBusy as exc:
        state.metrics.decisions.labels("busy").inc()
        raise ApiError(
            409, "thread_busy", f"{exc}; try again in a moment", headers={"Retry-After": "1"}
        ) from exc
    decision = decisions[0]
    if voted:
        return _replayed(state, served, decision)
    final = decision.final
    state.metrics.decisions.labels("recorded" if final else "approval").inc()
    continued = False
    metadata = {"started_by": starter, "continued_by": identity.name}
    if final and wait:
        # The decision is recorded; the continuation's refusal (a run elsewhere took the
        # thread) is not this request's failure: the thread's view says where it is.
        try:
            await served.app.resume(row.thread, metadata=metadata)
            continued = True
        except ThreadBusy:
            pass
        except InterlockError as exc:
            # One that running again would meet again leaves the thread failed, as its view
            # shows; anything else is this request's error.
            if await served.app.record_failure(row.thread, exc) is None:
                raise
            log.info("continuing thread %r failed: %s", row.thread, exc)
            continued = True
    elif final and state.continue_runs and await served.app.continued_by() == "caller":
        continued = background(
            state, lambda: served.app.resume(row.thread, metadata=metadata), row.thread, served.app
        )
    return Decided(served=served, decision=decision, replayed=False, continued=continued)


def _replayed(state: ServerState, served: Served, decision: Decision) -> Decided:
    """The outcome of a decision sent again (the same nonce)."""
    state.metrics.decisions.labels("replayed").inc()
    return Decided(served=served, decision=decision, replayed=True, continued=False)


async def _vote_resolved_since(
    served: Served,
    row: InterruptRecord,
    identity: Identity,
    answer: Any,
    *,
    nonce: str,
    payload_hash: str,
    reason: str | None,
) -> Decision | None:
    """This identity's vote sent with ``nonce`` on a quorum question others have resolved
    since (the runtime gives it back, and nothing else, for a question no longer pending)."""
    decided = served.decision(row)
    if decided is None or decided.nonce == nonce or not _among(identity, decided.approved_by):
        return None
    try:
        votes = await served.app.decide(
            row.thread,
            {row.id: answer},
            actor=identity.principal(),
            reason=reason,
            nonce=nonce,
            seen={row.id: payload_hash},
        )
    except (InterruptAlreadyResolved, InvalidResume, UnknownInterrupt, NotAuthorized):
        return None
    return votes[0]


def _among(identity: Identity, names: Iterable[str]) -> bool:
    """Whether ``identity`` is one of ``names``, compared as principals are (normal form)."""
    key = principal_key(identity.name)
    return any(is_principal(name, key) for name in names)


def _refused(
    state: ServerState, served: Served, row: InterruptRecord, mine: str, nonce: str
) -> Decided:
    """The outcome of a decision on an interrupt that is no longer pending: its replay, or
    the refusal that says who decided it and when."""
    decided = served.decision(row)
    if decided is not None and decided.nonce == nonce:
        return _replayed(state, served, decided)
    view = decision_body(decided) if decided is not None else None
    if decided is not None and (decided.nonce or "").split(".")[0] == mine:
        state.metrics.decisions.labels("key_reused").inc()
        raise ApiError(
            422,
            "idempotency_key_reused",
            "this Idempotency-Key was used for a different decision on this interrupt; "
            "use a new key for a new request",
            decision=view,
        )
    state.metrics.decisions.labels("conflict").inc()
    if decided is None:
        raise ApiError(
            409, "not_pending", f"interrupt {row.id} is {row.status}; there is nothing to decide"
        )
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(decided.decided_at))
    raise ApiError(
        409,
        "already_decided",
        f"already decided by {decided.actor or 'someone'} at {when}",
        decision=view,
    )
