"""`Budget`: how much an agent may use before a person is asked whether it may go on.

Before each model turn, an agent with a budget compares what the thread used (the runtime's
usage totals, `interlock.runtime.current_usage`) with its limits. Once a limit is reached, the
run stops with an approval question — "This run has used 41,200 tokens ($0.62) of 40,000;
continue with another 20,000?" — that every surface shows and decides like a tool call:

- approve: go on with the limits the question proposes;
- edit: go on with the limits the approver wrote (``arguments``: ``{"tokens": 80000}``);
- reject (or respond): the agent stops, and says why, as its last reply.

The raised limits are kept with the thread's usage totals (``metadata["usage"]["grants"]``),
so they hold for the rest of the run (for a ``per="thread"`` budget: of the thread) in
whichever process continues it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from ..runtime import Tally, UsageTotals

__all__ = ["Budget"]

BUDGET_TOOL: Final = "budget"
"""The ``tool`` a budget question names (how inboxes and policies tell it apart)."""

_LIMITS: Final = ("tokens", "cost", "turns", "seconds")
_WHOLE: Final = frozenset({"tokens", "turns"})


@dataclass(frozen=True, kw_only=True, slots=True)
class Budget:
    """Limits on what an agent's run (or its whole thread) may use before a person decides.

    Args:
        tokens: Input and output tokens of every model call.
        cost: What the calls cost at the App's prices (``compile(prices=...)``); calls of an
            unpriced model count nothing toward it.
        turns: Model calls.
        seconds: Time spent running (time waiting on a person is not counted).
        per: ``"run"`` counts from the `App.run` that started the run (every resume
            included); ``"thread"`` counts the thread's whole life.
        extend: What approving adds to a limit that was reached, as a fraction of the limit
            (0.5: another half).

    Every model call of the thread counts, whichever agent made it (a supervisor's budget
    covers its workers).

    Example:
        >>> Budget(tokens=40_000, cost=1.5).limits()
        {'tokens': 40000, 'cost': 1.5}
    """

    tokens: int | None = None
    cost: float | None = None
    turns: int | None = None
    seconds: float | None = None
    per: Literal["run", "thread"] = "run"
    extend: float = 0.5

    def __post_init__(self) -> None:
        given = False
        for name in _LIMITS:
            value = getattr(self, name)
            if value is None:
                continue
            given = True
            whole = name in _WHOLE
            if (
                isinstance(value, bool)
                or not isinstance(value, int if whole else int | float)
                or not math.isfinite(value)
                or value <= 0
            ):
                kind = "a positive int" if whole else "a positive number"
                raise ValueError(f"Budget({name}=...) must be {kind}, not {value!r}")
        if not given:
            raise ValueError(
                "a Budget needs at least one limit: tokens, cost, turns or seconds "
                "(for example Budget(tokens=40_000))"
            )
        if self.per not in ("run", "thread"):
            raise ValueError(f"Budget(per=...) must be 'run' or 'thread', not {self.per!r}")
        if (
            isinstance(self.extend, bool)
            or not isinstance(self.extend, int | float)
            or not math.isfinite(self.extend)
            or self.extend <= 0
        ):
            raise ValueError(f"Budget(extend=...) must be a positive number, not {self.extend!r}")

    def limits(self) -> dict[str, float]:
        """The limits set, by name (tokens and turns as whole numbers)."""
        return {n: _shown(n, getattr(self, n)) for n in _LIMITS if getattr(self, n) is not None}


def grant_key(agent: str, budget: Budget) -> str:
    """Where the limits a person raised for ``agent``'s budget are kept."""
    return f"{agent}:{budget.per}"


def used(totals: UsageTotals, budget: Budget) -> dict[str, float]:
    """What counts against ``budget``, by limit name."""
    tally: Tally = totals.run if budget.per == "run" else totals.thread
    out: dict[str, float] = {
        "tokens": tally.tokens,
        "cost": float(tally.cost or 0.0),
        "turns": tally.calls,
    }
    if budget.per == "run":
        out["seconds"] = round(totals.run_seconds, 3)
    return out


def current_limits(totals: UsageTotals, agent: str, budget: Budget) -> dict[str, float]:
    """The budget's limits, as people raised them so far."""
    limits = budget.limits()
    raised = totals.grants.get(grant_key(agent, budget)) or {}
    for name in limits:
        value = raised.get(name)
        if isinstance(value, int | float) and value > 0:
            limits[name] = _shown(name, value)
    return limits


def with_raised(limits: Mapping[str, float], raised: Mapping[str, Any]) -> dict[str, float]:
    """``limits`` with those a person set (an edit's arguments, or the proposal) instead."""
    return {**limits, **{k: _shown(k, v) for k, v in raised.items() if k in limits}}


def reached(spent: Mapping[str, float], limits: Mapping[str, float]) -> list[str]:
    """The limits the next turn would go past: tokens, cost and seconds once used up, turns
    once the next would be one too many."""
    out = []
    for name, limit in limits.items():
        value = spent.get(name)
        if value is None:
            continue
        if (value + 1 > limit) if name == "turns" else (value >= limit):
            out.append(name)
    return out


def proposal(
    spent: Mapping[str, float], limits: Mapping[str, float], over: list[str], budget: Budget
) -> dict[str, float]:
    """The limits approving sets: each one reached, raised by ``extend`` of the original."""
    original = budget.limits()
    out = dict(limits)
    for name in over:
        step = original[name] * budget.extend
        value = max(limits[name], spent[name]) + step
        out[name] = _shown(name, math.ceil(value) if name in _WHOLE else value)
    return out


def _shown(name: str, value: float) -> float:
    """A limit as people read it: tokens and turns whole, cost and seconds as numbers."""
    return int(value) if name in _WHOLE else round(float(value), 6)


def limits_schema(budget: Budget) -> dict[str, Any]:
    """The JSON schema of the limits an approver may write (an edit's ``arguments``)."""
    props: dict[str, Any] = {}
    for name in budget.limits():
        kind = "integer" if name in _WHOLE else "number"
        props[name] = {"type": kind, "exclusiveMinimum": 0}
    return {"type": "object", "properties": props, "additionalProperties": False}


def describe(
    spent: Mapping[str, float],
    limits: Mapping[str, float],
    over: list[str],
    proposed: Mapping[str, float],
    per: str,
) -> str:
    """The question a person reads: what was used of what, and what approving grants."""
    parts = []
    for name in over:
        shown = _amount(name, spent[name])
        if name == "tokens" and "cost" not in over and spent.get("cost"):
            shown += f" ({_amount('cost', spent['cost'])})"
        parts.append(f"{shown} of {_amount(name, limits[name])}")
    more = ", ".join(_amount(n, proposed[n] - max(limits[n], spent[n])) for n in over)
    return f"This {per} has used {'; '.join(parts)}; continue with another {more}?"


def _amount(name: str, value: float) -> str:
    if name == "tokens":
        return f"{int(value):,} tokens"
    if name == "turns":
        return f"{int(value):,} turns"
    if name == "seconds":
        return f"{value:,.0f} seconds"
    return f"${value:,.2f}"
