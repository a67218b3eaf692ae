"""Worker processes over one PostgreSQL: four ``interlock worker`` processes, two of them
SIGKILLed while they run refunds; and one stopped with SIGTERM mid-task.

What must hold (the outside ledger and the store prove it): every thread finishes, every
approved refund is made exactly once, no refund is in flight in two processes at once, and the
jobs of the killed workers are taken over by the others.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from _fleet import Driver, build, check_ledger, fleet, fleet_workers, read_ledger, worker_logs

from _pgserver import PgServer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # worker processes: the main Python only


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def _done(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM threads WHERE status = 'done'").fetchone()
    assert row is not None
    return int(row[0])


async def _drive(driver: Driver, dsn: str, n: int, within: float, on_tick: Any = None) -> None:
    deadline = time.monotonic() + within
    while _done(dsn) < n:
        if time.monotonic() > deadline:
            raise AssertionError(f"only {_done(dsn)} of {n} threads finished in {within} s")
        await driver.step()
        if on_tick is not None:
            on_tick()
        await asyncio.sleep(0.05)


async def test_four_workers_two_of_them_killed_run_every_refund_once(
    dsn: str, tmp_path: Path
) -> None:
    n = 40
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    app = build(dsn)
    workers = fleet_workers(app)
    await workers.install()
    with fleet(dsn, ledger, 4, io=0.3) as procs:
        async with workers.opened():  # one pool for the forty jobs
            for i in range(n):
                await workers.start({"order": i, "tid": f"order-{i}"}, thread=f"order-{i}")
        driver = Driver(app, ledger)
        killed: dict[int, float] = {}

        def kill_two_mid_refund() -> None:
            for p in procs:
                if p.pid not in killed and p.poll() is not None:
                    raise AssertionError(f"a worker died:\n{worker_logs(ledger)[-3000:]}")
            # Once refunds are being made, kill two workers at once.
            if not killed and check_ledger(ledger).refunds:
                for p in procs[:2]:
                    p.send_signal(signal.SIGKILL)
                    killed[p.pid] = time.time()

        await _drive(driver, dsn, n, within=150, on_tick=kill_two_mid_refund)
        assert len(killed) == 2
        assert all(p.poll() is None for p in procs[2:]), "the survivors kept running"
    report = check_ledger(ledger, killed)
    assert report.overlaps == []
    assert report.refunds == {f"order-{i}": 1 for i in range(n)}
    for i in range(n):
        state = await app.get_state(f"order-{i}")
        assert state.status == "done"
        assert state.values["receipt"] in {f"r-{i}", "r-reconciled"}
    # The killed workers' jobs were found stalled and taken over (their threads may also have
    # waited for the killed run's lease to run out): the survivors say so.
    assert "queued again" in worker_logs(ledger)
    await app.store.close()


async def test_a_worker_stopped_by_sigterm_hands_its_thread_to_another(
    dsn: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    app = build(dsn)
    workers = fleet_workers(app)
    await workers.install()
    result = await app.run({"order": 7, "tid": "slow"}, thread="slow")
    with fleet(dsn, ledger, 1, io=3600) as [first]:
        await app.decide("slow", {result.interrupts[0].id: True}, actor="ana")
        while not _started(ledger):  # noqa: ASYNC110 - another process writes it
            await asyncio.sleep(0.05)
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=30) == 0
    # The refund was cut off in flight: paused (forced after the grace), queued again.
    state = await app.get_state("slow")
    assert state.status == "paused"
    with psycopg.connect(dsn) as conn:
        queued = conn.execute(
            "SELECT count(*) FROM procrastinate_jobs "
            "WHERE status = 'todo' AND lock = 'interlock/slow'"
        ).fetchone()
    assert queued == (1,)
    with fleet(dsn, ledger, 1, io=0.01):
        driver = Driver(app, ledger)
        await _drive(driver, dsn, 1, within=60)
    # The refund had started and never ended: a person was asked, and said retry.
    assert driver.reconciled == {"slow": "retry"}
    assert check_ledger(ledger).refunds == {"slow": 1}
    await app.store.close()


async def test_a_worker_rides_out_a_server_restart(
    server: PgServer, dsn: str, tmp_path: Path
) -> None:
    if not server.owned:
        pytest.skip("stops the test server: needs one the tests started")
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    app = build(dsn)
    workers = fleet_workers(app)
    await workers.install()
    driver = Driver(app, ledger)
    with fleet(dsn, ledger, 1) as [worker]:
        await workers.start({"order": 1, "tid": "before"}, thread="before")
        await _drive(driver, dsn, 1, within=60)
        with server.down():
            # The worker notices (its fetch, heartbeat or listener fails), says so, and waits.
            deadline = time.monotonic() + 60
            while "lost the database" not in worker_logs(ledger):
                assert worker.poll() is None, worker_logs(ledger)
                assert time.monotonic() < deadline, "the worker did not notice the outage"
                await asyncio.sleep(0.05)
        # Back up: it takes the jobs queued from now on, and listens for pauses again.
        await workers.start({"order": 2, "tid": "after"}, thread="after")
        await _drive(driver, dsn, 2, within=60)
        assert worker.poll() is None, worker_logs(ledger)
    assert worker.returncode == 0  # SIGTERM: it stopped as asked
    logs = worker_logs(ledger)
    assert logs.count("lost the database") == 1, logs
    assert "Traceback" not in logs, logs
    assert check_ledger(ledger).refunds == {"before": 1, "after": 1}
    await app.store.close()


def _started(ledger: Path) -> bool:
    return any(e["mark"] == "start" for e in read_ledger(ledger))
