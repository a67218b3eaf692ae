"""What nodes call to count model usage: `report_usage`, `current_usage`, `keep_limits`.

They reach the running call's `UsageMeter` through the task's context (see `_usage`).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..graph import Usage
from ..observability import _hooks as hooks
from ._context import current_task_or_none
from ._usage import UsageMeter, UsageTotals

__all__ = ["current_usage", "keep_limits", "report_usage"]


def current_usage() -> UsageTotals:
    """What the running thread used so far (this call's model calls included).

    Call it in a node; outside an App's run it returns empty totals. Reading it makes the run
    keep its totals (and its running time) in its checkpoints from then on.
    """
    meter = _meter()
    if meter is None:
        return UsageTotals()
    meter.activate()
    return meter.totals()


def keep_limits(name: str, limits: Mapping[str, float]) -> None:
    """Keep limits a person raised under ``name`` with the running thread's usage totals.

    They hold for the rest of the run (names ending ``:thread``: of the thread) in whichever
    process continues it, and read back as `UsageTotals.grants` (what `Budget` does with a
    person's decision). Outside an App's run nothing is kept.
    """
    meter = _meter()
    if meter is not None:
        meter.grant(name, limits)


def report_usage(usage: Usage, *, model: str | None = None) -> float | None:
    """Count one model call's tokens toward the running thread's totals.

    The agents call it for every reply that says what it used; a node that calls a model
    itself may too. The totals go into ``metadata["usage"]`` of the run's checkpoints and
    into ``interlock_model_tokens`` / ``interlock_model_cost`` when Prometheus metrics are
    attached. Outside an App's run only the metrics count it.

    Args:
        usage: What the call used.
        model: The model's name (prices are looked up by it; see ``Graph.compile(prices=)``).

    Returns:
        What the call cost at the App's prices, or None without a price for ``model``.
    """
    if not isinstance(usage, Usage):
        raise TypeError(f"report_usage takes a Usage, not {type(usage).__name__}")
    meter = _meter()
    cost = None if meter is None else meter.report(usage, model)
    if hooks.OBSERVERS:
        hooks.model_used(model, usage.input_tokens, usage.output_tokens, usage.cached_tokens, cost)
    return cost


def _meter() -> UsageMeter | None:
    ctx = current_task_or_none()
    return None if ctx is None else ctx.usage
