"""What a thread's model calls used: tokens, calls, running time and, with prices, cost.

A node reports each model call with `report_usage`; the run sums what it was told into the
metadata of the checkpoints it commits (``metadata["usage"]``), carried from each checkpoint to
the next. So `App.get_state` says what the thread used so far, and a resume in another process
goes on counting from there. The sums are of what was committed: a call whose step was lost
with its process is not in them (it is reported again when the step runs again).

Two sums are kept: the thread's whole life, and the current *run* (from an `App.run` with input,
through every resume, to the next `App.run`). A run's ``seconds`` is the time spent running,
not the time it waited on a person.

The totals are written whole only where they may have changed: on a checkpoint after a model
call was reported or a limit kept, and on the checkpoint each call stops at (so a thread at
rest — waiting, done or failed — always holds them, its running time included). A checkpoint
in between holds only the run's running seconds as of it (a number): its totals are those of
the nearest earlier checkpoint that holds them whole, with that running time, and with the
run's sums counted anew if a run's input lies between (`usage_as_of`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from ..graph import Usage

__all__ = [
    "USAGE",
    "Price",
    "Tally",
    "UsageMeter",
    "UsageTotals",
    "check_prices",
    "usage_as_of",
    "usage_of",
]

USAGE: Final = "usage"
"""The metadata key of a checkpoint's usage sums."""

_MILLION: Final = 1_000_000


class Price(msgspec.Struct, frozen=True, kw_only=True):
    """What a model costs, per million tokens, in the currency of your choice.

    ``cached`` prices the input tokens read from the provider's prompt cache (default: the
    ``input`` price); they are part of ``input_tokens``, priced at ``cached`` instead.

    Example:
        >>> from interlock.graph import Usage
        >>> Price(input=3.0, output=15.0, cached=0.3).cost(
        ...     Usage(input_tokens=10_000, output_tokens=1_000, cached_tokens=8_000)
        ... )
        0.0234
    """

    input: float
    """Per million input tokens."""
    output: float
    """Per million output tokens."""
    cached: float | None = None
    """Per million cached input tokens (None: as ``input``)."""

    def __post_init__(self) -> None:
        for name in ("input", "output", "cached"):
            value = getattr(self, name)
            if value is None and name == "cached":
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise ValueError(
                    f"Price({name}=...) must be a finite number >= 0 (per million tokens), "
                    f"not {value!r}"
                )

    def cost(self, usage: Usage) -> float:
        """What ``usage`` cost at this price."""
        cached = min(usage.cached_tokens, usage.input_tokens)
        cached_price = self.input if self.cached is None else self.cached
        total = (
            (usage.input_tokens - cached) * self.input
            + cached * cached_price
            + usage.output_tokens * self.output
        )
        return round(total / _MILLION, 9)


def check_prices(prices: Mapping[str, Price] | None) -> dict[str, Price]:
    """Check a ``{model: Price}`` table; return it as a dict.

    Raises:
        TypeError: Not a mapping of model names to `Price`.
    """
    if prices is None:
        return {}
    if not isinstance(prices, Mapping):
        raise TypeError(
            f"prices must be a mapping of model names to Price, not {type(prices).__name__}; "
            "for example {'gpt-4o': Price(input=2.5, output=10.0)}"
        )
    out: dict[str, Price] = {}
    for name, price in prices.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"prices: a model name must be a non-empty str, not {name!r}")
        if not isinstance(price, Price):
            raise TypeError(
                f"prices[{name!r}] must be a Price, not {type(price).__name__}; for example "
                "Price(input=2.5, output=10.0) (per million tokens)"
            )
        out[name] = price
    return out


def price_of(prices: Mapping[str, Price], model: str | None) -> Price | None:
    """The price of ``model``: its own entry, else the longest name it starts with
    (``claude-sonnet-4-5`` prices ``claude-sonnet-4-5-20250929``), else None."""
    if model is None or not prices:
        return None
    found = prices.get(model)
    if found is not None:
        return found
    best = max((name for name in prices if model.startswith(name)), key=len, default=None)
    return None if best is None else prices[best]


class Tally(msgspec.Struct, frozen=True, kw_only=True):
    """Sums of model calls: tokens, calls, and cost when every call had a price."""

    input_tokens: int = 0
    """Tokens sent to models."""
    output_tokens: int = 0
    """Tokens models wrote."""
    cached_tokens: int = 0
    """Of ``input_tokens``, those read from a provider's prompt cache."""
    calls: int = 0
    """Model calls reported."""
    cost: float | None = None
    """What the calls cost at the configured prices (None: no call had a price)."""
    unpriced: int = 0
    """Calls whose model had no configured price (their cost is not in ``cost``)."""

    @property
    def tokens(self) -> int:
        """Input and output tokens together."""
        return self.input_tokens + self.output_tokens

    def plus(self, usage: Usage, cost: float | None) -> Tally:
        """These sums with one more call."""
        return Tally(
            input_tokens=self.input_tokens + usage.input_tokens,
            output_tokens=self.output_tokens + usage.output_tokens,
            cached_tokens=self.cached_tokens + usage.cached_tokens,
            calls=self.calls + 1,
            cost=self.cost if cost is None else round((self.cost or 0.0) + cost, 9),
            unpriced=self.unpriced + (cost is None),
        )

    def to_meta(self) -> dict[str, Any]:
        """The sums as stored in checkpoint metadata (zeros left out)."""
        out: dict[str, Any] = {}
        if self.input_tokens:
            out["input_tokens"] = self.input_tokens
        if self.output_tokens:
            out["output_tokens"] = self.output_tokens
        if self.cached_tokens:
            out["cached_tokens"] = self.cached_tokens
        if self.calls:
            out["calls"] = self.calls
        if self.unpriced:
            out["unpriced"] = self.unpriced
        if self.cost is not None:
            out["cost"] = self.cost
        return out

    @classmethod
    def from_meta(cls, value: Any) -> Tally:
        """Sums read back from metadata; anything unreadable counts as nothing."""
        if type(value) is not dict and not isinstance(value, Mapping):
            return cls()
        # A count that is not a whole number >= 0 (a bool, a float, a str) counts as 0.
        counts = {k: v for k in _COUNTS if type(v := value.get(k)) is int and v >= 0}
        cost = value.get("cost")
        if cost is not None:
            cost = float(cost) if isinstance(cost, int | float) and type(cost) is not bool else None
        return cls(**counts, cost=cost)


class UsageTotals(msgspec.Struct, frozen=True, kw_only=True):
    """What a thread used so far: its whole life, its current run, and by model.

    Read it in a node with `current_usage`, or from a checkpoint with `usage_of`
    (``App.get_state(thread).metadata``).
    """

    thread: Tally = msgspec.field(default_factory=Tally)
    """Everything the thread's model calls used."""
    run: Tally = msgspec.field(default_factory=Tally)
    """What the current run used (since the `App.run` that started it)."""
    models: Mapping[str, Tally] = msgspec.field(default_factory=dict)
    """The thread's sums per model."""
    run_seconds: float = 0.0
    """How long the current run has been running (time waiting on a person left out)."""
    grants: Mapping[str, Mapping[str, float]] = msgspec.field(default_factory=dict)
    """Budget raised by people's decisions, by budget name (see `ToolAgent`'s ``budget=``)."""

    def to_meta(self) -> dict[str, Any]:
        """The totals as stored under ``metadata["usage"]``."""
        grants = {name: dict(g) for name, g in self.grants.items()}
        return _usage_meta(self.thread, self.run, self.run_seconds, self.models, grants)

    @classmethod
    def from_meta(cls, value: Any) -> UsageTotals:
        """Totals read back from ``metadata["usage"]`` (empty when absent or unreadable)."""
        if type(value) is not dict and not isinstance(value, Mapping):
            return cls()
        models = value.get("models")
        grants = value.get("grants")
        seconds = value.get("run_seconds")
        return cls(
            thread=Tally.from_meta(value.get("thread")),
            run=Tally.from_meta(value.get("run")),
            models={str(k): Tally.from_meta(v) for k, v in models.items() if isinstance(k, str)}
            if type(models) is dict or (models is not None and isinstance(models, Mapping))
            else {},
            run_seconds=float(seconds)
            if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds >= 0
            else 0.0,
            grants={
                str(k): {
                    str(a): b if isinstance(b, int) else float(b)
                    for a, b in v.items()
                    if isinstance(b, int | float) and not isinstance(b, bool)
                }
                for k, v in grants.items()
                if type(v) is dict or isinstance(v, Mapping)
            }
            if type(grants) is dict or (grants is not None and isinstance(grants, Mapping))
            else {},
        )


_NOTHING: Final = Tally()


def _usage_meta(
    thread: Tally,
    run: Tally,
    seconds: float | None,
    models: Mapping[str, Tally],
    grants: Mapping[str, Mapping[str, float]],
) -> dict[str, Any]:
    """``metadata["usage"]`` (`UsageTotals.to_meta`), without the running time when
    ``seconds`` is None; ``grants`` go in as given (copy them where the result is handed out)."""
    out: dict[str, Any] = {"thread": thread.to_meta(), "run": run.to_meta()}
    if seconds is not None:
        out["run_seconds"] = round(seconds, 3)
    if models:
        out["models"] = {name: t.to_meta() for name, t in models.items()}
    if grants:
        out["grants"] = grants
    return out


_COUNTS: Final = ("input_tokens", "output_tokens", "cached_tokens", "calls", "unpriced")
"""A `Tally`'s whole-number fields, as metadata names them."""


def usage_of(metadata: Mapping[str, Any]) -> UsageTotals:
    """The usage totals a checkpoint's metadata holds (empty when its thread reported none).

    A thread's latest checkpoint holds them whenever the thread is at rest (waiting on a
    person, done or failed), so ``usage_of(app.get_state(thread).metadata)`` is what the thread
    used. A checkpoint in the middle of a run whose totals did not change since the one before
    holds only the run's running seconds; read through it, this gives empty totals.

    Example:
        >>> usage_of({}).thread.tokens
        0
    """
    return UsageTotals.from_meta(metadata.get(USAGE))


def is_running_time(stored: Any) -> bool:
    """Whether ``metadata["usage"]`` holds only the running seconds (the totals unchanged)."""
    return isinstance(stored, int | float) and not isinstance(stored, bool)


def usage_as_of(stored: Any, earlier: Mapping[str, Any], *, new_run: bool) -> dict[str, Any]:
    """The whole totals of a checkpoint whose metadata holds only its running seconds.

    ``stored`` is that number; ``earlier`` the totals of the nearest earlier checkpoint that
    holds them whole; ``new_run`` whether a run's input lies after that checkpoint (the run's
    sums, its running time and its limits then count anew, as `UsageMeter` counts them).

    Example:
        >>> before = {"thread": {"calls": 2}, "run": {"calls": 1}, "run_seconds": 1.5}
        >>> usage_as_of(4.25, before, new_run=False)["run_seconds"]
        4.25
        >>> usage_as_of(0.5, before, new_run=True)["run"]
        {}
    """
    base = UsageTotals.from_meta(earlier)
    if new_run:
        base = UsageTotals(
            thread=base.thread,
            models=base.models,
            grants={k: v for k, v in base.grants.items() if k.endswith(":thread")},
        )
    totals = base.to_meta()
    totals["run_seconds"] = round(float(stored), 3) if is_running_time(stored) else 0.0
    return totals


class UsageMeter:
    """One call's running totals: carried from the checkpoint it started from, added to by
    `report_usage`, written into the checkpoints it commits.

    A call that never reports nor reads usage writes nothing (its checkpoints carry what the
    thread had, unchanged): runs without models pay one dict lookup per commit. A call that
    does writes the whole totals only into checkpoints after a change and into its last one;
    the others get the running seconds alone (see the module's docstring).
    """

    __slots__ = (
        "_base",
        "_changed",
        "_models",
        "_odd",
        "_prices",
        "_reset",
        "_run",
        "_started",
        "_sums",
        "_thread",
        "active",
        "grants",
        "stamped",
    )

    def __init__(
        self,
        carried: Mapping[str, Any] | None,
        *,
        new_run: bool,
        prices: Mapping[str, Price],
        known: UsageTotals | None = None,
    ) -> None:
        """``known``: ``UsageTotals.from_meta(carried["usage"])``, when the caller holds it
        already (the `stamped` totals of the call that wrote the checkpoint carried)."""
        stored = None if carried is None else carried.get(USAGE)
        self.stamped: UsageTotals | None = None
        """The totals the last `stamp` wrote whole, as `UsageTotals.from_meta` reads them back
        (None: it wrote the running seconds alone, or nothing)."""
        self.active = stored is not None
        """Whether the totals go into this call's checkpoints (something to carry, or new)."""
        self._changed = False
        """Whether the totals changed since the last checkpoint that holds them whole."""
        self._sums: dict[str, Any] | None = None
        """The sums as stored, as of the last change (`_whole`)."""
        self._reset = new_run and self.active
        """A new run's sums start at zero: said by the run's input checkpoint, else written."""
        self._prices = prices
        self._odd = False
        """A report `from_meta` would not read back as given (a model name that is no str,
        a count that is no whole number >= 0): `stamped` is then left None."""
        self._started = time.monotonic()
        if stored is None:  # most runs: no model reported anything on this thread
            self._thread = self._run = _NOTHING
            self._models: dict[str, Tally] = {}
            self._base = 0.0
            self.grants: dict[str, dict[str, float]] = {}
            return
        base = UsageTotals.from_meta(stored) if known is None else known
        self._thread = base.thread
        self._models = dict(base.models)
        self._run = _NOTHING if new_run else base.run
        self._base = 0.0 if new_run else base.run_seconds
        self.grants = {
            k: dict(v) for k, v in base.grants.items() if not new_run or k.endswith(":thread")
        }

    def report(self, usage: Usage, model: str | None) -> float | None:
        """Add one model call; return its cost (None without a price for ``model``)."""
        price = price_of(self._prices, model) if self._prices else None
        cost = None if price is None else price.cost(usage)
        self._thread = self._thread.plus(usage, cost)
        self._run = self._run.plus(usage, cost)
        name = model or "unknown"
        if not (
            type(name) is str
            and type(i := usage.input_tokens) is int
            and type(o := usage.output_tokens) is int
            and type(c := usage.cached_tokens) is int
            and min(i, o, c) >= 0
        ):
            self._odd = True
        self._models[name] = self._models.get(name, _NOTHING).plus(usage, cost)
        self.active = self._changed = True
        return cost

    def totals(self) -> UsageTotals:
        """The totals as of now."""
        return UsageTotals(
            thread=self._thread,
            run=self._run,
            models=dict(self._models),
            run_seconds=self._base + (time.monotonic() - self._started),
            grants={k: dict(v) for k, v in self.grants.items()},
        )

    def _whole(self) -> dict[str, Any]:
        """The totals as stored (`UsageTotals.to_meta`), the sums' part built once per change:
        a call's last checkpoint repeats the sums of its last change with a new running time."""
        sums = self._sums
        if sums is None or self._changed:
            # `UsageTotals.to_meta` of `totals`, without the running time (added below).
            sums = _usage_meta(self._thread, self._run, None, self._models, self.grants)
            self._sums = sums
        # Copies: what a checkpoint's metadata holds is handed to readers, who may change it.
        out: dict[str, Any] = {"thread": dict(sums["thread"]), "run": dict(sums["run"])}
        out["run_seconds"] = round(self._base + (time.monotonic() - self._started), 3)
        for key in ("models", "grants"):
            if key in sums:
                out[key] = {k: dict(v) for k, v in sums[key].items()}
        return out

    def grant(self, name: str, limits: Mapping[str, float]) -> None:
        """Record a budget raised by a person's decision (kept for the rest of the run)."""
        self.grants[name] = dict(limits)
        self.active = self._changed = True

    def activate(self) -> None:
        """Keep the totals in this call's checkpoints from now on (a node read them)."""
        if not self.active:
            self.active = self._changed = True

    def stamp(
        self, metadata: dict[str, Any], *, final: bool = True, starts_run: bool = False
    ) -> dict[str, Any]:
        """``metadata`` with the totals as of now (unchanged when the call is not active).

        The whole totals go in when they changed since the call's last checkpoint that holds
        them, and on the call's ``final`` checkpoint; otherwise only the running seconds. A
        checkpoint that ``starts_run`` (the run's input) says the run's sums start anew.
        """
        if not self.active:
            return metadata
        if self._changed or final or (self._reset and not starts_run):
            whole = metadata[USAGE] = self._whole()
            self._changed = False
            # What the next call on this checkpoint would read back (it need not): with no
            # grants (whose values `from_meta` sifts) nor odd reports, the meter's own sums.
            self.stamped = (
                None
                if self.grants or self._odd
                else UsageTotals(
                    thread=self._thread,
                    run=self._run,
                    models=dict(self._models),
                    run_seconds=whole["run_seconds"],
                )
            )
        else:
            metadata[USAGE] = round(self._base + (time.monotonic() - self._started), 3)
            self.stamped = None
        self._reset = False
        return metadata
