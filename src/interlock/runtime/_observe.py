"""What the runtime tells observers: spans, log records and hook reports of its calls.

The runtime calls in here at a few points — a call begins and ends (`RunWatch`, `CallScope`),
a superstep and a task run (`Steps`), a checkpoint commit raised or decided interrupts
(`committed`), a decision is written (`deciding`), a dangerous call is made (`effect_span`), a
lease is lost (`lease_lost`). What is off costs nothing more than the check that says so: no
tracer configured means no span object, INFO disabled means no record, no `PrometheusMetrics`
attached means no hook call. See `interlock.observability`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from contextvars import Token
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypeVar

from .._errors import FencedOut, RunError
from ..observability import _hooks
from ..observability._context import CURRENT, CallKind, Scope
from ..observability._logging import library_logger
from ..observability._tracing import tracer
from ._records import Address, Decision, Interrupt, RunResult
from ._signals import InterruptSignal, Raised

if TYPE_CHECKING:
    from opentelemetry.util.types import AttributeValue

    from ..observability._otel import Active, Tracing
    from ._level import Level, TaskState

__all__ = [
    "CallScope",
    "EffectOutcome",
    "RunWatch",
    "Steps",
    "committed",
    "deciding",
    "effect_span",
    "lease_lost",
    "stored_traceparent",
]

log: Final = library_logger("interlock.runtime")

TRACEPARENT: Final = "traceparent"
"""The metadata key of a checkpoint that holds the W3C trace context of its run's span."""

EndStatus = Literal["done", "interrupted", "paused", "failed", "error", "cancelled"]
"""How a run call ended: its result's status, or what it raised (a `RunError` is
``failed``, any other error ``error``, a cancellation ``cancelled``)."""

EffectOutcome = Literal["called", "recorded", "reconciled", "retried"]
"""What a dangerous or idempotent call did: made the call; returned the recorded result; took
the result a person gave; made the call again, as a person asked."""

_NULL: Final = nullcontext()
_INFO: Final = logging.INFO
_DEBUG: Final = logging.DEBUG


def tool_of(address: Address) -> str | None:
    """The tool an interrupt at ``address`` waits on (its innermost tool segment), if any."""
    return next((seg.name for seg in reversed(address) if seg.kind == "tool"), None)


def _status_of(error: BaseException) -> EndStatus:
    if isinstance(error, RunError):
        return "failed"
    return "error" if isinstance(error, Exception) else "cancelled"


class _Meta(Protocol):
    @property
    def meta(self) -> Mapping[str, Any]: ...


class _Found(Protocol):
    """A thread as a call found it (`Opened`)."""

    watch: RunWatch | None

    @property
    def head(self) -> _Meta | None: ...


FoundT = TypeVar("FoundT", bound=_Found)


class RunWatch(Scope):
    """One `App.run` or `App.resume` call, for traces, logs and metrics: a ``with`` block.

    It is the call's `Scope`, set for the block (what `ContextFilter` and the spans of the
    call's steps read); `opened` starts the run's span once the thread is read (a resume links
    it to the span stored with the thread's head); `stopped` takes the result; leaving ends the
    span, reports the run to the hooks and logs how it ended. With nothing observing, it costs
    the scope and a few flag checks.
    """

    __slots__ = ("_active", "_began", "_graph", "_info", "_result", "_token", "_tracer", "steps")

    def __init__(self, thread: str, graph: str, *, resumed: bool) -> None:
        # `Scope.__init__` inlined: this runs once per run, and every call counts here.
        self.call: CallKind = "resume" if resumed else "run"
        self.thread = thread
        self.interrupt_id = self._run_id = self.span = self.tracer = self.traceparent = None
        self._graph = graph
        self._active: Active | None = None
        self._result: RunResult[Any] | None = None
        self.steps: Steps | None = None
        """What the engine reports of the run's steps (None: nothing; see `opened`)."""

    def __enter__(self) -> RunWatch:
        self._token: Token[Scope | None] = CURRENT.set(self)
        self._tracer = t = tracer()
        self._info = info = log.isEnabledFor(_INFO)
        # The clock is read only when something will report the duration.
        self._began = time.perf_counter() if info or _hooks.OBSERVERS or t is not None else 0.0
        if info and log.isEnabledFor(_DEBUG):
            self.steps = Steps(None, debug=True)
        if info:
            log.info(
                "%s of thread %r started",
                self.call,
                self.thread,
                extra={"graph": self._graph, "resumed": self.call == "resume"},
            )
        return self

    def opened(self, found: FoundT) -> FoundT:
        """The thread as the call found it: start the run's span (once); mark it as ours."""
        if self._tracer is not None and self._active is None:
            self._start(self._tracer, found.head)
        found.watch = self
        return found

    def _start(self, t: Tracing, head: _Meta | None) -> None:
        resumed = self.call == "resume"
        stored = t.remote(head.meta.get(TRACEPARENT)) if resumed and head is not None else None
        attributes: dict[str, AttributeValue] = {
            "interlock.thread": self.thread,
            "interlock.graph": self._graph,
            "interlock.resumed": resumed,
            "interlock.run.id": self.run_id,
        }
        # It covers the call from its start, the read of the thread included.
        began = time.time_ns() - int((time.perf_counter() - self._began) * 1e9)
        span = t.start("interlock.run", attributes, stored=stored, start_time=began)
        self._active = t.active(span)
        self._active.__enter__()
        if span.is_recording():
            self.span, self.tracer, self.traceparent = span, t, t.traceparent(span)
            self.steps = Steps(t, debug=self.steps is not None)

    def stopped(self, result: RunResult[Any]) -> RunResult[Any]:
        """The call's result: how the run ended."""
        self._result = result
        return result

    def __exit__(self, typ: object, error: BaseException | None, tb: object) -> None:
        if self._began:  # something reports the run (else: nothing to do but leave the scope)
            result = self._result
            status: EndStatus
            if error is not None:
                status = _status_of(error)
            else:
                status = "done" if result is None else result.status
            seconds = time.perf_counter() - self._began
            checkpoint = None if result is None else result.checkpoint_id
            if self._active is not None:
                if self.span is not None:
                    self.span.set_attribute("interlock.status", status)
                    if checkpoint is not None:
                        self.span.set_attribute("interlock.checkpoint.id", checkpoint)
                self._active.__exit__(typ, error, tb)
            if _hooks.OBSERVERS:
                _hooks.run_ended(status, seconds)
            if self._info:
                why = "" if error is None else f" ({type(error).__name__}: {error})"
                log.info(
                    "%s of thread %r stopped: %s%s after %.1f ms",
                    self.call,
                    self.thread,
                    status,
                    why,
                    seconds * 1000,
                    extra={"status": status, "seconds": seconds, "checkpoint_id": checkpoint},
                )
        if error is not None and isinstance(error, FencedOut):
            lease_lost(self.thread, error)
        CURRENT.reset(self._token)


class CallScope:
    """A call's `Scope` for a ``with`` block (`App.decide`'s; its span is made by `deciding`)."""

    __slots__ = ("_token", "scope")

    def __init__(self, thread: str, call: CallKind = "decide") -> None:
        self.scope = Scope(call, thread)

    def __enter__(self) -> Scope:
        self._token: Token[Scope | None] = CURRENT.set(self.scope)
        return self.scope

    def __exit__(self, *exc: object) -> None:
        CURRENT.reset(self._token)


def stored_traceparent(meta: Mapping[str, Any]) -> str | None:
    """The ``traceparent`` stored in a checkpoint's metadata, if there is one.

    A call without a recording span of its own (a decision, an untraced run) carries it
    forward into its own checkpoints, so the next resume still finds the span that asked.
    """
    found = meta.get(TRACEPARENT)
    return found if isinstance(found, str) else None


class Steps:
    """What the engine reports of a run's supersteps and tasks: spans, and DEBUG records."""

    __slots__ = ("debug", "tracer")

    def __init__(self, tracer: Tracing | None, *, debug: bool) -> None:
        self.tracer = tracer
        """Makes the spans (None: the run is not traced)."""
        self.debug = debug
        """Log each superstep at DEBUG."""

    def step(self, level: Level, runnable: Sequence[TaskState]) -> AbstractContextManager[Any]:
        """A superstep of ``level`` is about to run ``runnable``: its span, as a ``with``."""
        if self.debug:
            log.debug(
                "step %d of thread %r runs %s",
                level.step,
                level.thread,
                ", ".join(t.node for t in runnable),
                extra={"step": level.step, "address": str(level.base)},
            )
        if self.tracer is None:
            return _NULL
        attributes: dict[str, AttributeValue] = {
            "interlock.thread": level.thread,
            "interlock.step": level.step,
            "interlock.nodes": [t.node for t in runnable],
        }
        if level.base:
            attributes["interlock.address"] = str(level.base)
        return self.tracer.active(self.tracer.span("interlock.step", attributes))

    def node(self, level: Level, task: TaskState, address: Address) -> Active | None:
        """A task is about to run its node: its span, as a ``with`` (None: not traced)."""
        if self.tracer is None:
            return None
        attributes: dict[str, AttributeValue] = {
            "interlock.thread": level.thread,
            "interlock.node": task.node,
            "interlock.task.id": task.id,
            "interlock.step": level.step,
            "interlock.address": str(address),
        }
        # Asking a question is not a failure of the node: it re-runs once it is answered.
        return self.tracer.active(
            self.tracer.span("interlock.node", attributes),
            signal=InterruptSignal,
            on_signal=("interlock.node.interrupted", True),
        )


def _interrupt_attributes(i: Interrupt, tool: str | None) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        "interlock.interrupt.id": i.id,
        "interlock.interrupt.kind": i.kind,
        "interlock.interrupt.address": str(i.address),
    }
    if i.key is not None:
        attributes["interlock.interrupt.key"] = i.key
    if tool is not None:
        attributes["interlock.interrupt.tool"] = tool
    return attributes


def committed(
    level: Level, thread: str, fresh: Sequence[Raised], decisions: Sequence[Decision]
) -> None:
    """A checkpoint was written that raised ``fresh`` interrupts and recorded ``decisions``.

    ``level.answered`` holds the interrupts the decisions answered (`decide` left them there).
    """
    observers = _hooks.OBSERVERS
    info = log.isEnabledFor(_INFO)
    scope = CURRENT.get()
    span = None if scope is None else scope.span
    for r in fresh:
        i = r.interrupt
        tool = tool_of(i.address)
        if observers:
            _hooks.interrupt_raised(tool, i.kind)
            if i.kind == "reconcile":
                _hooks.reconcile_raised()
        if span is not None:
            span.add_event("interlock.interrupt", _interrupt_attributes(i, tool))
        extra = {
            "thread_id": thread,  # also when no call's scope says so (a sweep)
            "interrupt_id": i.id,
            "kind": i.kind,
            "tool": tool,
            "key": i.key,
        }
        if i.kind == "reconcile":
            effect = i.info.get("effect") if isinstance(i.info, dict) else None
            log.warning(
                "effect %r of thread %r needs reconciling: it started but its outcome was never "
                "recorded; interrupt %s asks a person",
                effect,
                thread,
                i.id,
                extra={**extra, "effect": effect},
            )
        elif info:
            where = f" on tool {tool!r}" if tool is not None else ""
            log.info(
                "interrupt %s (%s%s) raised on thread %r", i.id, i.kind, where, thread, extra=extra
            )
    if not decisions:
        return
    answered = level.answered
    for d in decisions:
        asked = answered.get(d.interrupt_id)
        tool = None if asked is None else tool_of(asked.address)
        waited = None if asked is None else max(0.0, d.decided_at - asked.created_at)
        if observers and waited is not None:
            _hooks.decision_recorded(tool, waited, d.final)
        if info:
            by = f" by {d.actor}" if d.actor else ""
            kind = "decision" if d.final else "vote"
            log.info(
                "%s on interrupt %s of thread %r recorded%s",
                kind,
                d.interrupt_id,
                thread,
                by,
                extra={
                    "thread_id": thread,
                    "interrupt_id": d.interrupt_id,
                    "actor": d.actor,
                    "final": d.final,
                    "tool": tool,
                    "waited_seconds": waited,
                },
            )
    if scope is not None and all(d.interrupt_id == decisions[0].interrupt_id for d in decisions):
        scope.interrupt_id = decisions[0].interrupt_id


class _Deciding:
    """The span of a decision's commit: started before the write, ended after it."""

    __slots__ = ("span", "tracing")

    def __init__(
        self,
        t: Tracing,
        thread: str,
        meta: Mapping[str, Any] | None,
        decisions: Sequence[Decision],
        actor: str | None,
    ) -> None:
        attributes: dict[str, AttributeValue] = {
            "interlock.thread": thread,
            "interlock.interrupt.ids": [d.interrupt_id for d in decisions],
            "interlock.decision.final": all(d.final for d in decisions),
        }
        if len(decisions) == 1:
            attributes["interlock.interrupt.id"] = decisions[0].interrupt_id
        if actor is not None:
            attributes["interlock.actor"] = actor
        stored = t.remote(meta.get(TRACEPARENT)) if meta else None
        self.tracing = t
        self.span = t.start("interlock.decision", attributes, stored=stored)

    def end(self, error: BaseException | None = None) -> None:
        """The write is over (``error``: it failed)."""
        if error is not None:
            self.tracing.failed(self.span, error)
        self.span.end()


def deciding(
    thread: str, meta: Mapping[str, Any] | None, decisions: Sequence[Decision], actor: str | None
) -> _Deciding | None:
    """The span of a commit that records ``decisions`` (None: not traced).

    ``meta`` is the metadata of the thread's head: the decision is linked to the span stored
    there (the run that asked), and continues its trace when no span is current.
    """
    scope = CURRENT.get()
    t = scope.tracer if scope is not None and scope.tracer is not None else tracer()
    return None if t is None else _Deciding(t, thread, meta, decisions, actor)


def effect_span(name: str, key: str, *, idempotent: bool) -> Active | None:
    """The span of a dangerous or idempotent call, as a ``with`` (None: the run is not traced).

    Set ``interlock.effect.outcome`` on it (an `EffectOutcome`) before the block ends; a call
    that raises gets ``failed``, one that asks a person to reconcile gets ``reconcile``.
    """
    scope = CURRENT.get()
    if scope is None or scope.tracer is None:
        return None
    attributes: dict[str, AttributeValue] = {
        "interlock.thread": scope.thread,
        "interlock.effect.name": name,
        "interlock.effect.key": key,
        "interlock.effect.idempotent": idempotent,
    }
    t = scope.tracer
    return t.active(
        t.span("interlock.effect", attributes),
        signal=InterruptSignal,  # a reconcile question: the outcome was unknown
        on_signal=("interlock.effect.outcome", "reconcile"),
        on_error=("interlock.effect.outcome", "failed"),
    )


def lease_lost(thread: str, error: FencedOut) -> None:
    """A run found that another executor holds its thread now (renewing, or writing)."""
    log.warning(
        "lost the lease of thread %r to another executor: %s",
        thread,
        error,
        extra={"thread_id": thread},
    )
