"""What one server holds while it runs: the served apps, its limits, its background runs."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from anyio.abc import TaskGroup
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from .._errors import InterlockError
from ..observability import PrometheusMetrics
from ._auth import Identity
from ._limits import RateLimiter
from ._proxy import ProxyHeaders
from ._served import Served
from ._sessions import Sessions

if TYPE_CHECKING:
    # Authlib's (the sso extra): imported by the server only when single sign-on is set up.
    from ._oidc_client import OIDCProvider

__all__ = ["Authenticator", "FailureRecorder", "Metrics", "Runs", "ServerState", "Ticker"]

log = logging.getLogger("interlock.server")


class Authenticator(Protocol):
    """Turns an ``Authorization`` header value into an identity (None: not authenticated)."""

    def authenticate(self, authorization: str | None) -> Identity | None:
        """The identity an ``Authorization`` header value names, or None to refuse it."""
        ...


class Ticker:
    """Wakes the event streams when a store's feed has something new."""

    def __init__(self) -> None:
        self._event = anyio.Event()

    def current(self) -> anyio.Event:
        """The event the next `tick` sets (take it *before* reading, then wait on it)."""
        return self._event

    def tick(self) -> None:
        self._event.set()
        self._event = anyio.Event()


class Metrics:
    """The server's Prometheus metrics, in a registry of its own, and the runtime's beside them.

    The runtime's (`PrometheusMetrics`: runs, interrupts, decisions, pending interrupts)
    count while the server's lifespan runs; they count every App of the process.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "interlock_http_requests",
            "HTTP requests answered, by route and status.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "interlock_http_request_seconds",
            "Time to answer an HTTP request, by route.",
            ["route"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )
        self.decisions = Counter(
            "interlock_decisions",
            "Decisions posted, by outcome.",
            ["outcome"],
            registry=self.registry,
        )
        self.events = Counter(
            "interlock_events",
            "Events read from the stores' change feeds, by type.",
            ["type"],
            registry=self.registry,
        )
        self.sse_clients = Gauge(
            "interlock_sse_clients", "Open event streams.", registry=self.registry
        )
        self.runs = Gauge(
            "interlock_background_runs", "Runs going on in the background.", registry=self.registry
        )
        self.run_errors = Counter(
            "interlock_background_run_errors",
            "Background runs that ended with an error.",
            registry=self.registry,
        )
        self.runtime = PrometheusMetrics(self.registry)
        """The runtime's metrics, attached by the lifespan."""


class FailureRecorder(Protocol):
    """What records a thread failed when its run cannot go on (`App.record_failure`)."""

    async def record_failure(self, thread: str, error: BaseException) -> str | None:
        """Leave ``thread`` visibly failed after ``error``; the failed checkpoint's id or None."""
        ...


class Runs:
    """Runs the server does in the background (after a decision, or a POST of a run)."""

    def __init__(self, metrics: Metrics, limit: int) -> None:
        self._group: TaskGroup | None = None
        self._active: set[str] = set()
        self._slots = anyio.Semaphore(limit)
        self._metrics = metrics

    def attach(self, group: TaskGroup | None) -> None:
        self._group = group

    @property
    def active(self) -> frozenset[str]:
        """Threads with a background run in this server now."""
        return frozenset(self._active)

    def submit(
        self, call: Callable[[], Coroutine[Any, Any, Any]], thread: str, app: FailureRecorder
    ) -> bool:
        """Start ``call`` for ``thread`` of ``app`` unless this server runs that thread already.

        A run that cannot go on for a reason a retry will not fix leaves the thread failed
        (``app.record_failure``), never waiting on nothing.
        """
        if self._group is None:
            raise RuntimeError(
                "the interlock server's lifespan is not running: when you mount it, pass its "
                "lifespan to your app (see interlock.server.create_app)"
            )
        if thread in self._active:
            return False
        self._active.add(thread)
        self._group.start_soon(self._run, call, thread, app)
        return True

    async def _run(
        self, call: Callable[[], Coroutine[Any, Any, Any]], thread: str, app: FailureRecorder
    ) -> None:
        self._metrics.runs.inc()
        try:
            async with self._slots:
                try:
                    await call()
                except Exception as exc:
                    failed = await app.record_failure(thread, exc)
                    if failed is None:
                        raise
                    log.error(
                        "thread %r cannot go on and is recorded failed (checkpoint %s): %s: "
                        "%s; once fixed, continue it with `interlock resume`",
                        thread,
                        failed,
                        type(exc).__name__,
                        exc,
                    )
                    raise
        except InterlockError as exc:
            # The thread's record says how it ended (a failed node, a busy thread); the
            # event stream reports it. The server goes on.
            self._metrics.run_errors.inc()
            log.warning(
                "background run of thread %r ended with %s: %s", thread, type(exc).__name__, exc
            )
        except Exception:
            self._metrics.run_errors.inc()
            log.exception("background run of thread %r failed", thread)
        finally:
            self._active.discard(thread)
            self._metrics.runs.dec()


@dataclass(kw_only=True)
class ServerState:
    """Everything the handlers share (``request.app.state.interlock``)."""

    served: Mapping[str, Served]
    auth: Authenticator
    four_eyes: bool
    continue_runs: bool
    limiter: RateLimiter
    metrics: Metrics
    runs: Runs
    heartbeat: float
    poll_interval: float
    ticker: Ticker = field(default_factory=Ticker)
    listeners: list[Callable[[Any], Coroutine[Any, Any, None]]] = field(default_factory=list)
    notifier: Any = None
    """The `Notifier` events go to, if any (its ``log`` is read by ``/v1/deliveries``)."""
    ready: bool = False
    sessions: Sessions | None = None
    """The browser sessions, with single sign-on or a trusted proxy (else None)."""
    oidc: OIDCProvider | None = None
    """The OpenID provider people sign in with, if any."""
    proxy: ProxyHeaders | None = None
    """The trusted proxy whose headers name people, if any."""
