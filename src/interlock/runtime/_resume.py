"""Resume targets: checked before anything changes, then delivered as decisions."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from .._errors import InterruptAlreadyResolved, InvalidResume, UnknownInterrupt
from ..serde import Codec
from ..stores import Resolution, Store
from ._engine import Level
from ._interrupts import lookup_validator
from ._jsonschema import check
from ._records import Command
from ._signals import Raised

__all__ = ["Targets", "check_targets", "decide", "validate_answer"]

Targets = Mapping[str, Any] | Command | None
"""What `App.resume` accepts: ``{id_or_key: answer}``, a `Command`, or None (continue pauses)."""


async def check_targets(
    store: Store,
    level: Level,
    thread: str,
    targets: Targets,
    renamed: Mapping[str, str],
) -> dict[str, Any]:
    """Turn resume targets into ``{interrupt_id: answer}``, checking every one.

    Nothing is changed here; any refusal raises before the caller commits.
    """
    pending = {r.id: r for r in level.pending}
    if isinstance(targets, Command):
        if isinstance(targets.resume, Mapping):
            mapping: Mapping[str, Any] | None = targets.resume
        else:
            dynamic = level.dynamic_pending()
            if len(dynamic) == 1:
                mapping = {dynamic[0].id: targets.resume}
            elif not dynamic and targets.resume is None:
                mapping = None
            else:
                raise InvalidResume(
                    f"Command(resume=...) answers a single interrupt, but thread {thread!r} "
                    f"has {len(dynamic)} pending ({', '.join(r.id for r in dynamic)}); "
                    "pass {id_or_key: answer} instead"
                )
    else:
        mapping = targets
    if mapping is None:
        return {
            r.id: None for r in level.pending if r.interrupt.kind not in ("dynamic", "reconcile")
        }
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
                raise InterruptAlreadyResolved(target, status=stored.status)
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


def decide(
    codec: Codec, level: Level, answers: Mapping[str, Any], actor: str | None
) -> list[Resolution]:
    """Deliver checked answers to their tasks; return the resolutions to commit with them."""
    now = time.time()
    encode = codec.encode
    resolutions = [
        Resolution(
            id=iid,
            status="resolved",
            resolved_at=now,
            resolution=encode({"answer": answer, "actor": actor}, path="answer"),
        )
        for iid, answer in answers.items()
    ]
    level.answer(answers)
    return resolutions


def validate_answer(r: Raised, value: Any) -> None:
    """Check an answer against the interrupt's schema and validator; raise `InvalidResume`."""
    schema = r.interrupt.schema
    if value is None and (r.has_default or schema is None):
        return
    if schema is not None:
        problem = check(value, schema)
        if problem is not None:
            raise InvalidResume(
                f"answer to interrupt {r.id} ({r.interrupt.address}) is invalid: {problem}",
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
