"""The runtime's observer hook: what happened, told to whoever subscribed (metrics).

The runtime calls the functions below at the moments they name; each tells every subscribed
`RuntimeObserver`. With none subscribed, the runtime checks ``OBSERVERS`` (an empty list) and
calls nothing: a run pays one list check. An observer that raises is logged and skipped; it
never fails a run.
"""

from __future__ import annotations

from typing import Protocol

from ._logging import library_logger

__all__ = [
    "OBSERVERS",
    "RuntimeObserver",
    "decision_recorded",
    "decision_refused",
    "interrupt_raised",
    "model_used",
    "reconcile_raised",
    "run_ended",
    "subscribe",
    "thread_failed",
    "unsubscribe",
]

_log = library_logger("interlock.observability")


class RuntimeObserver(Protocol):
    """Receives what the runtime reports (`PrometheusMetrics` is one)."""

    def run_ended(self, status: str, seconds: float) -> None:
        """A run (`App.run`/`App.resume`) ended with ``status`` after ``seconds``."""
        ...

    def interrupt_raised(self, tool: str | None, kind: str) -> None:
        """An interrupt of ``kind`` was committed, waiting on ``tool`` (None: on no tool)."""
        ...

    def decision_recorded(self, tool: str | None, seconds: float, final: bool) -> None:
        """A decision was committed ``seconds`` after its interrupt was raised.

        ``final`` is False for a vote toward a quorum (the interrupt stays pending).
        """
        ...

    def decision_refused(self, tool: str | None, rule: str) -> None:
        """A decision was refused by its question's authority (``rule``: which one, as
        `interlock.NotAuthorized.rule` says); nothing was recorded. Optional: an observer
        without this method is not told."""
        ...

    def reconcile_raised(self) -> None:
        """A dangerous call's outcome was unknown: a ``reconcile`` question was committed."""
        ...

    def model_used(
        self,
        model: str | None,
        input_tokens: int,
        output_tokens: int,
        cached: int,
        cost: float | None,
    ) -> None:
        """A model call used these tokens (``cost``: at the App's prices, None without one).
        Optional: an observer without this method is not told."""
        ...

    def thread_failed(self, error: str) -> None:
        """A continuation could not run: its thread was recorded ``failed`` (``error``: the
        error's type name)."""
        ...


OBSERVERS: list[RuntimeObserver] = []
"""The subscribed observers. Replaced, never changed in place, so that a call going through
it while another task subscribes sees one consistent list."""


def subscribe(observer: RuntimeObserver) -> None:
    """Tell ``observer`` what the runtime reports from now on (once, however often called)."""
    global OBSERVERS
    if not any(o is observer for o in OBSERVERS):
        OBSERVERS = [*OBSERVERS, observer]


def unsubscribe(observer: RuntimeObserver) -> None:
    """Stop telling ``observer``; nothing happens if it was not subscribed."""
    global OBSERVERS
    OBSERVERS = [o for o in OBSERVERS if o is not observer]


def run_ended(status: str, seconds: float) -> None:
    """Tell every observer that a run ended."""
    for o in OBSERVERS:
        try:
            o.run_ended(status, seconds)
        except Exception:
            _log.exception("observer %r failed on run_ended", o)


def interrupt_raised(tool: str | None, kind: str) -> None:
    """Tell every observer that an interrupt was committed."""
    for o in OBSERVERS:
        try:
            o.interrupt_raised(tool, kind)
        except Exception:
            _log.exception("observer %r failed on interrupt_raised", o)


def decision_recorded(tool: str | None, seconds: float, final: bool) -> None:
    """Tell every observer that a decision was committed."""
    for o in OBSERVERS:
        try:
            o.decision_recorded(tool, seconds, final)
        except Exception:
            _log.exception("observer %r failed on decision_recorded", o)


def decision_refused(tool: str | None, rule: str) -> None:
    """Tell every observer that has ``decision_refused`` that a decision was refused."""
    for o in OBSERVERS:
        told = getattr(o, "decision_refused", None)
        if told is None:
            continue
        try:
            told(tool, rule)
        except Exception:
            _log.exception("observer %r failed on decision_refused", o)


def model_used(
    model: str | None, input_tokens: int, output_tokens: int, cached: int, cost: float | None
) -> None:
    """Tell every observer that has ``model_used`` what a model call used."""
    for o in OBSERVERS:
        told = getattr(o, "model_used", None)
        if told is None:
            continue
        try:
            told(model, input_tokens, output_tokens, cached, cost)
        except Exception:
            _log.exception("observer %r failed on model_used", o)


def reconcile_raised() -> None:
    """Tell every observer that a reconcile question was committed."""
    for o in OBSERVERS:
        try:
            o.reconcile_raised()
        except Exception:
            _log.exception("observer %r failed on reconcile_raised", o)


def thread_failed(error: str) -> None:
    """Tell every observer that a thread was recorded failed after its continuation."""
    for o in OBSERVERS:
        try:
            o.thread_failed(error)
        except Exception:
            _log.exception("observer %r failed on thread_failed", o)
