"""Resume targets: checked before anything changes, then delivered as decisions."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from .._errors import CheckpointCorrupt, InterruptAlreadyResolved, InvalidResume, UnknownInterrupt
from .._lazy import lazy_module
from ..serde import Codec
from ..stores import InterruptRecord, Resolution, Store
from ._answers import child_plan, deliver
from ._context import interrupt_id
from ._interrupts import lookup_validator
from ._jsonschema import check
from ._level import ESCALATE, Level
from ._records import Command, Decision, Interrupt, decision_dict
from ._signals import Raised
from ._wire import level_from_wire

if TYPE_CHECKING:
    import hashlib
else:  # imported by the first call that needs it, not by `import interlock`
    hashlib = lazy_module("hashlib", globals())

__all__ = [
    "Targets",
    "check_targets",
    "check_votes",
    "decide",
    "decided_unrun",
    "payload_hash",
    "recorded_decision",
    "recorded_vote",
    "register_answer_details",
    "replayed_votes",
    "validate_answer",
]

Targets = Mapping[str, Any] | Command | None
"""What `App.resume` accepts: ``{id_or_key: answer}``, a `Command`, or None (continue pauses).

`App.resume` also takes a bare answer, for the single interrupt waiting for one."""


async def check_targets(
    store: Store,
    codec: Codec,
    level: Level,
    thread: str,
    targets: Targets | object,
    renamed: Mapping[str, str],
) -> dict[str, Any]:
    """Turn resume targets into ``{interrupt_id: answer}``, checking every one.

    ``targets`` that is neither a mapping, a `Command` nor None is a bare answer: it answers
    the single interrupt that waits for one. Nothing is changed here; any refusal raises
    before the caller commits.
    """
    pending = {r.id: r for r in level.pending}
    mapping: Mapping[str, Any] | None
    if isinstance(targets, Command):
        if isinstance(targets.resume, Mapping):
            mapping = targets.resume
        elif targets.resume is None and not level.dynamic_pending():
            mapping = None
        else:
            mapping = _single(level, thread, targets.resume, "Command(resume=...)")
    elif targets is None or isinstance(targets, Mapping):
        mapping = targets
    else:
        mapping = _single(level, thread, targets, "app.resume(thread, answer)")
    if mapping is None:
        return {r.id: None for r in level.pending if not r.interrupt.needs_answer}
    answers: dict[str, Any] = {}
    for target, value in mapping.items():
        target = renamed.get(target, target)
        if target in pending:
            found = [pending[target]]
        else:
            found = [r for r in level.pending if r.interrupt.key == target]
        if not found:
            stored = await store.get_interrupt(target)
            if stored is not None and stored.thread == thread and stored.status != "pending":
                raise InterruptAlreadyResolved(
                    target,
                    status=stored.status,
                    resolved_value=recorded_decision(codec, stored),
                )
            raise UnknownInterrupt(target, list(pending), thread=thread)
        if len(found) > 1:
            raise InvalidResume(
                f"key {target!r} matches {len(found)} pending interrupts "
                f"({', '.join(r.id for r in found)}); resume them by id"
            )
        r = found[0]
        if r.id in answers:
            raise InvalidResume(f"interrupt {r.id} is targeted twice", interrupt_id=r.id)
        validate_answer(r, value)
        answers[r.id] = value
    return answers


def _single(level: Level, thread: str, answer: Any, form: str) -> dict[str, Any]:
    """``{id: answer}`` for the one interrupt that waits for an answer; else `InvalidResume`."""
    dynamic = level.dynamic_pending()
    if len(dynamic) != 1:
        raise InvalidResume(
            f"{form} answers a single interrupt, but thread {thread!r} has {len(dynamic)} "
            f"waiting for an answer ({', '.join(r.id for r in dynamic) or 'none'}); "
            "pass {id_or_key: answer} instead"
        )
    return {dynamic[0].id: answer}


def decided_unrun(level: Level, *, pauses: bool = True) -> dict[str, str]:
    """Interrupts answered since their task last ran, as ``{interrupt_id: node}``.

    A recorded decision waits for its task to run again (``app.resume``); until then it is
    pending work, as an unanswered interrupt is. Answers to a subgraph's interrupts are
    named by the subgraph's node. ``pauses=False`` leaves out passed ``interrupt_before``
    breakpoints (an edit keeps those tasks, see `update_state`).
    """
    found: dict[str, str] = {}
    skip = level.blocked().union(level.results)  # a blocked task's wait is in `pending`
    for task in level.tasks:
        if task.id in skip:
            continue
        if task.passed_before and pauses:  # a static pause before the node, answered
            found[interrupt_id(level.lineage, task.id, f"before#{level.step}")] = task.node
        sc = level.scratch.get(task.id)
        if sc is None or not sc.has_targeted():
            continue
        for local in sc.targeted:
            if not local.endswith("\x1f"):
                found[interrupt_id(level.lineage, task.id, local)] = task.node
                continue
            # An answer delivered into a stored subgraph: its own level knows which.
            where = local[:-1]
            for addr, wire in sc.children.items():
                if where == addr or where.startswith(addr + "/"):
                    plan = child_plan(level, task.node, wire)
                    child = level_from_wire(plan, wire, thread=level.thread, lineage=level.lineage)
                    found.update(dict.fromkeys(decided_unrun(child, pauses=pauses), task.node))
    return found


_DETAILS: dict[str, Callable[[Any, Any], Any]] = {}


def register_answer_details(info_type: str, fn: Callable[[Any, Any], Any]) -> None:
    """Describe answers to interrupts whose ``info["type"]`` is ``info_type``.

    ``fn(info, answer)`` returns JSON-able details (or None); they are recorded with the
    decision (`Decision.details`) and in its audit entry, by whatever process decides.
    A describer that raises records the error instead: it never blocks a decision.
    """
    _DETAILS[info_type] = fn


def _details(info: Any, answer: Any) -> Any:
    kind = info.get("type") if isinstance(info, dict) else None
    fn = _DETAILS.get(kind) if isinstance(kind, str) else None
    if fn is None or answer is None or answer is ESCALATE:
        return None
    try:
        return fn(info, answer)
    except Exception as exc:
        return {"error": f"describing the answer failed: {type(exc).__name__}: {exc}"}


def payload_hash(codec: Codec, interrupt: Interrupt) -> str:
    """Hash of an interrupt's question, to check that a person answered what is stored.

    It covers what the question asks (``info``) and, for one that says who may decide it, its
    `Authority`: a person is shown both, and decides on both.
    """
    info, authority = interrupt.info, interrupt.authority
    value = info if authority is None else [info, msgspec.to_builtins(authority)]
    try:
        # A question is most likely a plain JSON tree: one census in C, the same bytes.
        data = codec.encode_prepared(codec.prepare_tree(value), path="info")
    except (ValueError, OverflowError, UnicodeEncodeError):
        data = codec.encode(value, path="info")  # it explains what it refuses
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def check_votes(level: Level, answers: Mapping[str, Any], actor: str | None) -> frozenset[str]:
    """Return the checked answers that are approvals of a quorum; refuse what cannot count.

    A quorum (``approvals`` > 1) counts the approvals of distinct named people, so an
    approval without ``actor``, or a second one by the same actor, is refused; so is an
    answer with no data, which would decide for everyone by default. Nothing changes here.

    Raises:
        InvalidResume: One of those; nothing was recorded.
    """
    votes: set[str] = set()
    by_id = {r.id: r for r in level.pending}
    for iid, answer in answers.items():
        r = by_id[iid]
        need = r.interrupt.approvals
        if need < 2:
            continue
        if answer is None:
            raise InvalidResume(
                f"interrupt {iid} needs approvals from {need} different people; answer it with "
                "an approval or a rejection, not with no data; nothing was recorded",
                interrupt_id=iid,
            )
        if not approves(r, answer):
            continue  # a rejection (or any other answer) decides at once
        done = r.interrupt.approved_by
        if actor is None:
            raise InvalidResume(
                f"interrupt {iid} needs approvals from {need} different people, so a quorum "
                "needs named deciders: pass actor= with the approval; nothing was recorded",
                interrupt_id=iid,
            )
        if actor in done:
            raise InvalidResume(
                f"{actor!r} already approved interrupt {iid} ({len(done)} of {need} "
                f"approvals); the others must come from people other than "
                f"{', '.join(repr(a) for a in done)}; nothing was recorded",
                interrupt_id=iid,
            )
        votes.add(iid)
    return frozenset(votes)


def approves(r: Raised, answer: Any) -> bool:
    """True when ``answer`` counts as one approval of the quorum interrupt ``r``."""
    if r.approving is None:
        return answer is True
    return check(answer, r.approving) is None


def replayed_votes(
    level: Level, answers: Mapping[str, Any], actor: str | None, nonce: str | None
) -> list[Decision] | None:
    """The recorded votes, when every target is pending and already has ``actor``'s vote
    sent with ``nonce`` (the same votes sent again: their outcome, not an error)."""
    if nonce is None or actor is None:
        return None
    by_id = {r.id: r for r in level.pending}
    found: list[Decision] = []
    for iid in answers:
        r = by_id[iid]
        vote = next((v for v in r.votes if v.actor == actor and v.nonce == nonce), None)
        if vote is None:
            return None
        found.append(vote)
    return found


def decide(
    codec: Codec,
    level: Level,
    answers: Mapping[str, Any],
    *,
    actor: str | None = None,
    reason: str | None = None,
    nonce: str | None = None,
    status: Literal["resolved", "expired"] = "resolved",
    votes: frozenset[str] = frozenset(),
    override: str | None = None,
) -> tuple[list[Resolution], list[Decision]]:
    """Deliver checked answers to their tasks; return the resolutions to commit with them.

    ``status="expired"`` records answers given by a deadline policy (`ESCALATE` is recorded as
    no answer). ``votes`` (from `check_votes`) are the approvals of quorum interrupts: each
    is recorded on its pending interrupt, which it resolves only when it is the last approval
    needed; the returned decisions include the votes (``final`` False).
    """
    now = time.time()
    by_id = {r.id: r for r in level.pending}
    decisions: list[Decision] = []
    resolutions: list[Resolution] = []
    final: dict[str, Any] = {}
    for iid, answer in answers.items():
        r = by_id[iid]
        i = r.interrupt
        level.answered[iid] = i  # for the commit's observers (it clears them)
        approved_by = (*i.approved_by, actor) if iid in votes and actor is not None else None
        d = Decision(
            interrupt_id=iid,
            thread=level.thread,
            answer=None if answer is ESCALATE else answer,
            actor=actor,
            reason=reason,
            nonce=nonce,
            payload_hash=payload_hash(codec, i),
            decided_at=now,
            details=_details(i.info, answer),
            approvals=i.approvals,
            approved_by=i.approved_by if approved_by is None else approved_by,
            final=approved_by is None or len(approved_by) >= i.approvals,
            override=override,
        )
        decisions.append(d)
        if not d.final:
            # A vote: kept with the pending interrupt, which the commit stores as it is now.
            r.votes = (*r.votes, d)
            r.interrupt = msgspec.structs.replace(i, approved_by=d.approved_by)
            continue
        stored = decision_dict(d)
        if r.votes:  # the earlier votes, so that a vote sent again is told its outcome
            stored["votes"] = [decision_dict(v) for v in r.votes]
        resolutions.append(
            Resolution(
                id=iid,
                status=status,
                resolved_at=now,
                resolution=codec.encode(stored, path="answer"),
            )
        )
        final[iid] = answer
    deliver(level, final)
    return resolutions, decisions


def recorded_decision(codec: Codec, stored: InterruptRecord) -> Decision | None:
    """The decision stored with a resolved interrupt, if one was recorded."""
    if stored.resolution is None:
        return None
    try:
        return msgspec.convert(codec.decode(stored.resolution), Decision)
    except (CheckpointCorrupt, msgspec.ValidationError):
        return None


def recorded_vote(
    codec: Codec, stored: InterruptRecord, actor: str | None, nonce: str
) -> Decision | None:
    """The vote ``actor`` sent with ``nonce`` on a quorum interrupt resolved since, if any."""
    if stored.resolution is None or actor is None:
        return None
    try:
        votes = msgspec.convert(codec.decode(stored.resolution).get("votes", []), list[Decision])
    except (CheckpointCorrupt, msgspec.ValidationError, AttributeError):
        return None
    return next((v for v in votes if v.actor == actor and v.nonce == nonce), None)


def validate_answer(r: Raised, value: Any) -> None:
    """Check an answer against the interrupt's schema and validator; raise `InvalidResume`."""
    schema = r.interrupt.schema
    if value is None and (r.has_default or schema is None):
        return
    if schema is not None:
        problem = check(value, schema)
        if problem is not None:
            raise InvalidResume(
                f"answer to interrupt {r.id} ({r.interrupt.address}) is invalid: {problem}; "
                "nothing was recorded: answer again with a value its schema accepts",
                interrupt_id=r.id,
            )
    if r.validator is not None:
        fn = lookup_validator(r.validator)
        if fn is None:
            raise InvalidResume(
                f"interrupt {r.id} must be checked by validator {r.validator!r}, which this "
                "process does not know; decorate it with @interlock.validator in a module "
                "this process imports",
                interrupt_id=r.id,
            )
        try:
            ok = fn(value)
        except (ValueError, TypeError) as exc:
            raise InvalidResume(
                f"answer to interrupt {r.id} was refused by its validator: {exc}",
                interrupt_id=r.id,
            ) from exc
        if ok is False:
            raise InvalidResume(
                f"answer to interrupt {r.id} was refused by its validator", interrupt_id=r.id
            )
