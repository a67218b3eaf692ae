"""Workers when a thread's job fails: for good (the thread is recorded failed, not stranded),
or for a moment (a lost database connection: the job is retried).

procrastinate runs on asyncio only, so these tests do too.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import procrastinate
import psycopg
import pytest
from procrastinate.jobs import Job
from prometheus_client import CollectorRegistry
from psycopg import sql
from psycopg.conninfo import make_conninfo
from test_workers import (
    S,
    _approval_app,
    _fast,
    _is,
    _jobs,
    _two_questions_app,
    _until,
    _working,
    act,
    ask,
)

from interlock import END, START, App, Graph, GraphChanged, StoreError, StoreUnavailable
from interlock.observability import PrometheusMetrics
from interlock.stores import PostgresStore, _postgres
from interlock.workers import _workers

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def _changed_app(dsn: str, **kwargs: Any) -> App[S]:
    """`_approval_app`'s graph with a node more: a new fingerprint."""

    async def log(state: S) -> S:
        return {}

    g = Graph(S, name="approval")
    g.add_node("ask", ask).add_node("act", act).add_node("log", log)
    g.add_edge(START, "ask").add_edge("ask", "act").add_edge("act", "log").add_edge("log", END)
    return g.compile(store=PostgresStore(dsn), lease_ttl=2.0, **kwargs)


async def _job_ended(dsn: str) -> bool:
    return any(status in ("failed", "succeeded") for status, *_ in _jobs(dsn))


async def test_a_continuation_the_graph_change_stops_leaves_the_thread_failed(dsn: str) -> None:
    old = _approval_app(dsn)
    new = _changed_app(dsn)
    workers = _fast(new)
    await workers.install()
    asked = await old.run({"n": 1}, thread="t")
    await old.decide("t", {asked.interrupts[0].id: True}, actor="ana")  # queues the continuation
    cursor = await old.store.change_cursor()
    metrics = PrometheusMetrics(CollectorRegistry())
    metrics.attach()
    try:
        async with _working(workers):
            await _until(lambda: _failed_or_job_ended(new, dsn, "t"), within=30)
    finally:
        metrics.detach()

    # Visibly failed: its status, the reason and how to go on, the feed, the metric.
    assert (await new.store.get_thread("t")).status == "failed"  # type: ignore[union-attr]
    with pytest.raises(GraphChanged):
        await new.get_state("t")  # the new graph cannot read it: the very reason
    state = await old.get_state("t")
    assert state.status == "failed"
    assert state.metadata["error"].startswith("GraphChanged: thread 't' was checkpointed")
    assert state.metadata["continue_with"] == "interlock resume t --app MODULE:ATTR"
    assert state.values == {"n": 1}  # as the decision left it: nothing ran
    assert [c.kind for c in await old.store.changes(after=cursor) if c.thread == "t"] == [
        "run_failed"
    ]
    assert metrics.threads_failed.labels("GraphChanged")._value.get() == 1
    assert _jobs(dsn) == []  # the job ended (and was deleted): there is nothing to retry

    # Once a migration is registered, a resume runs the decided task as it would have.
    fixed = _changed_app(dsn, migrations={old.plan.fingerprint: lambda values: values})
    done = await fixed.resume("t")
    assert (done.status, done.values) == ("done", {"n": 2, "ok": True})
    for app in (old, new, fixed):
        await app.store.close()


async def _failed_or_job_ended(app: App[Any], dsn: str, thread: str) -> bool:
    record = await app.store.get_thread(thread)
    if record is not None and record.status == "failed":
        return True
    return await _job_ended(dsn)


@pytest.fixture
def store_role(dsn: str) -> Iterator[str]:
    """A login role of the test's own for the store's connections, so that the test can cut
    them off (and only them): procrastinate's stay those of ``dsn``."""
    role = f"store_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        schema = conn.execute("SELECT current_schema()").fetchone()[0]  # type: ignore[index]
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(
            sql.SQL("GRANT ALL ON SCHEMA {} TO {}").format(
                sql.Identifier(schema), sql.Identifier(role)
            )
        )
    try:
        yield role
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _login(dsn: str, role: str, allowed: bool) -> int:
    """Let ``role`` log in or not; when not, also end its sessions (as a server going down
    does). Returns how many sessions were ended."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        option = sql.SQL("LOGIN" if allowed else "NOLOGIN")
        conn.execute(sql.SQL("ALTER ROLE {} {}").format(sql.Identifier(role), option))
        if allowed:
            return 0
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = %s",
            (role,),
        ).fetchone()
        return row[0] if row else 0


@pytest.mark.slow  # backoff: the retry comes 2 s after the first attempt fails
async def test_a_job_that_loses_its_database_connection_is_retried(
    dsn: str, store_role: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # How long the store waits for a connection before it says the database is unreachable.
    monkeypatch.setattr(_postgres, "_CONNECT_TIMEOUT", 1.0)
    cut: list[int] = []

    async def act_once(state: S) -> S:
        if not cut:
            # The database goes away under the worker: its store's sessions end and new ones
            # are refused, so the step's commit fails on a lost connection.
            cut.append(_login(dsn, store_role, allowed=False))
        return {"n": state["n"] + 1}

    g = Graph(S, name="approval")
    g.add_node("ask", ask).add_node("act", act_once)
    g.add_edge(START, "ask").add_edge("ask", "act").add_edge("act", END)
    app = g.compile(store=PostgresStore(make_conninfo(dsn, user=store_role)), lease_ttl=2.0)
    workers = _fast(app)
    workers.register(procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn)))
    await workers.install()
    asked = await app.run({"n": 1}, thread="r")
    await app.decide("r", {asked.interrupts[0].id: True}, actor="ana")
    async with _working(workers):
        # The first attempt ends: failed for good, or to be retried. The database comes back.
        await _until(lambda: _attempted(dsn), within=30)
        _login(dsn, store_role, allowed=True)
        await _until(lambda: _done_or_job_failed(app, dsn, "r"), within=30)
    assert cut and cut[0] >= 1
    assert (await app.get_state("r")).values == {"n": 2, "ok": True}
    assert _jobs(dsn) == []  # retried, then succeeded (and deleted)
    await app.store.close()


def _attempted(dsn: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE task_name = %s "
            "AND (status = 'failed' OR attempts > 0)",
            ("interlock:continue_thread",),
        ).fetchone()
    return bool(row and row[0])


async def _done_or_job_failed(app: App[Any], dsn: str, thread: str) -> bool:
    if any(status == "failed" for status, *_ in _jobs(dsn)):
        return True
    return await _is(app, thread, "done")


def test_only_lost_connections_are_retried() -> None:
    job = Job(id=1, queue="interlock", lock=None, queueing_lock=None, task_name="t", attempts=0)
    lasting = [StoreError("a constraint failed"), GraphChanged(thread="t", stored="a", current="b")]
    assert _workers.RETRY.get_retry_decision(exception=StoreUnavailable("lost"), job=job)
    for error in lasting:
        assert _workers.RETRY.get_retry_decision(exception=error, job=job) is None


def _listening(dsn: str, role: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = %s AND query = %s",
            (role, f"LISTEN {PostgresStore.PAUSE_CHANNEL}"),
        ).fetchone()
    return bool(row and row[0])


def _outages(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "interlock.workers" and "lost the database" in r.getMessage()
    ]


async def test_a_worker_rides_out_a_lost_database_and_takes_jobs_again(
    dsn: str, store_role: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_postgres, "_CONNECT_TIMEOUT", 1.0)
    monkeypatch.setattr(_workers, "_POLL", 3600.0)  # a pause request comes by LISTEN only
    monkeypatch.setattr(_workers, "_CONNECT_TIMEOUT", 1)  # the job queue's wait for its pool
    monkeypatch.setattr(_workers, "_RECONNECT_BACKOFF", (0.05, 0.2))
    caplog.set_level(logging.INFO)
    # The worker (its store and its job queue) logs in as the role that is cut off; the
    # deciders stay connected as another.
    app = _approval_app(make_conninfo(dsn, user=store_role))
    deciders = _approval_app(dsn)
    workers = _fast(app)
    await workers.install()
    before = await deciders.run({"n": 1}, thread="before")
    during = await deciders.run({"n": 10}, thread="during")
    run = asyncio.create_task(workers.run(install_signal_handlers=False))
    try:
        await deciders.decide("before", {before.interrupts[0].id: True}, actor="ana")
        await _until(lambda: _is(deciders, "before", "done"))
        # The database goes away under the worker: every session of its role ends and new
        # ones are refused. It keeps running and says so once.
        assert _login(dsn, store_role, allowed=False) >= 1
        await _until(lambda: run.done() or _outages(caplog), within=60)
        assert not run.done(), run.exception()
        # A decision made meanwhile queues its continuation; the worker takes it once back.
        await deciders.decide("during", {during.interrupts[0].id: True}, actor="ana")
        _login(dsn, store_role, allowed=True)
        await _until(lambda: run.done() or _is(deciders, "during", "done"), within=60)
        assert not run.done(), run.exception()
        assert (await deciders.get_state("during")).values == {"n": 11, "ok": True}
        # Its pause listener listens again (a request no longer waits for the run's poll).
        await _until(lambda: _listening(dsn, store_role), within=30)
    finally:
        workers.stop()
        await asyncio.wait_for(run, 30)
    assert len(_outages(caplog)) == 1
    # One line says it, not a traceback per attempt (nor procrastinate's own).
    assert [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []
    await app.store.close()
    await deciders.store.close()


async def test_a_recovery_look_without_its_database_is_skipped_not_an_error(
    dsn: str, store_role: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The periodic recovery, like the sweep, runs again next period: a lost database is
    # a line at INFO, not a failed job with its traceback at ERROR.
    monkeypatch.setattr(_workers, "_CONNECT_TIMEOUT", 1)
    caplog.set_level(logging.INFO)
    app = _approval_app(make_conninfo(dsn, user=store_role))
    workers = _fast(app)
    await workers.install()
    async with workers.procrastinate.open_async():
        assert await workers._recover(None) == 0  # the database answers: nothing stalled
        _login(dsn, store_role, allowed=False)
        try:
            assert await workers._recover(None) == 0
        finally:
            _login(dsn, store_role, allowed=True)
    skipped = [r for r in caplog.records if "recovery of stalled jobs skipped" in r.getMessage()]
    assert len(skipped) == 1 and skipped[0].levelno == logging.INFO
    await app.store.close()


async def test_a_worker_stopped_while_its_database_is_lost_exits(
    dsn: str, store_role: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_workers, "_CONNECT_TIMEOUT", 1)  # the job queue's wait for its pool
    caplog.set_level(logging.INFO)
    app = _approval_app(make_conninfo(dsn, user=store_role))
    workers = _fast(app)
    await workers.install()
    run = asyncio.create_task(workers.run(install_signal_handlers=False))
    try:
        await _until(lambda: workers._open)
        _login(dsn, store_role, allowed=False)
        await _until(lambda: run.done() or _outages(caplog), within=60)
        assert not run.done(), run.exception()
    finally:
        workers.stop()  # as on SIGTERM
        await asyncio.wait_for(run, 30)
        _login(dsn, store_role, allowed=True)
    await app.store.close()


async def test_a_retry_hands_over_to_a_continuation_queued_while_its_job_ran(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _two_questions_app(dsn)
    workers = _fast(app)
    await workers.install()
    asked = await app.run({"n": 0}, thread="t")
    first, second = asked.interrupts
    await app.decide("t", {first.id: True}, actor="ana")  # queues a continuation
    drive = workers._drive
    attempts: list[str] = []

    async def meets_a_restart(thread: str, context: Any, **kwargs: Any) -> str:
        attempts.append(thread)
        if len(attempts) == 1:
            # While the continuation runs, the other decision queues the next one (the
            # running job holds no queueing lock); then the database restarts under the job.
            await app.decide("t", {second.id: False}, actor="bo")
            assert [status for status, *_ in _jobs(dsn)] == ["doing", "todo"]
            raise StoreUnavailable("the connection was lost")
        return await drive(thread, context, **kwargs)

    monkeypatch.setattr(workers, "_drive", meets_a_restart)
    async with _working(workers):
        await _until(lambda: _is(app, "t", "done"))
        # The retry handed over to the job queued meanwhile: none is left to run again.
        await _until(lambda: all(status != "todo" for status, *_ in _jobs(dsn)))
    assert (await app.get_state("t")).values == {"n": 0, "a": True, "b": False}
    assert attempts == ["t", "t"]  # the failed attempt, and the one that continued the thread
    assert [status for status, *_ in _jobs(dsn)] == ["cancelled"]  # the second was deleted
    await app.store.close()
