"""`Workers`: an App's runs spread over worker processes on many machines, on procrastinate."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

import msgspec
import procrastinate
import procrastinate.worker
import psycopg
from procrastinate import Blueprint, JobContext, PsycopgConnector, RetryStrategy, exceptions
from procrastinate.jobs import Status

from .._errors import CheckpointNotFound, InvalidResume, StoreUnavailable, ThreadBusy
from ..observability import tracer
from ..runtime import App, RunHandle, RunResult
from ..stores import PostgresStore
from ._schema import install

__all__ = ["RETRY", "TRANSIENT", "Workers"]

_POLL: Final = 2.0
"""Seconds between a running thread's own looks for a forced pause request (the listener
hears of one at once; this covers requests made while it reconnects)."""

log = logging.getLogger("interlock.workers")

TRANSIENT: Final[tuple[type[Exception], ...]] = (StoreUnavailable,)
"""The errors of a thread's job that a later attempt may get past: the database restarted,
failed over or was cut off. Only these are retried; any other error would come back."""

RETRY: Final = RetryStrategy(max_attempts=8, exponential_wait=2, retry_exceptions=TRANSIENT)
"""How a thread's job is retried after a `TRANSIENT` error: up to 8 times, 2, 4, 8... 256
seconds apart (about 8.5 minutes in all); then procrastinate marks it failed."""

_RECONNECT_BACKOFF: Final = (0.5, 10.0)
"""First and longest wait between a worker's attempts to reach a database it lost."""

_CONNECT_TIMEOUT: Final = 5
"""Seconds a worker waits for a new connection, and its job queue for one of its pool,
before it counts the database as lost (so a stop during an outage is not held up long)."""

_LISTEN_CHECK: Final = 30.0
"""Seconds without a notification after which the pause listener checks its connection."""

_BUSY_BACKOFF: Final = (0.05, 1.0)
"""First and longest wait between attempts on a thread whose lease another executor holds."""


class Workers:
    """Run an App's threads as procrastinate jobs, on any number of worker processes.

    Every process sharing the App's PostgreSQL database (servers, CLIs, scripts, workers)
    queues work into it; ``interlock worker --app module:attr`` (or `run`) takes it out:

    * ``start_run``: a run of new input on a thread (queue it with `start`);
    * ``continue_thread``: continue a thread once decisions make it runnable. Queued by the
      database itself, in the transaction of the decision (see `install`), at most once
      while waiting however many decisions arrive;
    * ``sweep`` (periodic): answer interrupts whose deadline passed by their ``on_timeout``
      (each thread is then continued by its own job);
    * ``expire`` (periodic, with ``expire_after``): delete finished threads left that long;
    * ``recover`` (periodic): jobs of a worker that stopped sending heartbeats (killed,
      frozen, cut off) are queued again; their threads resume from their last checkpoint,
      and a dangerous call that may have been in flight becomes a reconcile question.

    Jobs of one thread carry the thread as their procrastinate lock, so they run one at a time;
    interlock's lease with its fencing token stays the second line of defence (a worker that
    was thought dead and wakes up cannot write over its successor).

    On SIGTERM or SIGINT a worker pauses the threads it runs (planned: at the next step
    boundary; forced after ``grace`` seconds: running tasks are cancelled and re-run on
    resume), queues their continuation for another worker, and exits. A second signal forces
    at once. A pause asked for with ``app.request_pause(thread)`` reaches the worker running
    the thread through PostgreSQL's LISTEN/NOTIFY, not at its next poll.

    A job that loses its database connection (`StoreUnavailable`: PostgreSQL restarting,
    failing over) is retried with backoff. One whose thread cannot go on for a reason a retry
    will not fix (the graph changed since the question, a damaged checkpoint...) records the
    thread failed (`App.record_failure`), with why and how to continue it once fixed, and ends.
    The worker process outlives the database going away: it logs it once, waits for it with
    backoff and takes jobs again once it answers (a stop still works meanwhile). A retry that
    would clash with a continuation queued while its job ran hands over to it (see `install`).

    To run the tasks inside an existing procrastinate app instead, ``register`` them there.

    Args:
        app: An App whose store is a `PostgresStore`.
        queue: The procrastinate queue of the jobs.
        namespace: The prefix of the task names (``interlock:continue_thread``...).
        concurrency: Jobs one worker process runs at once.
        grace: Seconds a stopping worker lets running tasks finish before cancelling them.
        sweep_every: Seconds between deadline sweeps, looks for workers gone silent and
            expiries (a divisor of 60).
        expire_after: Delete finished threads untouched for this many seconds (None: never).
        stalled_after: Seconds without a heartbeat after which a worker counts as gone and
            its jobs are queued again. Keep it above ``heartbeat`` and the App's lease TTL.
        heartbeat: Seconds between a worker's heartbeats.
        poll_interval: Seconds between a worker's looks for jobs when no notification came
            (notifications wake it at once; this is the fallback).
    """

    def __init__(
        self,
        app: App[Any],
        *,
        queue: str = "interlock",
        namespace: str = "interlock",
        concurrency: int = 10,
        grace: float = 10.0,
        sweep_every: int = 10,
        expire_after: float | None = None,
        stalled_after: float = 30.0,
        heartbeat: float = 10.0,
        poll_interval: float = 1.0,
    ) -> None:
        if not isinstance(app, App):
            raise TypeError(f"app must be an interlock App, not {type(app).__name__}")
        if not isinstance(app.store, PostgresStore):
            raise TypeError(
                f"workers share their jobs through PostgreSQL, but this App's store is "
                f"{app.store!r}; compile the graph with store=PostgresStore(dsn)"
            )
        _check_name(queue, "queue")
        _check_name(namespace, "namespace")
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise ValueError(f"concurrency must be an int >= 1, not {concurrency!r}")
        if not isinstance(sweep_every, int) or not 1 <= sweep_every <= 60 or 60 % sweep_every:
            raise ValueError(f"sweep_every must divide 60 seconds, not {sweep_every!r}")
        for name, value in (
            ("grace", grace),
            ("stalled_after", stalled_after),
            ("heartbeat", heartbeat),
            ("poll_interval", poll_interval),
        ):
            _check_seconds(value, name)
        if expire_after is not None:
            _check_seconds(expire_after, "expire_after")
        if stalled_after <= heartbeat:
            raise ValueError(
                f"stalled_after ({stalled_after}) must be longer than heartbeat ({heartbeat}), "
                "or live workers would count as gone"
            )
        self.app = app
        self.queue = queue
        self.namespace = namespace
        self.concurrency = concurrency
        self.grace = grace
        self.sweep_every = sweep_every
        self.expire_after = expire_after
        self.stalled_after = stalled_after
        self.heartbeat = heartbeat
        self.poll_interval = poll_interval
        self.lock_prefix = f"{namespace}/"
        """Jobs of thread ``t`` carry the procrastinate lock ``lock_prefix + t``."""
        self._store: PostgresStore = app.store
        self._running: dict[str, RunHandle] = {}
        self._stopping: asyncio.Event | None = None
        self._forced = False
        self._open = False
        self._job_metrics: Any = None
        self.procrastinate: procrastinate.App = procrastinate.App(
            connector=PsycopgConnector(conninfo=self._store.dsn, timeout=_CONNECT_TIMEOUT)
        )
        """The procrastinate app the tasks are registered on (see `register`)."""
        self.register(self.procrastinate)

    def __repr__(self) -> str:
        return f"<Workers queue={self.queue!r} app={self.app.plan.name!r}>"

    # -- setting up ---------------------------------------------------------------------------

    def register(self, papp: procrastinate.App) -> None:
        """Register interlock's tasks on a procrastinate app (``namespace:task_name``).

        For running them in an existing procrastinate deployment: that app's workers then run
        interlock's jobs too (give them ``queues=[workers.queue]`` or all queues). Its
        connector must reach the App's database.
        """
        self.procrastinate = papp
        papp.add_tasks_from(self._blueprint(), namespace=self.namespace)

    async def install(self) -> bool:
        """Create procrastinate's schema if missing and interlock's triggers (idempotent).

        The triggers queue a thread's continuation in the transaction of the decision that
        makes it runnable, and hand a retried continuation over to one queued meanwhile.

        Safe to run from several processes at once; `run` does it first. The interlock
        schema is migrated first (a trigger is on its tables). Returns whether
        procrastinate's schema was created now. Upgrading procrastinate's schema later is
        procrastinate's job (``procrastinate schema --migrate``).
        """
        await self._store.migrate()
        async with await psycopg.AsyncConnection.connect(self._store.dsn, autocommit=True) as conn:
            created = await install(
                conn,
                schema_sql=self.procrastinate.schema_manager.get_schema(),
                queue=self.queue,
                task=f"{self.namespace}:continue_thread",
                lock_prefix=self.lock_prefix,
            )
        # From now on the trigger continues the App's threads: it asks its store again.
        await self.app.continued_by(refresh=True)
        return created

    # -- queueing ----------------------------------------------------------------------------

    async def start(
        self, input: Any, *, thread: str, metadata: Mapping[str, Any] | None = None
    ) -> int:
        """Queue a run of ``input`` on ``thread`` for a worker; return the job id.

        ``input`` and ``metadata`` travel as JSON. A worker that dies during the run leaves
        it to another, which continues the thread rather than start it again.
        """
        if not isinstance(thread, str) or not thread:
            raise ValueError(f"thread must be a non-empty str, not {thread!r}")
        args = {"thread": thread, "input": input, "metadata": dict(metadata or {})}
        try:
            msgspec.json.encode(args)
        except (TypeError, msgspec.EncodeError) as exc:
            raise TypeError(f"input and metadata must be JSON to be queued: {exc}") from None
        async with self._opened():
            task = self.procrastinate.tasks[f"{self.namespace}:start_run"]
            return await task.configure(lock=self.lock_prefix + thread).defer_async(**args)

    async def continue_thread(self, thread: str) -> int | None:
        """Queue a continuation of ``thread``; None when one is waiting already.

        Decisions queue theirs by themselves; this is for threads stopped otherwise (a
        static breakpoint to go past, a crashed run of a process that was not a worker).
        """
        if not isinstance(thread, str) or not thread:
            raise ValueError(f"thread must be a non-empty str, not {thread!r}")
        async with self._opened():
            return await self._queue_continuation(thread)

    async def _queue_continuation(self, thread: str) -> int | None:
        lock = self.lock_prefix + thread
        task = self.procrastinate.tasks[f"{self.namespace}:continue_thread"]
        try:
            return await task.configure(lock=lock, queueing_lock=lock).defer_async(thread=thread)
        except exceptions.AlreadyEnqueued:
            return None

    @contextlib.asynccontextmanager
    async def _opened(self) -> AsyncIterator[None]:
        """The procrastinate app open for the block (already open in a worker or `opened`)."""
        if self._open:
            yield
            return
        async with self.opened():
            yield

    @contextlib.asynccontextmanager
    async def opened(self) -> AsyncIterator[Workers]:
        """Keep the job queue's connections open for the block, to queue many jobs.

        Outside it, each `start` or `continue_thread` opens and closes them (a sketch)::

            async with workers.opened():
                for order in orders:
                    await workers.start({"order": order}, thread=f"order-{order}")
        """
        async with self.procrastinate.open_async():
            self._open = True
            try:
                yield self
            finally:
                self._open = False

    # -- running -------------------------------------------------------------------------------

    async def run(
        self,
        *,
        name: str | None = None,
        install_signal_handlers: bool = True,
        metrics_port: int | None = None,
        metrics_host: str = "127.0.0.1",
    ) -> None:
        """Be a worker until stopped (SIGTERM / SIGINT, or `stop`), then give threads back.

        Args:
            name: The worker's name in procrastinate's logs.
            install_signal_handlers: Stop on SIGTERM and SIGINT (False: call `stop`).
            metrics_port: Serve Prometheus metrics on this port (``/metrics``): the
                runtime's (see `interlock.observability.PrometheusMetrics`; the pending gauge
                refreshed every 5 s) and the worker's jobs
                (``interlock_worker_jobs_total{task,outcome}``,
                ``interlock_worker_running_threads``). Needs ``prometheus_client``.
            metrics_host: The address the metrics listen on.
        """
        await self.install()
        async with self._metrics(metrics_host, metrics_port):
            await self._work(name, install_signal_handlers)

    @contextlib.asynccontextmanager
    async def _metrics(self, host: str, port: int | None) -> AsyncIterator[None]:
        if port is None:
            yield
            return
        from ._metrics import WorkerMetrics

        metrics = WorkerMetrics(self.app, lambda: len(self._running), host, port)
        self._job_metrics = metrics
        try:
            async with metrics.serving():
                yield
        finally:
            self._job_metrics = None

    async def _work(self, name: str | None, install_signal_handlers: bool) -> None:
        self._stopping = asyncio.Event()
        self._forced = False
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT) if install_signal_handlers else ()
        for sig in signals:
            loop.add_signal_handler(sig, self.stop)
        try:
            listener = asyncio.create_task(self._listen_for_pauses(), name="pause listener")
            try:
                while not self._stopping.is_set():
                    lost = await self._take_jobs(name)
                    if lost is None:
                        break
                    await self._database_back(lost)
            finally:
                listener.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await listener
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)

    async def _take_jobs(self, name: str | None) -> str | None:
        """Run procrastinate's worker until this one stops (None) or the database is lost.

        procrastinate's worker ends when its connections die (its job fetch fails, or one of
        its side tasks: heartbeat, listener, periodic deferrer), once its running jobs have
        ended. Returns what was lost then; raises any other error.
        """
        try:
            async with self.opened():
                self.procrastinate.perform_import_paths()  # type: ignore[no-untyped-call]
                options: dict[str, Any] = {
                    **self.procrastinate.worker_defaults,
                    "queues": [self.queue],
                    "name": name or f"interlock-{os.getpid()}",
                    "concurrency": self.concurrency,
                    "install_signal_handlers": False,
                    "update_heartbeat_interval": self.heartbeat,
                    "stalled_worker_timeout": self.stalled_after,
                    "fetch_job_polling_interval": self.poll_interval,
                    "abort_job_polling_interval": max(self.poll_interval, 5.0),
                    "delete_jobs": "successful",
                }
                fetcher = _Worker(app=self.procrastinate, **options)
                _quiet_lost_connections(fetcher.logger)
                worker = asyncio.create_task(
                    fetcher.run(),  # type: ignore[no-untyped-call]
                    name="procrastinate worker",
                )
                assert self._stopping is not None
                stopping = asyncio.create_task(self._stopping.wait())
                try:
                    await asyncio.wait({worker, stopping}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    stopping.cancel()
                if not worker.done():
                    # Cancelling procrastinate's worker stops it fetching; it then waits for
                    # its running jobs, which the pauses end.
                    worker.cancel()
                    await self._give_back()
                    with contextlib.suppress(asyncio.CancelledError):
                        await worker
                    return None
                error = worker.exception()
                if error is not None:
                    raise error
                lost = fetcher.lost
        except Exception as exc:
            lost = _lost_connection(exc)
            if lost is None:
                raise
            return None if self._stopping is not None and self._stopping.is_set() else lost
        if self._stopping is not None and self._stopping.is_set():
            return None
        # It stopped by itself: the end of a job could not be recorded, or a side task of
        # it lost its connection (it logged which).
        return lost or "the job queue's worker stopped"

    async def _database_back(self, lost: str) -> None:
        """Wait, with backoff, until the database answers again or the worker is stopped."""
        log.warning(
            "lost the database (%s); no jobs are taken until it answers again", lost.strip()
        )
        since = time.monotonic()
        delay, longest = _RECONNECT_BACKOFF
        assert self._stopping is not None
        while not self._stopping.is_set():
            if await self._answers():
                log.warning(
                    "the database answers again after %.0f s; taking jobs", time.monotonic() - since
                )
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), delay)
            delay = min(delay * 2, longest)

    async def _answers(self) -> bool:
        try:
            async with await psycopg.AsyncConnection.connect(
                self._store.dsn, autocommit=True, connect_timeout=_CONNECT_TIMEOUT
            ) as conn:
                await conn.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    def stop(self) -> None:
        """Stop the worker: pause its threads, queue them again, exit (again: force now)."""
        if self._stopping is None:
            return
        if self._stopping.is_set():
            self._forced = True
            for handle in list(self._running.values()):
                handle.force_pause()
            return
        log.info("stopping: pausing %d running thread(s)", len(self._running))
        self._stopping.set()

    async def _give_back(self) -> None:
        """Pause every running thread (planned, forced after ``grace``)."""
        handles = list(self._running.values())
        timeout = 0.0 if self._forced else self.grace
        await asyncio.gather(*(h.pause(timeout=timeout) for h in handles), return_exceptions=True)

    async def _listen_for_pauses(self) -> None:
        """Take pause requests for the threads this worker runs as soon as they are made.

        A lost connection is made again with backoff; requests made while not listening are
        found by the runs' own polls (every ``_POLL`` seconds).
        """
        first, longest = _RECONNECT_BACKOFF
        delay, lost = first, False
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._store.dsn, autocommit=True, connect_timeout=_CONNECT_TIMEOUT
                ) as conn:
                    await conn.execute(f"LISTEN {PostgresStore.PAUSE_CHANNEL}")
                    if lost:
                        log.info("pause listener listens again")
                    delay, lost = first, False
                    while True:
                        async for note in conn.notifies(timeout=_LISTEN_CHECK):
                            await self._take_pause_request(note.payload)
                        # Quiet for a while: make sure the connection is still there.
                        await conn.execute("SELECT 1")
            except psycopg.OperationalError as exc:
                if not lost:  # once per outage; the worker says it lost the database
                    log.info("pause listener lost its connection (%s); reconnecting", exc)
                    lost = True
                await asyncio.sleep(delay)
                delay = min(delay * 2, longest)

    async def _take_pause_request(self, thread: str) -> None:
        if thread:
            handle = self._running.get(thread)
            targets = [] if handle is None else [handle]
        else:  # a thread id too long for a notification: look at all
            targets = list(self._running.values())
        for target in targets:
            try:
                await target.check_pause_request()
            except Exception as exc:  # the run's own poll looks again
                log.warning("could not take a pause request: %s", exc)

    # -- the tasks ---------------------------------------------------------------------------

    def _blueprint(self) -> Blueprint:
        bp = Blueprint()
        queue = self.queue

        @bp.task(name="start_run", queue=queue, pass_context=True, retry=RETRY)
        async def start_run(
            context: JobContext, thread: str, input: Any, metadata: dict[str, Any]
        ) -> str:
            return await self._job("start_run", thread, context, input=input, metadata=metadata)

        @bp.task(name="continue_thread", queue=queue, pass_context=True, retry=RETRY)
        async def continue_thread(context: JobContext, thread: str) -> str:
            return await self._job("continue_thread", thread, context)

        @bp.periodic(cron=f"* * * * * */{self.sweep_every}", periodic_id="sweep")
        @bp.task(name="sweep", queue=queue, queueing_lock=f"{self.lock_prefix}sweep")
        async def sweep(timestamp: int) -> int:
            # The App's rule (`App.continued_by`) says the workers continue its threads: the
            # sweep records expiries, and the trigger queues each thread's continuation.
            try:
                continued = await self.app.sweep(limit=1000)
            except StoreUnavailable as exc:
                # A periodic look: the next one, once the database answers, looks again.
                log.info("deadline sweep skipped, the database does not answer: %s", exc)
                return 0
            return len(continued)

        @bp.periodic(cron=f"* * * * * */{self.sweep_every}", periodic_id="expire")
        @bp.task(name="expire", queue=queue, queueing_lock=f"{self.lock_prefix}expire")
        async def expire(timestamp: int) -> int:
            if self.expire_after is None:
                return 0
            try:
                gone = await self.app.store.expire(older_than=time.time() - self.expire_after)
            except StoreUnavailable as exc:
                log.info(
                    "expiry of finished threads skipped, the database does not answer: %s", exc
                )
                return 0
            return len(gone)

        @bp.periodic(cron=f"* * * * * */{self.sweep_every}", periodic_id="recover")
        @bp.task(
            name="recover",
            queue=queue,
            queueing_lock=f"{self.lock_prefix}recover",
            pass_context=True,
        )
        async def recover(context: JobContext, timestamp: int) -> int:
            return await self._recover(context.app)

        return bp

    async def _job(self, task: str, thread: str, context: JobContext, **kwargs: Any) -> str:
        """A job of a thread: a span (the runs in it are its children), counted by outcome."""
        metrics = self._job_metrics
        tracing = tracer()
        try:
            if tracing is None:
                outcome = await self._settled(thread, context, **kwargs)
            else:
                attributes: dict[str, str | int] = {
                    "interlock.thread": thread,
                    "interlock.job.task": f"{self.namespace}:{task}",
                    "interlock.job.id": int(context.job.id or 0),
                    "interlock.job.attempts": int(context.job.attempts),
                }
                with tracing.active(tracing.span("interlock.job", attributes)) as span:
                    outcome = await self._settled(thread, context, **kwargs)
                    span.set_attribute("interlock.job.outcome", outcome)
        except BaseException:
            if metrics is not None:
                metrics.job(task, "error")
            raise
        if metrics is not None:
            metrics.job(task, outcome)
        return outcome

    async def _settled(self, thread: str, context: JobContext, **kwargs: Any) -> str:
        """`_drive`, and a thread its run cannot move on left visibly ``failed``.

        An error running again would meet again (`GraphChanged`, a failed node...) is
        recorded on the thread (`App.record_failure`) and ends the job: retrying it would
        fail the same way. Any other error goes to procrastinate, which retries a lost
        database connection with backoff (`TRANSIENT`) and fails the job otherwise.
        """
        try:
            return await self._drive(thread, context, **kwargs)
        except Exception as exc:
            failed = await self.app.record_failure(thread, exc)
            if failed is None:
                raise
            log.error(
                "thread %s cannot go on and is recorded failed (checkpoint %s): %s: %s; once "
                "fixed, continue it with `interlock resume` or workers.continue_thread",
                thread,
                failed,
                type(exc).__name__,
                exc,
            )
            return "failed"

    async def _drive(
        self,
        thread: str,
        context: JobContext,
        *,
        input: Any = None,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """Run or continue ``thread`` to its next stop; return the status it stopped in."""
        job = str(context.job.id)
        fresh = metadata is not None
        if fresh and await self._store.get_thread(thread) is not None:
            # A retried start (its first worker died) continues what that one began.
            with contextlib.suppress(CheckpointNotFound):
                state = await self.app.get_state(thread)
                fresh = state.metadata.get("job") != job
        delay, longest = _BUSY_BACKOFF
        waited_from = time.monotonic()
        while True:
            if fresh:
                meta = {**(metadata or {}), "job": job}
                handle = self.app.start(input, thread=thread, metadata=meta, poll_interval=_POLL)
            else:
                handle = self.app.start(
                    thread=thread, resume=True, metadata={"job": job}, poll_interval=_POLL
                )
            try:
                result = await self._watched(thread, handle)
            except InvalidResume:
                if fresh:
                    raise
                # Nothing to run: every interrupt left waits for an answer (the job was
                # queued again after the work was done). The next decision queues another.
                return "interrupted"
            except ThreadBusy as busy:
                if busy.holder is None:
                    continue  # changed under us (a decision landed): read it again
                # Another executor holds the lease: a dead one's runs out within its TTL.
                if time.monotonic() - waited_from > 2 * self.app.lease.ttl + 1:
                    log.info("thread %s is run by %s; leaving it to them", thread, busy.holder)
                    return "busy"
                await asyncio.sleep(delay)
                delay = min(delay * 2, longest)
                continue
            break
        if result.status == "paused" and self._stopping is not None and self._stopping.is_set():
            await self._queue_continuation(thread)  # for the next worker
        return result.status

    async def _watched(self, thread: str, handle: RunHandle) -> RunResult[Any]:
        """Run ``handle`` where a pause request or a stopping worker can reach it."""
        async with handle:
            self._running[thread] = handle
            try:
                if self._stopping is not None and self._stopping.is_set():
                    handle.request_pause()
                # Its error, if any, is raised below, outside the handle's task group (inside,
                # it would come out wrapped in an exception group).
                with contextlib.suppress(Exception):
                    await handle.result()
            finally:
                self._running.pop(thread, None)
        return await handle.result()

    async def _recover(self, papp: procrastinate.App | None) -> int:
        """Queue again the jobs of workers that stopped sending heartbeats."""
        manager = (papp or self.procrastinate).job_manager
        try:
            stalled = await manager.get_stalled_jobs(
                queue=self.queue, seconds_since_heartbeat=self.stalled_after
            )
        except exceptions.ConnectorException as exc:
            lost = _lost_connection(exc)
            if lost is None:
                raise
            # A periodic look, as the sweep's: the next one, once the database answers,
            # looks again.
            log.info("recovery of stalled jobs skipped, the database does not answer: %s", lost)
            return 0
        n = 0
        for job in stalled:
            assert job.id is not None
            try:
                await manager.retry_job(job)
            except exceptions.ConnectorException:
                # Another recovery got to it first. (A continuation of the thread queued
                # meanwhile no longer makes this fail: the database hands the retry over to
                # it, see `install`.) It only has to leave "doing", which blocks the thread's
                # lock; if it did already, this fails too.
                with contextlib.suppress(exceptions.ConnectorException):
                    await manager.finish_job_by_id_async(job.id, Status.FAILED, delete_job=False)
            log.warning("job %s (%s) of a worker gone silent is queued again", job.id, job.lock)
            n += 1
        return n


class _Worker(procrastinate.worker.Worker):
    """procrastinate's worker, stopped when the end of a job cannot be recorded.

    The job stays ``doing`` in the database under this worker's id. Were the worker to go on
    (the connection back by its next fetch), its heartbeat would keep the job from
    recovery, and the job's procrastinate lock would keep its thread from running. Stopped,
    its id goes silent (or, unregistered, is cleared from the job), and ``recover`` queues
    the job again for the worker that `Workers` starts in its place.
    """

    lost: str | None = None

    async def _persist_job_status(self, *args: Any, **kwargs: Any) -> None:
        try:
            await super()._persist_job_status(*args, **kwargs)
        except exceptions.ConnectorException as exc:
            lost = _lost_connection(exc)
            if lost is None:
                raise
            self.lost = f"{lost}; a job's end is recorded once it is back"
            self.stop()  # type: ignore[no-untyped-call]


class _LostConnections(logging.Filter):
    """Leave out procrastinate's tracebacks of a lost connection: `Workers` says it once."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return error is None or _lost_connection(error) is None


_LOST_CONNECTIONS: Final = _LostConnections()


def _quiet_lost_connections(worker_logger: logging.Logger) -> None:
    # Its side task's failure, and the errors of the side tasks it then cancels.
    for logger in (worker_logger, logging.getLogger("procrastinate.utils")):
        if _LOST_CONNECTIONS not in logger.filters:
            logger.addFilter(_LOST_CONNECTIONS)


def _lost_connection(error: BaseException) -> str | None:
    """What was lost, when ``error`` (or an error it came from) is a lost database connection."""
    seen: set[int] = set()
    found: BaseException | None = error
    while found is not None and id(found) not in seen:
        seen.add(id(found))
        if isinstance(found, psycopg.OperationalError | OSError | StoreUnavailable):
            return str(found).strip() or type(found).__name__
        found = found.__cause__ or found.__context__
    return None


def _check_name(value: object, name: str) -> None:
    if not isinstance(value, str) or not value or len(value) > 100 or not value.isprintable():
        raise ValueError(f"{name} must be a short printable non-empty str, not {value!r}")


def _check_seconds(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{name} must be a number of seconds > 0, not {value!r}")
