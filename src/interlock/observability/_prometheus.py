"""`PrometheusMetrics`: the runtime's hook reports as Prometheus metrics.

``prometheus_client`` (in the ``server`` extra) is imported when a `PrometheusMetrics` is
made, never by the runtime: a program that does not ask for metrics does not load it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Final, Protocol

from . import _hooks

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = ["NO_TOOL", "PendingCounts", "PrometheusMetrics"]

NO_TOOL: Final = ""
"""The ``tool`` label of interrupts that wait on no tool (a node's own question, a pause)."""

RUN_BUCKETS: Final = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)
"""Seconds: a run lasts from a millisecond (no model) to minutes (a model and its tools)."""
DECISION_BUCKETS: Final = (
    *(1.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0),
    *(3600.0, 4 * 3600.0, 8 * 3600.0, 86400.0, 3 * 86400.0, 7 * 86400.0),
)
"""Seconds: a person answers within a second (a terminal) or after a weekend."""


class PendingCounts(Protocol):
    """What `PrometheusMetrics.refresh` reads: an `App` (its pending interrupts per tool)."""

    def inbox_counts(self) -> Awaitable[Mapping[str | None, int]]:
        """How many interrupts are pending, per tool (None: on no tool)."""
        ...


class PrometheusMetrics:
    """The runtime's metrics, registered in a Prometheus registry.

    Every run, interrupt, decision and reconcile question of every `App` in the process counts
    while the metrics are attached (`attach`); `refresh` sets the pending gauge from apps'
    inboxes. The metrics (``tool`` is ``""`` for interrupts that wait on no tool):

    * ``interlock_runs_total{status}``: runs ended (`App.run`, `App.resume`), by status:
      ``done``, ``interrupted``, ``paused``, ``failed`` (a node or the run failed), ``error``
      (the call was refused or the store failed), ``cancelled``;
    * ``interlock_run_seconds``: how long they took;
    * ``interlock_interrupts_raised_total{tool,kind}``: interrupts committed;
    * ``interlock_decision_seconds{tool}``: from an interrupt's creation to the decision that
      resolved it (votes toward a quorum are not counted; the last approval is);
    * ``interlock_reconciles_total``: ``reconcile`` questions (a dangerous call's outcome was
      unknown);
    * ``interlock_interrupts_pending{tool}``: interrupts waiting, as of the last `refresh`;
    * ``interlock_model_tokens_total{model,kind}``: tokens model calls used (``kind``:
      ``input``, ``output``, ``cached``), as the agents report them (`report_usage`);
    * ``interlock_model_cost_total{model}``: what they cost at the App's prices.

    For example (a sketch, not run; the tracing how-to guide runs one)::

        metrics = PrometheusMetrics()   # prometheus_client's default registry
        metrics.attach()
        ...
        await metrics.refresh(app)      # before a scrape, or every few seconds

    Args:
        registry: Where to register the metrics (default: ``prometheus_client.REGISTRY``,
            what ``prometheus_client.start_http_server`` serves). One registry takes one
            `PrometheusMetrics`.

    Raises:
        ImportError: ``prometheus_client`` is not installed.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        try:
            import prometheus_client as prom
        except ImportError as exc:
            raise ImportError(
                "interlock.observability.PrometheusMetrics needs prometheus_client: "
                "pip install 'interlock[server]'"
            ) from exc
        self.registry: CollectorRegistry = prom.REGISTRY if registry is None else registry
        """The registry the metrics are in."""
        at = self.registry
        self.runs = prom.Counter(
            "interlock_runs", "Runs ended, by status.", ["status"], registry=at
        )
        self.run_seconds = prom.Histogram(
            "interlock_run_seconds", "How long runs took.", registry=at, buckets=RUN_BUCKETS
        )
        self.interrupts_raised = prom.Counter(
            "interlock_interrupts_raised",
            "Interrupts raised (committed), by the tool they wait on and kind.",
            ["tool", "kind"],
            registry=at,
        )
        self.decision_seconds = prom.Histogram(
            "interlock_decision_seconds",
            "Time from an interrupt's creation to the decision that resolved it, by tool.",
            ["tool"],
            registry=at,
            buckets=DECISION_BUCKETS,
        )
        self.decisions_refused = prom.Counter(
            "interlock_decisions_refused",
            "Decisions refused by their question's authority (nothing was recorded), by tool "
            "and the rule that refused: who (not among those who may decide), starter, "
            "approver, principal (no principal named), override.",
            ["tool", "rule"],
            registry=at,
        )
        self.reconciles = prom.Counter(
            "interlock_reconciles",
            "Reconcile questions raised: a dangerous call's outcome was unknown.",
            registry=at,
        )
        self.threads_failed = prom.Counter(
            "interlock_threads_failed",
            "Threads recorded failed because their continuation could not run (the graph "
            "changed, a checkpoint is damaged...), by error type. Each waits for a fix and a "
            "resume; find them with `interlock threads --status failed`.",
            ["error"],
            registry=at,
        )
        self.model_tokens = prom.Counter(
            "interlock_model_tokens",
            "Tokens model calls used, by model and kind: input, output, cached (cached input "
            "tokens are also counted as input).",
            ["model", "kind"],
            registry=at,
        )
        self.model_cost = prom.Counter(
            "interlock_model_cost",
            "What model calls cost at the configured prices (Graph.compile's prices), by "
            "model; calls of a model without a price are not counted.",
            ["model"],
            registry=at,
        )
        self.pending = prom.Gauge(
            "interlock_interrupts_pending",
            "Interrupts waiting for a decision, by tool, as of the last refresh.",
            ["tool"],
            registry=at,
        )
        self._pending_tools: set[str] = set()

    def __repr__(self) -> str:
        state = "attached" if self.attached else "detached"
        return f"<PrometheusMetrics {state}>"

    @property
    def attached(self) -> bool:
        """Whether the runtime's reports reach these metrics."""
        return any(o is self for o in _hooks.OBSERVERS)

    def attach(self) -> None:
        """Count what the runtime reports from now on (several metrics may be attached)."""
        _hooks.subscribe(self)

    def detach(self) -> None:
        """Stop counting; the values so far stay in the registry."""
        _hooks.unsubscribe(self)

    async def refresh(self, *apps: PendingCounts) -> None:
        """Set ``interlock_interrupts_pending`` from the apps' pending interrupts, per tool.

        The counts of several apps add up per tool; a tool with nothing pending any more
        loses its series. The counts come from the stores' indexes (`App.inbox_counts`).
        """
        totals: dict[str, int] = {}
        for app in apps:
            for tool, n in (await app.inbox_counts()).items():
                label = NO_TOOL if tool is None else tool
                totals[label] = totals.get(label, 0) + n
        # Invariant: nothing awaits from here on, so a scrape sees the old or the new counts.
        for gone in self._pending_tools - totals.keys():
            self.pending.remove(gone)
        for label, n in totals.items():
            self.pending.labels(label).set(n)
        self._pending_tools = set(totals)

    # -- RuntimeObserver -------------------------------------------------------------------

    def run_ended(self, status: str, seconds: float) -> None:
        """Count a run that ended."""
        self.runs.labels(status).inc()
        self.run_seconds.observe(seconds)

    def interrupt_raised(self, tool: str | None, kind: str) -> None:
        """Count an interrupt that was committed."""
        self.interrupts_raised.labels(NO_TOOL if tool is None else tool, kind).inc()

    def decision_recorded(self, tool: str | None, seconds: float, final: bool) -> None:
        """Observe how long a resolved interrupt waited (votes are left out)."""
        if final:
            self.decision_seconds.labels(NO_TOOL if tool is None else tool).observe(seconds)

    def decision_refused(self, tool: str | None, rule: str) -> None:
        """Count a decision its question's authority refused."""
        self.decisions_refused.labels(NO_TOOL if tool is None else tool, rule).inc()

    def model_used(
        self,
        model: str | None,
        input_tokens: int,
        output_tokens: int,
        cached: int,
        cost: float | None,
    ) -> None:
        """Count the tokens (and the cost) of a model call."""
        name = model or "unknown"
        self.model_tokens.labels(name, "input").inc(input_tokens)
        self.model_tokens.labels(name, "output").inc(output_tokens)
        if cached:
            self.model_tokens.labels(name, "cached").inc(cached)
        if cost is not None:
            self.model_cost.labels(name).inc(cost)

    def reconcile_raised(self) -> None:
        """Count a reconcile question."""
        self.reconciles.inc()

    def thread_failed(self, error: str) -> None:
        """Count a thread recorded failed after its continuation."""
        self.threads_failed.labels(error).inc()
