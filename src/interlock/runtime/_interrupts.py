"""Raising interrupts from inside a node, and reading them back on resume.

The rule to remember: **a task re-runs from its first line when it is resumed.** The first time
`interrupt()` is reached it stops the task; when a resume answers it, the task runs again and
the same `interrupt()` call returns the answer. Work before the call repeats unless it is
wrapped in a durable `step()`.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

import msgspec

from .._errors import GraphDefinitionError
from .._lazy import lazy_module
from ..graph._builder import Subgraph
from ._authority import Authority, authority_of
from ._context import (
    TaskContext,
    child_scope,
    current_address,
    current_task,
    interrupt_id,
    local_address,
    local_key,
)
from ._events import CustomEvent
from ._jsonschema import check, convert, stored_schema
from ._records import Address, Interrupt, OnTimeout, Segment, TimeoutDefault
from ._signals import InterruptSignal, Raised

if TYPE_CHECKING:
    import anyio
else:  # imported by the first call that needs it, not by `import interlock`
    anyio = lazy_module("anyio", globals())

__all__ = [
    "Child",
    "approval_interrupt",
    "approve",
    "ask",
    "check_approvals",
    "choose",
    "composite_interrupt",
    "emit_event",
    "gather_children",
    "interrupt",
    "interrupt_state",
    "needs_confirmation",
    "resume_context",
    "run_graph",
    "step",
    "timeout_default",
    "validator",
]

T = TypeVar("T")
_NO_DEFAULT: Any = object()

_VALIDATORS: dict[str, Callable[[Any], object]] = {}


def _validator_name(fn: Callable[[Any], object]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def validator(fn: Callable[[Any], object]) -> Callable[[Any], object]:
    """Register a resume validator under its qualified name (use as a decorator).

    A validator receives the answer and raises `ValueError` (or returns False) to refuse it.
    Answers are validated before anything changes, in the process that resumes the thread; that
    process finds the validator by name in this registry, never by importing anything. Validators
    passed to `interrupt()` are registered automatically in the process that raises; decorate
    them so that another process can check answers too.
    """
    _VALIDATORS[_validator_name(fn)] = fn
    return fn


def lookup_validator(name: str) -> Callable[[Any], object] | None:
    """Return the registered validator called ``name`` (engine use)."""
    return _VALIDATORS.get(name)


def _schema_of(schema: type[Any] | Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if schema is None else stored_schema(schema)


def _deadline_of(deadline: float | datetime | None) -> float | None:
    if deadline is None:
        return None
    if isinstance(deadline, datetime):
        if deadline.utcoffset() is None:
            # A naive datetime would be read as this machine's local time, which another
            # process (or this one after a timezone change) reads differently.
            raise ValueError(
                f"deadline={deadline!r} has no timezone; pass an aware datetime, e.g. "
                "datetime.now(timezone.utc) + timedelta(hours=1), or seconds from now"
            )
        return deadline.timestamp()
    return time.time() + float(deadline)


def interrupt(
    info: Any = None,
    *,
    key: str | None = None,
    state: Any = None,
    schema: type[Any] | Mapping[str, Any] | None = None,
    deadline: float | datetime | None = None,
    on_timeout: OnTimeout | None = None,
    validator: Callable[[Any], object] | None = None,
    default: Any = _NO_DEFAULT,
    approvals: int = 1,
    authority: Authority | None = None,
) -> Any:
    """Stop the task to ask a person; on resume, return their answer.

    Args:
        info: What the person sees (JSON-able data or registered types).
        key: A name to resume by instead of the id; also matches the call on re-runs.
            Without a key, calls at one address are matched by call order.
        state: Task-local state to keep; read it back with `interrupt_state()`.
        schema: What the answer must satisfy, checked before anything is committed: a JSON
            Schema dict (Draft 2020-12, ``format`` enforced), a pydantic model, or a type
            msgspec can describe (a Struct, ``list[int]``...). With a model or a type, the
            answer reaches the node converted to it. It is stored with the interrupt as JSON.
        deadline: Seconds from now, or an aware datetime, after which the interrupt expires.
        on_timeout: What `App.sweep` does once the deadline passed: ``"reject"`` (the
            default; answers False), ``"escalate"`` (asks again as a new interrupt without a
            deadline), or ``timeout_default(value)`` (answers ``value``).
        validator: A callable that raises `ValueError` (or returns False) for a bad answer.
        default: Returned when the interrupt is resumed with no data (``None``).
        approvals: How many distinct people must approve (a quorum). With more than 1, an
            answer ``True`` counts as one approval and needs a named decider (``actor=``); the
            interrupt stays pending until that many different actors approved, and then
            returns ``True``. Any other answer decides at once. `approve` does the same with
            its approving words.
        authority: Who may answer (`Authority`: principals, groups, roles, and separation of
            duties). Stored with the interrupt and part of its payload hash; `App.decide`
            refuses anyone else with `NotAuthorized`, whatever surface they decide from.

    Returns:
        The answer given on resume.

    Raises:
        InterruptSignal: The first time (a `BaseException`: do not catch it).
        GraphDefinitionError: ``schema`` is not a valid JSON Schema, or a type neither
            msgspec nor pydantic can describe; or ``on_timeout=timeout_default(value)`` gives
            an answer the schema refuses.
        ValueError: ``deadline`` is a naive datetime, or ``approvals`` is below 1.
        TypeError: ``approvals`` is not an int.
    """
    return approval_interrupt(
        info,
        approvals=approvals,
        approving=None,
        authority=authority,
        key=key,
        state=state,
        schema=schema,
        deadline=deadline,
        on_timeout=on_timeout,
        validator=validator,
        default=default,
    )


_APPROVED: Final = {"const": True}
"""What approves a quorum question asked with `interrupt` (`approve` says more)."""


def approval_interrupt(
    info: Any,
    *,
    approvals: int,
    approving: Mapping[str, Any] | None,
    key: str | None = None,
    state: Any = None,
    schema: type[Any] | Mapping[str, Any] | None = None,
    deadline: float | datetime | None = None,
    on_timeout: OnTimeout | None = None,
    validator: Callable[[Any], object] | None = None,
    default: Any = _NO_DEFAULT,
    authority: Authority | None = None,
) -> Any:
    """`interrupt()` for a question that may need several approvals.

    With ``approvals`` > 1, an answer that satisfies the JSON Schema ``approving`` (default:
    the answer ``true``) counts as one person's approval; it is stored with the interrupt, so
    whatever process decides tells votes from decisions by stored data alone.
    """
    check_approvals(approvals)
    authority = authority_of(authority)
    if not _valid_policy(on_timeout):
        raise GraphDefinitionError(
            f"on_timeout must be 'reject', 'escalate' or timeout_default(value), not {on_timeout!r}"
        )
    ctx = current_task("interrupt()")
    address = current_address()
    where = str(address)
    match = f"k:{key}" if key is not None else f"#{ctx.next_ordinal(where)}"
    return answer_or_raise(
        ctx,
        address,
        local_key(where, match),
        info,
        key=key,
        state=state,
        schema=schema,
        deadline=deadline,
        on_timeout=on_timeout,
        validator=validator,
        default=default,
        approvals=approvals,
        approving=approving,
        authority=authority,
    )


def check_approvals(approvals: object) -> None:
    """Refuse an ``approvals=`` that is no count of people.

    Raises:
        TypeError: It is not an int.
        ValueError: It is below 1.
    """
    if not isinstance(approvals, int) or isinstance(approvals, bool):
        raise TypeError(f"approvals must be an int, not {type(approvals).__name__}")
    if approvals < 1:
        raise ValueError(
            f"approvals must be at least 1 (how many distinct people must approve), not {approvals}"
        )


def answer_or_raise(
    ctx: TaskContext,
    address: Address,
    local: str,
    info: Any,
    *,
    key: str | None = None,
    state: Any = None,
    schema: type[Any] | Mapping[str, Any] | None = None,
    deadline: float | datetime | None = None,
    on_timeout: OnTimeout | None = None,
    validator: Callable[[Any], object] | None = None,
    default: Any = _NO_DEFAULT,
    kind: Literal["dynamic", "reconcile"] = "dynamic",
    approvals: int = 1,
    approving: Mapping[str, Any] | None = None,
    authority: Authority | None = None,
) -> Any:
    """`interrupt()` once the call is named (``local``): return its answer or raise it."""
    where = str(address)
    escalations = ctx.scratch.escalated.count(local) if ctx.scratch.has_escalated() else 0
    if escalations:
        # Its deadline passed with on_timeout="escalate": the same question, asked anew (a new
        # id, no deadline), marked so the inbox shows it was escalated.
        local = f"{local}^{escalations}"
        info = {"escalated": True, "info": info}
        deadline = None
        on_timeout = None
    if local in ctx.scratch.answers:
        answer = ctx.scratch.answers[local]
        if answer is None and default is not _NO_DEFAULT:
            return default
        if schema is not None and not isinstance(schema, Mapping) and answer is not None:
            # The answer was checked against the type's schema (and, where the type is known,
            # converted) before it was committed: what reaches the node is the type asked for.
            return convert(schema, answer)
        return answer
    # Checked before this task's scratch changes: a refusal leaves nothing half-recorded.
    stored = _schema_of(schema)
    quorum = _schema_of(approving or _APPROVED) if approvals > 1 else None
    due = _deadline_of(deadline)
    if stored is not None and isinstance(on_timeout, TimeoutDefault):
        problem = check(on_timeout.value, stored)
        if problem is not None:
            # The sweep would commit it as the decision, and the node would get it.
            raise GraphDefinitionError(
                f"on_timeout=timeout_default({on_timeout.value!r:.60}) gives an answer that "
                f"schema= refuses ({problem}); give a default the schema accepts"
            )
    if state is not None:
        ctx.scratch.states[where] = state
    locals_here = ctx.scratch.raised.setdefault(where, [])
    if local not in locals_here:
        locals_here.append(local)
    vname = None
    if validator is not None:
        vname = _validator_name(validator)
        _VALIDATORS.setdefault(vname, validator)
    record = Interrupt(
        id=interrupt_id(ctx.lineage, ctx.task_id, local),
        thread=ctx.thread,
        key=key,
        address=address,
        kind=kind,
        info=info,
        schema=stored,
        created_at=time.time(),
        deadline=due,
        approvals=approvals,
        authority=authority,
    )
    raise InterruptSignal(
        [
            Raised(
                record,
                validator=vname,
                has_default=default is not _NO_DEFAULT,
                on_timeout=on_timeout,
                task=ctx.task_id,
                local=local,
                approving=quorum,
            )
        ]
    )


def _valid_policy(policy: object) -> bool:
    return policy is None or policy in ("reject", "escalate") or isinstance(policy, TimeoutDefault)


def timeout_default(value: Any) -> TimeoutDefault:
    """An ``on_timeout`` policy: when the deadline passes, answer ``value``."""
    return TimeoutDefault(value)


_YES = ("approve", "approved", "yes", "y", "true", "ok")
_NO = ("reject", "rejected", "no", "n", "false", "deny")


def approve(
    question: str,
    *,
    key: str | None = None,
    details: Any = None,
    validator: Callable[[Any], object] | None = None,
    default: bool | None = None,
    deadline: float | datetime | None = None,
    approvals: int = 1,
    authority: Authority | None = None,
    confirm: bool = False,
) -> bool:
    """Ask a person to approve; return True for approve, False for reject.

    Accepted answers: a bool, or one of ``approve/yes/y/ok`` and ``reject/no/n/deny`` (any case).

    With ``approvals=N`` (N > 1) it returns True only once N distinct people approved: each
    approval (``True`` or an approving word, decided with ``actor=``) is recorded as a vote
    that leaves the interrupt pending, shown on it as `Interrupt.approved_by`, until the Nth;
    the first rejection returns False. A quorum question needs an explicit answer, so
    ``default`` does not apply to it.

    ``authority`` says who may answer (see `interrupt`): ``approvals=2,
    authority=Authority(groups=("sre",), not_starter=True)`` needs two SREs who did not start
    the run.

    ``confirm=True`` asks the people who decide for a confirmation step before an approval
    (the approval server's surfaces show what will happen, and approve only once the person
    confirms): for an action that cannot be undone.
    """
    info: dict[str, Any] = {"type": "approval", "question": question, "details": details}
    if confirm:
        info["confirm"] = True
    answer = approval_interrupt(
        info,
        approvals=approvals,
        approving={"anyOf": [{"const": True}, {"enum": list(_YES)}]},
        key=key,
        schema={"anyOf": [{"type": "boolean"}, {"enum": [*_YES, *_NO]}]},
        validator=validator,
        default=_NO_DEFAULT if default is None else default,
        deadline=deadline,
        authority=authority,
    )
    if isinstance(answer, str):
        return answer.lower() in _YES
    return bool(answer)


def needs_confirmation(info: Any, answer: Any) -> bool:
    """Whether ``answer`` to a question with ``info`` must come through a confirmation step.

    A question asks for one with ``"confirm": true`` in its info (``approve(confirm=True)``,
    an agent's ``require_approval(confirm=True)``). It applies to the answers that let the
    gated action go ahead: ``True``, an approving word (``approve``, ``yes``, ``ok``...,
    any case), and a tool decision whose ``action`` is ``approve`` or ``edit``. Surfaces
    people decide on (the approval server, the command line) show the step; the runtime
    records what it is given.
    """
    if not (isinstance(info, dict) and info.get("confirm") is True):
        return False
    if answer is True:
        return True
    if isinstance(answer, str):
        return answer.strip().lower() in _YES
    if isinstance(answer, dict):
        return answer.get("action") in ("approve", "edit")
    return False


def choose(
    question: str,
    options: Sequence[str],
    *,
    key: str | None = None,
    validator: Callable[[Any], object] | None = None,
    default: str | None = None,
    deadline: float | datetime | None = None,
    authority: Authority | None = None,
) -> str:
    """Ask a person to pick one of ``options``; return the option picked.

    ``authority`` says who may answer (see `interrupt`).
    """
    if not options:
        raise GraphDefinitionError("choose() needs at least one option")
    result: str = interrupt(
        {"type": "choice", "question": question, "options": list(options)},
        key=key,
        schema={"enum": list(options)},
        validator=validator,
        default=_NO_DEFAULT if default is None else default,
        deadline=deadline,
        authority=authority,
    )
    return result


def ask(
    prompt: str,
    *,
    key: str | None = None,
    validator: Callable[[Any], object] | None = None,
    default: str | None = None,
    deadline: float | datetime | None = None,
    authority: Authority | None = None,
) -> str:
    """Ask a person for free text; return it.

    ``authority`` says who may answer (see `interrupt`).
    """
    result: str = interrupt(
        {"type": "input", "prompt": prompt},
        key=key,
        schema={"type": "string"},
        validator=validator,
        default=_NO_DEFAULT if default is None else default,
        deadline=deadline,
        authority=authority,
    )
    return result


def interrupt_state() -> tuple[bool, Any]:
    """Return ``(was_interrupted, state)`` for the code running now.

    ``was_interrupted`` is True when an interrupt was raised at this address on an earlier
    pass of the task; ``state`` is what it saved with ``state=`` (None if nothing).
    """
    ctx = current_task("interrupt_state()")
    where = str(current_address())
    return where in ctx.scratch.raised, ctx.scratch.states.get(where)


def resume_context() -> tuple[bool, bool, Any]:
    """Return ``(is_target, has_data, data)`` for the code running now.

    ``is_target`` is True when this pass answers an interrupt raised here or below;
    ``has_data``/``data`` give the answer to the interrupt raised exactly here, if any.
    """
    ctx = current_task("resume_context()")
    where = str(current_address())
    for local in ctx.targeted:
        if local_address(local) == where:
            data = ctx.scratch.answers.get(local)
            return True, data is not None, data
    return ctx.answered_under(where), False, None


async def step(name: str, fn: Callable[..., T | Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
    """Run ``fn`` once per task and record its result; re-runs of the task get the record.

    Use it for work before an `interrupt()` that must not repeat when the task re-runs (an LLM
    call, a lookup). The result must be encodable (it is stored in the checkpoint while the task
    waits). Calls with the same name are told apart by call order.
    """
    ctx = current_task("step()")
    base = f"{current_address()}|{name}"
    n = ctx.next_ordinal(f"step|{base}")
    key = f"{base}#{n}" if n else base
    if key in ctx.scratch.steps:
        recorded: T = ctx.scratch.steps[key]
        return recorded
    result: T = await call_maybe_async(fn, *args, **kwargs)
    ctx.scratch.steps[key] = result
    return result


def emit_event(data: Any) -> None:
    """Report ``data`` to whoever streams the run, as a `CustomEvent` (``modes=["custom"]``).

    Works at any depth (a tool, an agent inside a subgraph). Events are live news, not
    records: a task that re-runs emits its events again, and nothing is stored. Without a
    reader (`App.run` rather than `App.stream`) it does nothing.
    """
    ctx = current_task("emit_event()")
    sink = ctx.events
    if sink is not None:
        sink(CustomEvent(node=ctx.node, address=current_address(), data=data))


async def call_maybe_async(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``fn``, a plain or an async callable, and return its result."""
    result = fn(*args, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


def composite_interrupt(info: Any, state: Any, children: Sequence[BaseException]) -> None:
    """Raise one interrupt report that carries every child interrupt.

    For code that runs several children (tool calls, sub-agents) and collected their interrupt
    signals: all of them are reported together, none is lost. ``state`` is saved at the current
    address (read it back with `interrupt_state()`).

    Raises:
        InterruptSignal: Always (when at least one child interrupted).
        GraphDefinitionError: A child is not an interrupt signal, or there are none.
    """
    raised: list[Raised] = []
    for child in children:
        if not isinstance(child, InterruptSignal):
            raise GraphDefinitionError(
                f"composite_interrupt() takes interrupt signals, got {type(child).__name__}; "
                "re-raise real errors yourself"
            )
        raised.extend(child.raised)
    if not raised:
        raise GraphDefinitionError("composite_interrupt() needs at least one child interrupt")
    ctx = current_task("composite_interrupt()")
    where = str(current_address())
    if state is not None:
        ctx.scratch.states[where] = state
    raise InterruptSignal(raised, info)


class Child(msgspec.Struct, frozen=True):
    """One child for `gather_children`: where it lives and what to run."""

    segment: Segment
    """Its address level, e.g. ``Segment("tool", "execute", call_id)``."""
    fn: Callable[[], Any]
    """A sync or async callable with no arguments."""


async def gather_children(children: Sequence[Child], *, info: Any = None) -> list[Any]:
    """Run children concurrently; report all their interrupts; never re-run a finished one.

    Each child runs one level deeper in the address tree. On a re-run of the task:

    * a child that finished on an earlier pass is not run again: its recorded result is used;
    * a child whose interrupts are all still unanswered is not run again: they are re-reported
      with the same ids;
    * a child with an answered interrupt runs again and gets its answer.

    No child is cancelled because a sibling interrupted. Results must be encodable. A child
    that raises an error stops the others; its error propagates as it is (an exception group
    when several failed).

    Returns:
        The children's results, in order, when none interrupted.

    Raises:
        InterruptSignal: One composite report of every child interrupt.
    """
    ctx = current_task("gather_children()")
    base = current_address()
    results: list[Any] = [None] * len(children)
    signals: list[InterruptSignal] = []

    async def run_one(i: int, child: Child) -> None:
        with child_scope(child.segment) as addr:
            where = str(addr)
            if where in ctx.scratch.done:
                results[i] = ctx.scratch.done[where]
                return
            blocked = ctx.blocked_under(addr)
            if blocked and not ctx.answered_under(where):
                signals.append(InterruptSignal(blocked))
                return
            try:
                value = child.fn()
                if inspect.isawaitable(value):
                    value = await value
            except InterruptSignal as sig:
                # Without its traceback: it would hold this frame, whose cell holds `signals`.
                signals.append(sig.with_traceback(None))
                return
            results[i] = value
            ctx.scratch.done[where] = value

    seen = {c.segment for c in children}
    if len(seen) != len(children):
        raise GraphDefinitionError(f"gather_children() got duplicate segments under {base}")
    if len(children) == 1:
        await run_one(0, children[0])  # one child needs no task group (a hot path for agents)
    else:
        try:
            async with anyio.create_task_group() as tg:
                for i, child in enumerate(children):
                    tg.start_soon(run_one, i, child)
        except BaseExceptionGroup as group:
            if len(group.exceptions) == 1:  # one child failed: its error, as a lone child's
                raise group.exceptions[0] from None
            raise
    if signals:
        # Report in child order for a deterministic interrupt list.
        order = {str(base.child(c.segment)): n for n, c in enumerate(children)}

        def rank(sig: BaseException) -> int:
            assert isinstance(sig, InterruptSignal)
            addr = sig.raised[0].interrupt.address
            return order.get(str(Address(addr[: len(base) + 1])), 0)

        composite_interrupt(info, None, sorted(signals, key=rank))
    return results


async def run_graph(graph: Subgraph, input: Any) -> dict[str, Any]:
    """Run a compiled graph (an `App`) as a child of the running task; return its final state.

    For code that runs a graph from inside a node or a tool (an agent used as a tool). The
    child runs at the current address with the run's lease, pause control and events. If it
    stops on interrupts, they stop this task too, and its state is kept with the task: when
    the task re-runs (an answer arrived), the same call continues the child where it stopped
    instead of starting it again. Call it at most once per address (use `child_scope` to give
    several children their own).

    Raises:
        InterruptSignal: The child stopped on interrupts.
        GraphDefinitionError: Called outside a running node.
    """
    ctx = current_task("run_graph()")
    if ctx.children is None:
        raise GraphDefinitionError("run_graph() needs a node run by an App (App.run/resume)")
    level = await ctx.children(graph, input, ctx, current_address())
    values: dict[str, Any] = level.values()
    return values
