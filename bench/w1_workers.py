"""W1 and W2: interlock's runs spread over ``interlock worker`` processes on one PostgreSQL.

    python bench/w1_workers.py                    # 2,000 threads; 1, 2 and 4 workers; W2
    python bench/w1_workers.py --threads 300 --workers 1 4

W1 — each thread: a run (a worker takes the ``start_run`` job) → a gated refund asks for
approval → this driver process approves it → the decision queues the continuation in its own
transaction → a worker continues: the refund is a dangerous effect with 20 ms of simulated I/O,
written to an outside ledger → done. Throughput is threads finished per second of wall time,
from the first job queued to the last thread done, for 1, 2 and 4 worker processes (each runs
``--concurrency`` jobs at once). In the 4-worker run two workers are SIGKILLed once a third of
the threads are done; the survivors take over their jobs. (That run is also made without the
kills, so that growth compares like with like: after the kills only two workers are left.)
Checked every time: every thread done, each refund made exactly once (the ledger), no refund in
flight in two processes at once (the ledger's start and end marks; a killed process's open
refund ends when it was killed).

W2 — decision posted → the worker's continuation starts (the refund's start mark in the
ledger): ``--samples`` decisions one at a time with one idle worker, p50 / p99 (goal ≤ 100 ms).
And a forced pause request (``app.request_pause(thread, forced=True)``) → the worker's run has
stopped, with up to 50 refunds running in one worker (measured by reading the thread's status
every 2 ms, so it includes up to 2 ms of that).

A throwaway PostgreSQL 15 (``tests/_pgserver.py``, or ``$INTERLOCK_TEST_POSTGRES_DSN``) on this
machine; one JSON line per figure set, then a summary.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "workers"))

import psycopg  # noqa: E402
from _fleet import (  # noqa: E402
    Driver,
    build,
    check_ledger,
    fleet,
    fleet_workers,
    read_ledger,
    worker_logs,
)
from bench._common import percentile  # noqa: E402

from _pgserver import pg_server  # noqa: E402


def _count(dsn: str, status: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM threads WHERE status = %s", (status,)).fetchone()
    return 0 if row is None else int(row[0])


async def w1(
    dsn: str, n_threads: int, n_workers: int, concurrency: int, kill: bool
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Path(tmp)
        app = build(dsn)
        workers = fleet_workers(app)
        await workers.install()
        with fleet(dsn, ledger, n_workers, concurrency=concurrency) as procs:
            await asyncio.sleep(1.5)  # let the workers start before the clock does
            t0 = time.perf_counter()
            async with workers.opened():
                for i in range(n_threads):
                    await workers.start({"order": i, "tid": f"o-{i}"}, thread=f"o-{i}")
            driver = Driver(app, ledger)
            killed: dict[int, float] = {}
            done = 0
            while done < n_threads:
                await driver.step()
                done = _count(dsn, "done")
                _check_alive(procs, killed, ledger)
                if kill and not killed and done >= n_threads // 3:
                    for p in procs[:2]:
                        p.send_signal(signal.SIGKILL)
                        killed[p.pid] = time.time()
                await asyncio.sleep(0.02)
            wall = time.perf_counter() - t0
        report = check_ledger(ledger, killed)
        states = [await app.get_state(f"o-{i}") for i in range(n_threads)]
        await app.store.close()
    lost = sum(1 for s in states if s.status != "done" or "receipt" not in s.values)
    duplicated = sum(1 for c in report.refunds.values() if c > 1)
    missing = n_threads - len(report.refunds)
    return {
        "bench": "W1",
        "workers": n_workers,
        "concurrency": concurrency,
        "threads": n_threads,
        "killed": len(killed),
        "wall_s": round(wall, 2),
        "threads_per_s": round(n_threads / wall, 1),
        "reconciled": len(driver.reconciled),
        "lost": lost + missing,
        "duplicated": duplicated,
        "overlapping": len(report.overlaps),
    }


def _check_alive(procs: list[Any], killed: dict[int, float], ledger: Path) -> None:
    """Stop the run, with the worker's last words, if a worker died that was not killed."""
    for p in procs:
        if p.pid not in killed and p.poll() is not None:
            raise SystemExit(f"a worker exited ({p.returncode}):\n{worker_logs(ledger)[-3000:]}")


async def w2(dsn: str, samples: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Path(tmp)
        app = build(dsn)
        workers = fleet_workers(app)
        await workers.install()
        with fleet(dsn, ledger, 1, concurrency=10):
            await asyncio.sleep(1.5)
            for i in range(samples):
                await workers.start({"order": i, "tid": f"l-{i}"}, thread=f"l-{i}")
            while len(await app.inbox(limit=samples + 1)) < samples:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            posted: dict[str, float] = {}
            for item in await app.inbox(limit=samples):
                await asyncio.sleep(0.05)  # the worker is idle again
                posted[item.thread] = time.time()
                await app.decide(item.thread, {item.id: True}, actor="driver")
            while _count(dsn, "done") < samples:  # noqa: ASYNC110 - another process
                await asyncio.sleep(0.05)
        starts = {e["thread"]: e["at"] for e in read_ledger(ledger) if e["mark"] == "start"}
        await app.store.close()
    latencies = sorted((starts[t] - posted[t]) * 1000 for t in posted)
    return {
        "bench": "W2",
        "samples": len(latencies),
        "p50_ms": round(percentile(latencies, 0.5), 1),
        "p99_ms": round(percentile(latencies, 0.99), 1),
        "max_ms": round(latencies[-1], 1),
    }


async def _thread_status(app: Any, thread: str) -> str | None:
    record = await app.store.get_thread(thread)
    return None if record is None else str(record.status)


async def w2_pause(dsn: str, samples: int) -> dict[str, Any]:
    """A forced pause request → the worker's run has stopped (the thread reads ``paused``)."""
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Path(tmp)
        app = build(dsn)
        workers = fleet_workers(app)
        await workers.install()
        latencies = []
        with fleet(dsn, ledger, 1, concurrency=samples, io=3600):
            await asyncio.sleep(1.5)
            for i in range(samples):
                await workers.start({"order": i, "tid": f"p-{i}"}, thread=f"p-{i}")
            driver = Driver(app, ledger)
            while len({e["thread"] for e in read_ledger(ledger)}) < samples:
                await driver.step()  # approve: each refund then runs for an hour
                await asyncio.sleep(0.02)
            for i in range(samples):
                t0 = time.perf_counter()
                await app.request_pause(f"p-{i}", forced=True)
                while await _thread_status(app, f"p-{i}") != "paused":  # noqa: ASYNC110
                    await asyncio.sleep(0.002)
                latencies.append((time.perf_counter() - t0) * 1000)
        await app.store.close()
    latencies.sort()
    return {
        "bench": "W2 pause",
        "samples": len(latencies),
        "p50_ms": round(percentile(latencies, 0.5), 1),
        "p99_ms": round(percentile(latencies, 0.99), 1),
        "max_ms": round(latencies[-1], 1),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--concurrency", type=int, default=1, help="jobs per worker at once")
    parser.add_argument("--samples", type=int, default=200, help="W2 decisions")
    args = parser.parse_args()
    rows = []
    with pg_server() as server:
        runs = [(n, False) for n in args.workers]
        if max(args.workers) >= 4:
            runs.append((max(args.workers), True))
        for n, kill in runs:
            with server.schema_dsn() as dsn:
                row = await w1(dsn, args.threads, n, args.concurrency, kill=kill)
            print(json.dumps(row), flush=True)
            rows.append(row)
        with server.schema_dsn() as dsn:
            latency = await w2(dsn, args.samples)
        print(json.dumps(latency), flush=True)
        with server.schema_dsn() as dsn:
            pause = await w2_pause(dsn, min(args.samples, 50))
        print(json.dumps(pause), flush=True)
    print()
    print("W1 (threads/s by worker processes; must grow with workers):")
    for row in rows:
        ok = row["lost"] == row["duplicated"] == row["overlapping"] == 0
        print(
            f"  {row['workers']} worker(s) x {row['concurrency']}: {row['threads_per_s']:>7}/s"
            f"  killed {row['killed']}, reconciled {row['reconciled']}, lost {row['lost']}, "
            f"duplicated {row['duplicated']}, overlapping {row['overlapping']}"
            f"  {'PASS' if ok else 'FAIL'}"
        )
    clean = [r for r in rows if not r["killed"]]
    grows = all(a["threads_per_s"] < b["threads_per_s"] for a, b in itertools.pairwise(clean))
    print(f"  grows with workers: {'PASS' if grows else 'FAIL'}")
    ok = latency["p99_ms"] <= 100
    print(
        f"W2 decision → continuation starts: p50 {latency['p50_ms']} ms, "
        f"p99 {latency['p99_ms']} ms (goal ≤ 100 ms: {'PASS' if ok else 'FAIL'})"
    )
    ok = pause["p99_ms"] <= 100
    print(
        f"W2 forced pause request → the worker's run stopped: p50 {pause['p50_ms']} ms, "
        f"p99 {pause['p99_ms']} ms (goal ≤ 100 ms: {'PASS' if ok else 'FAIL'})"
    )


if __name__ == "__main__":
    asyncio.run(main())
