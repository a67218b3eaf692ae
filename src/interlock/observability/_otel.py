"""interlock's spans through the OpenTelemetry API: the one module that imports it.

`_tracing.tracer` imports this module the first time a tracer provider may be configured (the
application imported the API, or gave interlock a provider), never before: a program that
has the API installed but does not trace pays neither its import nor its objects.

A run's span context is stored with its checkpoints as a W3C ``traceparent`` string;
`Tracing.remote` reads one back, ignoring anything malformed, and `Tracing.start` links a new
span to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import Token
from typing import Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context as OtelContext
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    Status,
    StatusCode,
    Tracer,
    TracerProvider,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

__all__ = ["Active", "Tracing", "configured", "global_provider"]

_UNCONFIGURED: Final[tuple[type[TracerProvider], ...]] = (
    trace.ProxyTracerProvider,
    trace.NoOpTracerProvider,
)
_PROPAGATOR: Final = TraceContextTextMapPropagator()


def global_provider() -> TracerProvider:
    """The API's global tracer provider (a proxy until the application sets one)."""
    return trace.get_tracer_provider()


def configured(provider: TracerProvider) -> bool:
    """Whether spans of ``provider`` may be recorded (it is not the API's proxy or no-op)."""
    return not isinstance(provider, _UNCONFIGURED)


def failed(span: Span, error: BaseException) -> None:
    """Mark ``span`` as failed with ``error`` (an `Exception`); a cancellation is only noted."""
    if isinstance(error, Exception):
        span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
    else:
        span.set_attribute("interlock.stopped_by", type(error).__name__)


class Active:
    """A span made the current one for a ``with`` block, and ended with it.

    A block that raises marks the span failed (`failed`), except for ``signal``: an exception
    of that type is how the block asks a question, and sets ``on_signal`` instead. ``on_error``
    is one more attribute set on a failure.
    """

    __slots__ = ("_on_error", "_on_signal", "_signal", "_token", "span")

    def __init__(
        self,
        span: Span,
        *,
        signal: type[BaseException] | None = None,
        on_signal: tuple[str, AttributeValue] | None = None,
        on_error: tuple[str, AttributeValue] | None = None,
    ) -> None:
        self.span = span
        self._signal = signal
        self._on_signal = on_signal
        self._on_error = on_error
        self._token: Token[OtelContext] | None = None

    def __enter__(self) -> Span:
        self._token = otel_context.attach(trace.set_span_in_context(self.span))
        return self.span

    def __exit__(self, typ: object, error: BaseException | None, tb: object) -> None:
        if self._token is not None:
            otel_context.detach(self._token)
        if error is not None:
            if self._signal is not None and isinstance(error, self._signal):
                if self._on_signal is not None:
                    self.span.set_attribute(*self._on_signal)
            else:
                if self._on_error is not None:
                    self.span.set_attribute(*self._on_error)
                failed(self.span, error)
        self.span.end()


class Tracing:
    """interlock's tracer, and what its spans need of the API."""

    __slots__ = ("tracer",)

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        """The OpenTelemetry tracer named ``interlock``."""

    def span(self, name: str, attributes: Mapping[str, AttributeValue]) -> Span:
        """Start a span under the current one."""
        return self.tracer.start_span(name, attributes=attributes)

    @staticmethod
    def active(
        span: Span,
        *,
        signal: type[BaseException] | None = None,
        on_signal: tuple[str, AttributeValue] | None = None,
        on_error: tuple[str, AttributeValue] | None = None,
    ) -> Active:
        """``span`` as the current one for a ``with`` block (see `Active`)."""
        return Active(span, signal=signal, on_signal=on_signal, on_error=on_error)

    def start(
        self,
        name: str,
        attributes: Mapping[str, AttributeValue],
        *,
        stored: SpanContext | None = None,
        start_time: int | None = None,
    ) -> Span:
        """Start a span under the current one, linked to ``stored`` if given.

        With no current span, a span with a stored context continues that trace: it becomes
        the stored span's child (so one trace spans the processes and the days of a thread).
        With a current span (an HTTP request, a worker's job), that one is the parent and the
        stored one is only linked.
        """
        links: list[Link] | None = None
        context: OtelContext | None = None
        if stored is not None:
            links = [Link(stored)]
            if not trace.get_current_span().get_span_context().is_valid:
                context = trace.set_span_in_context(NonRecordingSpan(stored))
        return self.tracer.start_span(
            name, context=context, links=links, attributes=attributes, start_time=start_time
        )

    @staticmethod
    def remote(value: object) -> SpanContext | None:
        """The span context a stored ``traceparent`` names; None for anything malformed."""
        if not isinstance(value, str):
            return None
        try:
            found = trace.get_current_span(_PROPAGATOR.extract({"traceparent": value}))
            sc = found.get_span_context()
        except Exception:  # whatever a damaged or hostile value does, a run must go on
            return None
        return sc if sc.is_valid else None

    @staticmethod
    def traceparent(span: Span) -> str:
        """The W3C ``traceparent`` header value of ``span`` (as a propagator sends it)."""
        sc = span.get_span_context()
        return f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{int(sc.trace_flags):02x}"

    @staticmethod
    def failed(span: Span, error: BaseException) -> None:
        """See `failed`."""
        failed(span, error)
