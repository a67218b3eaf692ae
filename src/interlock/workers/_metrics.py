"""A worker's Prometheus endpoint: the runtime's metrics and the worker's jobs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

__all__ = ["WorkerMetrics"]

REFRESH_SECONDS: Final = 5.0
"""How often the pending-interrupts gauge is read from the store's index."""


class WorkerMetrics:
    """`PrometheusMetrics` in a registry of the worker's own, served over HTTP, plus its jobs."""

    def __init__(self, app: Any, running: Callable[[], int], host: str, port: int) -> None:
        try:
            import prometheus_client as prom
        except ImportError as exc:
            raise ImportError(
                "worker metrics need prometheus_client: pip install 'interlock[worker]'"
            ) from exc
        from ..observability import PrometheusMetrics

        self._app = app
        self._host = host
        self._port = port
        self.registry = prom.CollectorRegistry()
        self.runtime = PrometheusMetrics(self.registry)
        self.jobs = prom.Counter(
            "interlock_worker_jobs",
            "Jobs of threads this worker ran, by task and how they ended (the status the "
            "thread stopped in, or error).",
            ["task", "outcome"],
            registry=self.registry,
        )
        gauge = prom.Gauge(
            "interlock_worker_running_threads",
            "Threads this worker runs now.",
            registry=self.registry,
        )
        gauge.set_function(running)

    def job(self, task: str, outcome: str) -> None:
        self.jobs.labels(task=task, outcome=outcome).inc()

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        import prometheus_client as prom

        server, thread = prom.start_http_server(self._port, self._host, registry=self.registry)
        self.runtime.attach()
        refresher = asyncio.create_task(self._refresh())
        try:
            yield
        finally:
            refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await refresher
            self.runtime.detach()
            server.shutdown()
            server.server_close()
            thread.join(5)

    async def _refresh(self) -> None:
        while True:
            with contextlib.suppress(Exception):  # a store hiccup: the next refresh tries again
                await self.runtime.refresh(self._app)
            await asyncio.sleep(REFRESH_SECONDS)
