"""Whether interlock traces: OpenTelemetry when installed and configured, nothing otherwise.

interlock depends on ``opentelemetry-api`` only (the ``otel`` extra), and only if it is
installed: whether it is, is looked up once, at import. Its spans record once the application
configured a tracer provider (an SDK); until then `tracer` returns None and the runtime skips
every span, so a run pays a flag check. While none is configured, `tracer` looks again at
most once a second (asking the API costs about a microsecond), so a provider set after the
first runs is noticed within a second; and until the application itself imported the API,
interlock does not import it either (see `_otel`).
"""

from __future__ import annotations

import sys
import time
from importlib.util import find_spec
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from ._otel import Tracing

__all__ = ["ENABLED", "INSTALLED", "RECHECK", "tracer", "use_tracer_provider"]


def _installed() -> bool:
    try:
        return find_spec("opentelemetry.trace") is not None
    except (ImportError, ValueError, AttributeError):  # a parent that is missing or blocked
        return False


INSTALLED: Final = _installed()
"""Whether ``opentelemetry-api`` can be imported (looked up once)."""

ENABLED: bool = INSTALLED
"""Whether interlock makes spans at all; False when the API is missing (tests turn it off)."""

TRACER_NAME: Final = "interlock"
RECHECK: Final = 1.0
"""Seconds between looks at the global tracer provider while none is configured."""

_provider: TracerProvider | None = None
_tracing: Tracing | None = None
_look_after = 0.0
_now = time.monotonic


def use_tracer_provider(provider: TracerProvider | None) -> None:
    """Send interlock's spans to ``provider`` instead of the global one (None: the global).

    The global provider is what ``opentelemetry.trace.set_tracer_provider`` set; most
    applications need nothing else. A provider of its own suits a test, or an application that
    keeps interlock's spans apart.
    """
    global _provider, _tracing, _look_after
    _provider, _tracing, _look_after = provider, None, 0.0


def tracer() -> Tracing | None:
    """interlock's tracer, or None when no span of it would be recorded."""
    global _tracing, _look_after
    if not ENABLED:
        return None
    if _tracing is not None:
        return _tracing
    now = _now()
    if now < _look_after:
        return None
    _look_after = now + RECHECK
    if _provider is None and "opentelemetry.trace" not in sys.modules:
        return None  # nobody imported the API: no provider can be set yet
    # Imported here, once a provider may be configured: loading the API costs a program that
    # never traces its import time and, for good, the garbage collector's time over its objects.
    from . import _otel

    provider = _provider if _provider is not None else _otel.global_provider()
    if not _otel.configured(provider):
        return None
    # Invariant: a configured provider stays (the API lets the global one be set only once),
    # so its tracer is kept for good; `use_tracer_provider` starts over.
    _tracing = _otel.Tracing(provider.get_tracer(TRACER_NAME))
    return _tracing
