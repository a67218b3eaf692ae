"""Traces, logs and metrics of interlock's runs (see docs/observability.md).

* **Traces**: with ``opentelemetry-api`` installed (``pip install 'interlock[otel]'``) and a
  tracer provider configured, runs, supersteps, nodes, decisions and effects are spans of the
  tracer ``"interlock"``, and a run resumed after an interrupt (in any process, days later) is
  linked to the run that asked. Without either, nothing is traced and nothing is paid.
* **Logs**: ``interlock.runtime`` logs runs, interrupts and decisions; `ContextFilter` adds
  ``thread_id``, ``run_id`` and ``interrupt_id`` to records (a node's own included), and
  `JsonFormatter` writes one JSON object per line. Nothing is printed until the application
  configures logging.
* **Metrics**: `PrometheusMetrics` counts runs, interrupts and decisions in a Prometheus
  registry (``prometheus_client``, in the ``server`` extra); ``interlock serve`` serves them
  at ``/metrics``.
"""

from __future__ import annotations

from .._public import publish
from ._context import Context as Context
from ._context import current_context as current_context
from ._logging import ContextFilter as ContextFilter
from ._logging import JsonFormatter as JsonFormatter
from ._prometheus import NO_TOOL as NO_TOOL
from ._prometheus import PendingCounts as PendingCounts
from ._prometheus import PrometheusMetrics as PrometheusMetrics
from ._tracing import tracer as tracer
from ._tracing import use_tracer_provider as use_tracer_provider

__all__ = [
    "NO_TOOL",
    "Context",
    "ContextFilter",
    "JsonFormatter",
    "PendingCounts",
    "PrometheusMetrics",
    "current_context",
    "tracer",
    "use_tracer_provider",
]

publish(__name__, globals(), __all__)
