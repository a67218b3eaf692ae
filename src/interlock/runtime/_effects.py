"""Side effects: dangerous calls made at most once, idempotent calls with a stable key.

A *dangerous* call (sending mail, moving money) is recorded in the store as ``started`` before
it is made and ``done``, with its result, right after. When the task re-runs (the process died,
a later interrupt in the same node was answered), the record decides:

* ``done``: the recorded result is returned; the call is not made again;
* ``started``: the earlier attempt may or may not have happened. The call is **not** retried:
  the task raises a ``reconcile`` interrupt, and a person answers ``"retry"`` (make the call
  again) or ``{"result": value}`` (it happened; carry on with this result).

An *idempotent* call is simply made again on a re-run, with the same ``effect_key`` each time,
for the outside system to deduplicate (at least once).

The record's key is the task's lineage, id and the call's name, so it is stable across re-runs
of one task and new for every new task (a loop's next pass, a branch from the past).

A call has one key for people and outside systems: the thread, then that record key, as
`effect_key` returns it in the calling task (``effect_key(name)`` for ``effect(name, ...)``, the
*n*-th call of one name in a task ending in ``#n``; ``effect_key()`` for a ``dangerous=True``
node). The ``effect_key=`` an idempotent call gets and the ``key`` in a reconcile interrupt's
``info`` are that value.

What the reconcile question shows a person is the call's name and key, and whatever its caller
says about the call (``reconcile_info=``: an agent gives the tool, the arguments that ran, the
call id and itself), so the person can look for it in the outside system. The caller gives it
anew on each run of the task, from the same stored inputs: nothing more is written before
the call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, TypeVar

from .._errors import GraphDefinitionError
from ..stores import EffectRecord
from ._context import TaskContext, current_address, current_task, local_key
from ._interrupts import answer_or_raise, call_maybe_async
from ._observe import EffectOutcome, effect_span
from ._records import Address

__all__ = ["RETRY", "effect", "effect_key", "node_effect"]

T = TypeVar("T")

RETRY: Final = "retry"
"""The answer to a ``reconcile`` interrupt that makes the call again."""

_RECONCILE_SCHEMA: Final = {
    "anyOf": [
        {"const": RETRY},
        {"type": "object", "required": ["result"], "properties": {"result": {}}},
    ]
}


def effect_key(name: str | None = None) -> str:
    """The stable key of the running task (or of its call ``name``), for outside systems.

    The same on every re-run of the task, different for every other task: pass it to an API
    that deduplicates requests (an idempotency key) so that running the task twice acts once.
    """
    ctx = current_task("effect_key()")
    call = "" if name is None else f"{current_address()}|{name}"
    return f"{ctx.thread}/{_key(ctx, call)}"


def _key(ctx: TaskContext, call: str) -> str:
    """The effect key of a call in the running task: stable across re-runs of the task only."""
    return f"{ctx.lineage}/{ctx.task_id}/{call}" if call else f"{ctx.lineage}/{ctx.task_id}"


async def effect(
    name: str,
    fn: Callable[..., T | Awaitable[T]],
    /,
    *args: Any,
    idempotent: bool = False,
    reconcile_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> T:
    """Make a side-effecting call from inside a node: at most once, or at least once with a key.

    By default the call is *dangerous*: it is recorded ``started`` before and ``done`` after,
    and never made twice for one task. If the task re-runs after the call started but before
    its outcome was recorded, a ``reconcile`` interrupt asks a person instead (answer
    ``"retry"`` or ``{"result": value}``). The result must be encodable (it is stored).

    With ``idempotent=True`` nothing is written before the call: it runs again on a re-run of
    the task, with the same ``effect_key=`` keyword argument each time, for the outside system
    to deduplicate.

    ``reconcile_info`` says what the call is to a person who must reconcile it (JSON-able
    fields: what it acts on, its arguments): they are added to the reconcile question's
    ``info``, beside ``type``, ``effect``, ``key``, ``attempt`` and ``started_at``, which they
    cannot replace. A ``question`` among them replaces the generic text.

    For example, in an async node (a sketch: ``bank``, ``order`` and ``mailer`` are yours)::

        receipt = await effect("charge", bank.charge, order.amount)
        await effect("notify", mailer.send, to, body, idempotent=True)  # gets effect_key=...
    """
    ctx = current_task("effect()")
    if reconcile_info is not None and not isinstance(reconcile_info, Mapping):
        raise TypeError(
            f"reconcile_info must be a mapping of JSON-able fields, not "
            f"{type(reconcile_info).__name__}"
        )
    call = f"{current_address()}|{name}"
    n = ctx.next_ordinal(f"effect|{call}")
    if n:
        call = f"{call}#{n}"
    local = f"effect|{call}"
    key = _key(ctx, call)
    if local in ctx.scratch.steps:
        recorded: T = ctx.scratch.steps[local]
        return recorded
    result: T
    public = f"{ctx.thread}/{key}"
    if idempotent:
        traced = effect_span(name, public, idempotent=True)
        if traced is None:
            result = await call_maybe_async(fn, *args, effect_key=public, **kwargs)
        else:
            with traced as span:
                result = await call_maybe_async(fn, *args, effect_key=public, **kwargs)
                span.set_attribute("interlock.effect.outcome", "called")
    else:
        result = await _guarded(
            ctx,
            key,
            name,
            lambda: call_maybe_async(fn, *args, **kwargs),
            shown=public,
            about=reconcile_info,
        )
    ctx.scratch.steps[local] = result
    return result


async def node_effect(name: str, fn: Callable[..., Any], arg: Any) -> Any:
    """Run a ``dangerous=True`` node's callable as an at-most-once effect (engine use)."""
    ctx = current_task("a dangerous node")
    key = _key(ctx, "node")
    # Recorded as ".../node" (the key stored records have); shown as the task's effect_key().
    shown = f"{ctx.thread}/{_key(ctx, '')}"
    return await _guarded(ctx, key, name, lambda: call_maybe_async(fn, arg), shown=shown)


async def _guarded(
    ctx: TaskContext,
    key: str,
    name: str,
    call: Callable[[], Awaitable[Any]],
    *,
    shown: str,
    about: Mapping[str, Any] | None = None,
) -> Any:
    """Make a dangerous call at most once under record ``key``; ``shown`` is its effect key,
    ``about`` what its caller says of it to a person who must reconcile it."""
    traced = effect_span(name, shown, idempotent=False)
    if traced is None:
        return (await _guard(ctx, key, name, call, shown=shown, about=about))[1]
    with traced as span:
        outcome, result = await _guard(ctx, key, name, call, shown=shown, about=about)
        span.set_attribute("interlock.effect.outcome", outcome)
        return result


async def _guard(
    ctx: TaskContext,
    key: str,
    name: str,
    call: Callable[[], Awaitable[Any]],
    *,
    shown: str,
    about: Mapping[str, Any] | None,
) -> tuple[EffectOutcome, Any]:
    """`_guarded`'s work; also say what it did."""
    io = ctx.effects
    if io is None:
        raise GraphDefinitionError(
            f"effect {name!r} runs outside an App's run; run the graph through App.run/resume"
        )
    started, record = await io.begin(ctx.thread, key, name, retry=False)
    if not started and record.status == "started":
        # An earlier attempt never recorded its outcome. Its question (one per attempt: an
        # answer never carries over to a later attempt) may have been answered already.
        address = current_address()
        question = local_key(str(address), f"effect:{key}#{record.attempt}")
        if question not in ctx.scratch.answers:
            # Raises the question (a `reconcile` outcome, as the span says).
            asked = _ask_to_reconcile(ctx, address, question, shown, name, record, about)
            return "reconciled", asked
        answer = ctx.scratch.answers[question]
        if isinstance(answer, dict):
            # A person says it happened: record that, with the result they give.
            await io.finish(ctx.thread, key, name, answer.get("result"), how="effect_reconciled")
            return "reconciled", answer.get("result")
        started, record = await io.begin(ctx.thread, key, name, retry=True)
        retried = True
    else:
        retried = False
    if started:
        result = await call()
        await io.finish(ctx.thread, key, name, result)
        return "retried" if retried else "called", result
    # Done, by an earlier attempt (or reconciled): its recorded result, never a second call.
    return "recorded", None if record.result is None else io.codec.decode(record.result)


def _ask_to_reconcile(
    ctx: TaskContext,
    address: Address,
    question: str,
    key: str,
    name: str,
    record: EffectRecord,
    about: Mapping[str, Any] | None,
) -> Any:
    info: dict[str, Any] = {
        "question": (
            f"{name!r} was started (attempt {record.attempt}) but its outcome was never "
            "recorded (the process stopped or the call failed). Check the outside system, then "
            'answer "retry" to call it again or {"result": ...} if it took effect.'
        ),
        **(about or {}),
        # Invariant: what every reconcile question holds, whatever its caller added.
        "type": "reconcile",
        "effect": name,
        "key": key,
        "attempt": record.attempt,
        "started_at": record.started_at,
    }
    return answer_or_raise(ctx, address, question, info, schema=_RECONCILE_SCHEMA, kind="reconcile")
