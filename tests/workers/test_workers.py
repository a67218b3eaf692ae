"""`Workers` in one process over a real PostgreSQL: what a decision queues (in its own
transaction, once), what a worker runs, how a pause request and a deadline reach it.

procrastinate runs on asyncio only, so these tests do too.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypedDict

import procrastinate
import psycopg
import pytest
from click.testing import CliRunner

from interlock import (
    END,
    START,
    App,
    Graph,
    InvalidResume,
    SqliteStore,
    StoreError,
    approve,
    interrupt,
)
from interlock.cli import cli
from interlock.stores import PostgresStore
from interlock.workers import Workers, _workers

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "observability"))
from _observed import named, recording

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


class S(TypedDict, total=False):
    n: int
    ok: bool
    a: bool
    b: bool
    slept: bool


async def ask(state: S) -> S:
    return {"ok": approve(f"go on with {state['n']}?")}


async def act(state: S) -> S:
    return {"n": state["n"] + 1}


def _approval_app(dsn: str, *, deadline: float | None = None) -> App[S]:
    async def ask_by(state: S) -> S:
        return {"ok": approve("go on?", deadline=deadline)}

    g = Graph(S, name="approval")
    g.add_node("ask", ask if deadline is None else ask_by).add_node("act", act)
    g.add_edge(START, "ask").add_edge("ask", "act").add_edge("act", END)
    return g.compile(store=PostgresStore(dsn), lease_ttl=2.0)


def _two_questions_app(dsn: str) -> App[S]:
    async def first(state: S) -> S:
        return {"a": bool(interrupt({"q": "a?"}, key="a"))}

    async def second(state: S) -> S:
        return {"b": bool(interrupt({"q": "b?"}, key="b"))}

    g = Graph(S, name="two")
    g.add_node("first", first).add_node("second", second)
    g.add_edge(START, "first").add_edge(START, "second")
    g.add_edge("first", END).add_edge("second", END)
    return g.compile(store=PostgresStore(dsn), lease_ttl=2.0)


class _Slow:
    """A one-node graph whose node sleeps ``sleep`` seconds; ``started`` is set as it starts."""

    def __init__(self, dsn: str, sleep: float = 3600.0) -> None:
        self.sleep = sleep
        self.started = asyncio.Event()

        async def slow(state: S) -> S:
            self.started.set()
            await asyncio.sleep(self.sleep)
            return {"slept": True}

        g = Graph(S, name="slow")
        g.add_node("slow", slow).add_edge(START, "slow").add_edge("slow", END)
        self.app = g.compile(store=PostgresStore(dsn))

    async def running(self) -> None:
        await asyncio.wait_for(self.started.wait(), 20)


def _jobs(dsn: str, task: str = "interlock:continue_thread") -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT status::text, lock, queueing_lock, args FROM procrastinate_jobs "
            "WHERE task_name = %s ORDER BY id",
            (task,),
        ).fetchall()


@contextlib.asynccontextmanager
async def _working(workers: Workers) -> AsyncIterator[Workers]:
    task = asyncio.create_task(workers.run(install_signal_handlers=False))
    try:
        await _until(lambda: workers._open)
        yield workers
    finally:
        workers.stop()
        await asyncio.wait_for(task, 30)


async def _until(check: Any, within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while not await _maybe(check()):
        if time.monotonic() > deadline:
            raise AssertionError("gave up waiting")
        await asyncio.sleep(0.02)


async def _maybe(value: Any) -> Any:
    return await value if asyncio.iscoroutine(value) else value


async def _status(app: App[Any], thread: str) -> str:
    return (await app.get_state(thread)).status


def _fast(app: App[Any], **kwargs: Any) -> Workers:
    return Workers(
        app, heartbeat=0.5, stalled_after=2.0, sweep_every=1, poll_interval=0.5, **kwargs
    )


# -- what a decision queues -------------------------------------------------------------------


async def test_a_decision_queues_the_continuation_in_its_own_transaction(dsn: str) -> None:
    app = _approval_app(dsn)
    await _fast(app).install()
    result = await app.run({"n": 1}, thread="t")
    assert result.status == "interrupted" and _jobs(dsn) == []
    [decision] = await app.decide("t", {result.interrupts[0].id: True}, actor="ana")
    assert decision.final
    assert _jobs(dsn) == [("todo", "interlock/t", "interlock/t", {"thread": "t"})]
    await app.store.close()


async def test_a_decision_whose_job_cannot_be_queued_is_not_recorded(dsn: str) -> None:
    app = _approval_app(dsn)
    await _fast(app).install()
    result = await app.run({"n": 1}, thread="t")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE procrastinate_jobs ADD CONSTRAINT no_jobs CHECK (false)")
    with pytest.raises(StoreError):
        await app.decide("t", {result.interrupts[0].id: True}, actor="ana")
    [still] = await app.inbox(thread="t")
    assert still.id == result.interrupts[0].id and still.status == "pending"
    await app.store.close()


async def test_refused_decisions_and_quorum_votes_queue_nothing(dsn: str) -> None:
    async def ask_two(state: S) -> S:
        return {"ok": approve("two of you?", approvals=2)}

    g = Graph(S, name="quorum")
    g.add_node("ask", ask_two).add_edge(START, "ask").add_edge("ask", END)
    app = g.compile(store=PostgresStore(dsn))
    await _fast(app).install()
    result = await app.run({"n": 1}, thread="q")
    iid = result.interrupts[0].id
    with pytest.raises(InvalidResume):
        await app.decide("q", {iid: "perhaps"}, actor="ana")
    [vote] = await app.decide("q", {iid: True}, actor="ana")
    assert not vote.final and _jobs(dsn) == []
    [final] = await app.decide("q", {iid: True}, actor="bob")
    assert final.final and len(_jobs(dsn)) == 1
    await app.store.close()


async def test_many_decisions_on_a_waiting_thread_queue_one_continuation(dsn: str) -> None:
    app = _two_questions_app(dsn)
    await _fast(app).install()
    result = await app.run({"n": 0}, thread="t")
    assert len(result.interrupts) == 2
    for i in result.interrupts:
        await app.decide("t", {i.id: True}, actor="ana")
    assert len(_jobs(dsn)) == 1
    await app.store.close()


async def test_resuming_with_answers_queues_nothing(dsn: str) -> None:
    app = _approval_app(dsn)
    await _fast(app).install()
    result = await app.run({"n": 1}, thread="t")
    done = await app.resume("t", {result.interrupts[0].id: True})
    assert done.status == "done" and _jobs(dsn) == []
    await app.store.close()


async def test_install_is_idempotent_and_concurrent(dsn: str) -> None:
    app = _approval_app(dsn)
    created = await asyncio.gather(*(_fast(app).install() for _ in range(3)))
    assert sorted(created) == [False, False, True]
    await app.store.close()


# -- what a worker does ------------------------------------------------------------------------


async def test_a_worker_runs_a_thread_to_its_question_and_on_after_the_decision(dsn: str) -> None:
    app = _approval_app(dsn)
    async with _working(_fast(app)) as workers:
        await workers.start({"n": 1}, thread="t", metadata={"by": "test"})
        await _until(lambda: app.inbox(thread="t"))
        [question] = await app.inbox(thread="t")
        await app.decide("t", {question.id: True}, actor="ana")
        await _until(lambda: _is(app, "t", "done"))
    state = await app.get_state("t")
    assert state.values == {"n": 2, "ok": True}
    assert "job" in state.metadata  # the continuation's
    assert any(s.metadata.get("by") == "test" for s in await app.history("t"))
    await app.store.close()


async def _is(app: App[Any], thread: str, status: str) -> bool:
    try:
        return await _status(app, thread) == status
    except Exception:
        return False


async def test_a_thread_stopped_at_a_breakpoint_is_continued_when_queued(dsn: str) -> None:
    g = Graph(S, name="breakpoint")
    g.add_node("ask", ask).add_node("act", act)
    g.add_edge(START, "ask").add_edge("ask", "act").add_edge("act", END)
    app = g.compile(store=PostgresStore(dsn), interrupt_before=["act"])
    workers = _fast(app)
    await workers.install()
    stopped = await app.run({"n": 1}, thread="b")
    assert stopped.status == "interrupted"
    await app.decide("b", {stopped.interrupts[0].id: True}, actor="ana")  # queues one
    async with workers.opened():
        assert await workers.continue_thread("b") is None  # one is waiting already
    async with _working(workers):
        await _until(lambda: _is(app, "b", "paused"))  # at the breakpoint before "act"
        assert await workers.continue_thread("b") is not None
        await _until(lambda: _is(app, "b", "done"))
    assert (await app.get_state("b")).values == {"n": 2, "ok": True}
    await app.store.close()


async def test_a_pause_request_reaches_the_worker_without_waiting_for_a_poll(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_workers, "_POLL", 3600.0)  # only the notification can bring it
    slow = _Slow(dsn)
    app = slow.app
    async with _working(_fast(app)) as workers:
        await workers.start({"n": 1}, thread="s")
        await slow.running()
        assert await app.request_pause("s", forced=True)
        await _until(lambda: _is(app, "s", "paused"), within=10)
    await app.store.close()


async def test_a_deadline_is_swept_by_a_worker_and_the_thread_goes_on(dsn: str) -> None:
    app = _approval_app(dsn, deadline=0.2)
    await app.run({"n": 1}, thread="late")
    async with _working(_fast(app)):
        await _until(lambda: _is(app, "late", "done"))
    state = await app.get_state("late")
    assert state.values["ok"] is False  # the default on_timeout rejects
    await app.store.close()


async def test_with_workers_installed_a_sweep_records_and_leaves_the_run_to_them(
    dsn: str,
) -> None:
    # One owner of continuation: once the trigger is installed, `App.continued_by` says
    # "workers", and a sweep in any process (here: not a worker) only records the expiry.
    app = _approval_app(dsn, deadline=0.01)
    assert await app.continued_by() == "caller"
    await _fast(app).install()
    assert await app.continued_by() == "workers"
    await app.run({"n": 1}, thread="swept")
    await asyncio.sleep(0.05)
    assert await app.sweep() == []
    assert await _status(app, "swept") != "done"  # nothing ran here
    assert _jobs(dsn) == [("todo", "interlock/swept", "interlock/swept", {"thread": "swept"})]
    async with _working(_fast(app)):
        await _until(lambda: _is(app, "swept", "done"))
    assert (await app.get_state("swept")).values["ok"] is False
    await app.store.close()


async def test_finished_threads_are_expired_by_a_worker(dsn: str) -> None:
    app = _approval_app(dsn)
    first = await app.run({"n": 1}, thread="old")
    await app.resume("old", {first.interrupts[0].id: True})
    waiting = await app.run({"n": 1}, thread="waiting")
    assert waiting.status == "interrupted"
    async with _working(_fast(app, expire_after=0.3)):
        await _until(lambda: _gone(app, "old"))
    assert await app.store.get_thread("old") is None
    assert await _status(app, "waiting") == "interrupted"  # only finished threads go
    await app.store.close()


async def _gone(app: App[Any], thread: str) -> bool:
    return await app.store.get_thread(thread) is None


async def test_stopping_a_worker_gives_its_threads_back(dsn: str) -> None:
    slow = _Slow(dsn)
    app = slow.app
    workers = _fast(app, grace=0.2)
    async with _working(workers):
        await workers.start({"n": 1}, thread="s")
        await slow.running()
    # Stopped: forced after its grace, the thread is paused and queued for another worker.
    assert await _status(app, "s") == "paused"
    assert [j[0] for j in _jobs(dsn)] == ["todo"]
    slow.sleep = 0.0
    async with _working(_fast(app)):
        await _until(lambda: _is(app, "s", "done"))
    assert (await app.get_state("s")).values["slept"] is True
    await app.store.close()


async def test_a_second_stop_forces_at_once(dsn: str) -> None:
    slow = _Slow(dsn)
    app = slow.app
    workers = _fast(app, grace=3600)  # the first stop alone would wait an hour
    task = asyncio.create_task(workers.run(install_signal_handlers=False))
    await _until(lambda: workers._open)
    await workers.start({"n": 1}, thread="s")
    await slow.running()
    workers.stop()
    await asyncio.sleep(0.2)
    assert not task.done()
    workers.stop()
    await asyncio.wait_for(task, 20)
    assert await _status(app, "s") == "paused"
    await app.store.close()


async def test_a_stalled_job_is_queued_again_and_its_thread_resumed(dsn: str) -> None:
    app = _approval_app(dsn)
    workers = _fast(app)
    await workers.install()
    result = await app.run({"n": 1}, thread="t")
    await app.decide("t", {result.interrupts[0].id: True}, actor="ana")
    # A worker took the job and went silent: its heartbeat is old, the job stays "doing".
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO procrastinate_workers (last_heartbeat) VALUES (now() - interval '1 hour')"
        )
        conn.execute(
            "UPDATE procrastinate_jobs SET status = 'doing', "
            "worker_id = (SELECT max(id) FROM procrastinate_workers)"
        )
    async with _working(workers):
        await _until(lambda: _is(app, "t", "done"))
    assert (await app.get_state("t")).values == {"n": 2, "ok": True}
    await app.store.close()


async def test_a_start_taken_over_from_a_dead_worker_is_not_run_twice(dsn: str) -> None:
    app = _approval_app(dsn)
    workers = _fast(app)
    await workers.install()
    job = await workers.start({"n": 1}, thread="t")
    # The first worker ran it as far as its question, then died before finishing the job.
    first = await app.run({"n": 1}, thread="t", metadata={"job": str(job)})
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO procrastinate_workers (last_heartbeat) VALUES (now() - interval '1 hour')"
        )
        conn.execute(
            "UPDATE procrastinate_jobs SET status = 'doing', "
            "worker_id = (SELECT max(id) FROM procrastinate_workers) WHERE id = %s",
            (job,),
        )
    before = len(await app.history("t"))
    async with _working(workers):
        await _until(lambda: _jobs(dsn, "interlock:start_run") == [])  # done (and deleted)
    # Continued, not started again: the same question waits, and no new turn was written.
    [question] = await app.inbox(thread="t")
    assert question.id == first.interrupts[0].id
    assert len(await app.history("t")) == before
    await app.store.close()


async def test_a_worker_serves_its_metrics(dsn: str) -> None:
    import httpx2 as httpx

    app = _approval_app(dsn)
    workers = _fast(app)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    task = asyncio.create_task(workers.run(install_signal_handlers=False, metrics_port=port))
    try:
        await _until(lambda: workers._open)
        await workers.start({"n": 1}, thread="m")
        await _until(lambda: app.inbox(thread="m"))
        async with httpx.AsyncClient() as client:
            page = ""

            async def scraped() -> bool:
                nonlocal page
                page = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
                return (
                    'interlock_worker_jobs_total{outcome="interrupted",task="start_run"} 1.0'
                    in page
                )

            await _until(scraped)
        assert 'interlock_runs_total{status="interrupted"} 1.0' in page
        assert "interlock_worker_running_threads 0.0" in page
    finally:
        workers.stop()
        await asyncio.wait_for(task, 30)
    await app.store.close()


async def test_a_jobs_runs_are_its_children_and_the_continuation_links_to_the_asker(
    dsn: str,
) -> None:
    app = _approval_app(dsn)
    with recording() as spans:
        async with _working(_fast(app)) as workers:
            await workers.start({"n": 1}, thread="o")
            await _until(lambda: app.inbox(thread="o"))
            [question] = await app.inbox(thread="o")
            await app.decide("o", {question.id: True}, actor="ana")
            await _until(lambda: _is(app, "o", "done"))
            await _until(lambda: len(named(spans, "interlock.job")) == 2)
    start, cont = named(spans, "interlock.job")
    asked, resumed = named(spans, "interlock.run")
    assert (start.attributes or {})["interlock.job.task"] == "interlock:start_run"
    assert (cont.attributes or {})["interlock.job.outcome"] == "done"
    assert asked.parent is not None and asked.parent.span_id == start.context.span_id
    assert resumed.parent is not None and resumed.parent.span_id == cont.context.span_id
    assert [link.context.span_id for link in resumed.links] == [asked.context.span_id]
    await app.store.close()


# -- setting up -------------------------------------------------------------------------------


async def test_workers_refuse_what_they_cannot_run(tmp_path: Path, dsn: str) -> None:
    g = Graph(S, name="plain")
    g.add_node("act", act).add_edge(START, "act").add_edge("act", END)
    lite = g.compile(store=SqliteStore(tmp_path / "x.db"))
    with pytest.raises(TypeError, match="PostgreSQL"):
        Workers(lite)
    with pytest.raises(TypeError, match="App"):
        Workers("app")  # type: ignore[arg-type]
    app = _approval_app(dsn)
    with pytest.raises(ValueError, match="sweep_every"):
        Workers(app, sweep_every=7)
    with pytest.raises(ValueError, match="stalled_after"):
        Workers(app, heartbeat=10, stalled_after=5)
    with pytest.raises(ValueError, match="concurrency"):
        Workers(app, concurrency=0)
    with pytest.raises(TypeError, match="JSON"):
        await Workers(app).start({"n": object()}, thread="t")
    with pytest.raises(ValueError, match="thread"):
        await Workers(app).start({"n": 1}, thread="")
    await app.store.close()
    await lite.store.close()


async def test_the_tasks_register_on_an_existing_procrastinate_app(dsn: str) -> None:
    app = _approval_app(dsn)
    mine = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))
    workers = Workers(app, namespace="il", queue="approvals")
    workers.register(mine)
    assert {"il:start_run", "il:continue_thread", "il:sweep"} <= set(mine.tasks)
    await workers.install()
    result = await app.run({"n": 1}, thread="t")
    await app.decide("t", {result.interrupts[0].id: True}, actor="ana")
    assert _jobs(dsn, "il:continue_thread") == [("todo", "il/t", "il/t", {"thread": "t"})]
    await app.store.close()


def test_the_worker_command_refuses_a_store_it_cannot_share(tmp_path: Path) -> None:
    module = tmp_path / "lite_app.py"
    module.write_text(
        "from typing import TypedDict\n"
        "from interlock import Graph, START, END, SqliteStore\n"
        "class S(TypedDict, total=False):\n    n: int\n"
        "g = Graph(S, name='lite')\n"
        "g.add_node('a', lambda s: {}).add_edge(START, 'a').add_edge('a', END)\n"
        f"app = g.compile(store=SqliteStore({str(tmp_path / 'l.db')!r}))\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        result = CliRunner().invoke(cli, ["worker", "--app", "lite_app:app"])
    finally:
        sys.path.remove(str(tmp_path))
    assert result.exit_code == 1
    assert "PostgreSQL" in result.output


def test_a_decision_from_the_command_line_queues_the_continuation(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The trigger is in the database: a decision from any writer queues, here `interlock
    # approve --no-continue` in a process that knows nothing of workers.
    module = tmp_path / "cli_app.py"
    module.write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from test_workers import _approval_app\n"
        "app = _approval_app(os.environ['CLI_APP_DSN'])\n"
    )
    monkeypatch.setenv("CLI_APP_DSN", dsn)
    monkeypatch.syspath_prepend(str(tmp_path))

    async def interrupted() -> str:
        app = _approval_app(dsn)
        await _fast(app).install()
        result = await app.run({"n": 1}, thread="t")
        await app.store.close()
        return result.interrupts[0].id

    iid = asyncio.run(interrupted())
    out = CliRunner().invoke(cli, ["approve", iid, "--no-continue", "--app", "cli_app:app"])
    assert out.exit_code == 0, out.output
    assert _jobs(dsn) == [("todo", "interlock/t", "interlock/t", {"thread": "t"})]
    # The module's app is the module's: the command leaves its store open. Closed here, its
    # pool does not wait for its threads at the interpreter's exit.
    loaded = importlib.import_module("cli_app")
    asyncio.run(loaded.app.store.close())


def test_a_decision_over_the_http_api_queues_the_continuation(dsn: str) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
    import httpx2 as httpx
    from _serving import auth, bearer, order_graph, serving

    from interlock.server import create_app

    asyncio.run(_fast(order_graph().compile(store=PostgresStore(dsn))).install())

    def factory() -> Any:
        app = order_graph().compile(store=PostgresStore(dsn))
        return create_app(app, auth=auth(), continue_runs=False)

    with serving(factory) as s, httpx.Client(base_url=s.url, timeout=10) as client:
        started = client.post(
            "/v1/threads/h1/runs", json={"input": {"n": 1}, "wait": True}, headers=bearer("ana")
        )
        question = started.json()["thread_view"]["interrupts"][0]
        body = {"answer": True, "payload_hash": question["payload_hash"]}
        decided = client.post(
            f"/v1/interrupts/{question['id']}/decision",
            json=body,
            headers={**bearer("ben"), "Idempotency-Key": "k"},
        )
        assert decided.status_code == 201, decided.text
        assert _jobs(dsn) == [("todo", "interlock/h1", "interlock/h1", {"thread": "h1"})]
