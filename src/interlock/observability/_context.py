"""Which call of interlock the current task is part of: the thread, the run, the interrupt.

`App.run`, `App.resume` and `App.decide` each set a `Scope` in a context variable for as long as
they last. Tasks a call starts (its nodes) inherit it, so a log record a node writes, and the
runtime's own, can say which thread and run they belong to (`ContextFilter`), and the tracing
glue finds the run's span there.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Literal

import msgspec

from .._lazy import lazy_module

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from ._otel import Tracing

if TYPE_CHECKING:
    import secrets
else:  # imported by the first call that needs it, not by `import interlock`
    secrets = lazy_module("secrets", globals())

__all__ = ["CURRENT", "CallKind", "Context", "Scope", "current_context"]

CallKind = Literal["run", "resume", "decide"]
"""The App call a scope belongs to."""


class Scope:
    """The call in progress, as logs and traces see it (mutable; one per call)."""

    __slots__ = ("_run_id", "call", "interrupt_id", "span", "thread", "traceparent", "tracer")

    def __init__(self, call: CallKind, thread: str) -> None:
        self.call: CallKind = call
        self.thread = thread
        self.interrupt_id: str | None = None
        """The interrupt the call is about, when it is about one (a single decision)."""
        self._run_id: str | None = None
        self.span: Span | None = None
        """The call's run span, while it records (None: not traced, or not sampled)."""
        self.tracer: Tracing | None = None
        """The tracer of that span, for the spans of its steps, nodes and effects."""
        self.traceparent: str | None = None
        """The W3C ``traceparent`` of that span, stored with the call's checkpoints."""

    @property
    def run_id(self) -> str:
        """A random id of this call, made the first time something asks for it."""
        if self._run_id is None:
            self._run_id = secrets.token_hex(8)
        return self._run_id

    def __repr__(self) -> str:
        return f"<Scope {self.call} thread={self.thread!r} interrupt={self.interrupt_id}>"


CURRENT: ContextVar[Scope | None] = ContextVar("interlock_scope", default=None)
"""The call the current task is part of (None outside any)."""


class Context(msgspec.Struct, frozen=True, kw_only=True):
    """What interlock is doing in the current task, as `current_context` reports it."""

    call: CallKind
    """The App call in progress: ``"run"``, ``"resume"`` or ``"decide"``."""
    thread_id: str
    """Its thread."""
    run_id: str
    """A random id of the call (the same in every record and span of it)."""
    interrupt_id: str | None
    """The interrupt it is about, when it decides (or resumes with) exactly one."""


def current_context() -> Context | None:
    """The interlock call the current task is part of, or None outside any.

    Inside a node, it names the thread and the run the node runs in (a sketch, not run)::

        ctx = current_context()
        if ctx is not None:
            print(ctx.thread_id, ctx.run_id)
    """
    scope = CURRENT.get()
    if scope is None:
        return None
    return Context(
        call=scope.call,
        thread_id=scope.thread,
        run_id=scope.run_id,
        interrupt_id=scope.interrupt_id,
    )
