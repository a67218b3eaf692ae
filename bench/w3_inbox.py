"""W3: the inbox at scale, through the stores' indexes (no HTTP).

    python bench/w3_inbox.py                   # PostgreSQL: 1,000,000 pending; SQLite: 5,000
    python bench/w3_inbox.py --pending 100000  # PostgreSQL with fewer
    python bench/w3_inbox.py --only sqlite

The store is filled in bulk through ``append_checkpoint``: one checkpoint per thread raising
100 interrupts, rows spread over several tools (one of five gates no tool), written as the
runtime writes them (``durable=False``, a few appends in flight at once). Then, measured with
`App.inbox` and `App.inbox_counts`:

- PostgreSQL (a throwaway server from ``tests/_pgserver.py``, or
  ``$INTERLOCK_TEST_POSTGRES_DSN``): the first page of 50, p50 (target ≤ 5 ms); the first page
  filtered by a tool, p50 (≤ 5 ms); the count by tool, p50 (≤ 50 ms). The table is vacuumed
  after the fill, as autovacuum would do, so that the count can read the (tool) index alone
  (schema version 7) without visiting the table.
- SQLite (a file under a temporary directory): the first page of 50, p50 (≤ 1 ms), with 5,000
  pending; the count by tool is printed beside it.

One JSON line per figure set.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench._approvals_app import H1, finish, prepare, review  # noqa: E402
from bench._common import percentile  # noqa: E402

from interlock import END, START, App, Graph  # noqa: E402
from interlock.stores import (  # noqa: E402
    CheckpointRecord,
    InterruptRecord,
    PostgresStore,
    SqliteStore,
    Store,
)

PER_CHECKPOINT = 100
TOOLS: tuple[str | None, ...] = ("send_email", "refund", "deploy", "shell", None)
IN_FLIGHT = 4


def _app(store: Store) -> App[Any]:
    g = Graph(H1, name="w3")
    g.add_node("prepare", prepare).add_node("review", review).add_node("finish", finish)
    g.add_edge(START, "prepare").add_edge("prepare", "review")
    g.add_edge("review", "finish").add_edge("finish", END)
    return g.compile(store=store)


def _rows(app: App[Any], t: int, now: float) -> tuple[CheckpointRecord, list[InterruptRecord]]:
    body = app.plan.codec.encode([{"question": "approve?", "n": t}, {"type": "boolean"}], path="i")
    thread = f"w3-{t:07d}"
    checkpoint = f"{t:010d}-w3"
    rows = []
    for i in range(PER_CHECKPOINT):
        tool = TOOLS[i % len(TOOLS)]
        rows.append(
            InterruptRecord(
                id=f"w3{t:07d}{i:04d}",
                thread=thread,
                checkpoint_id=checkpoint,
                key=None,
                address="node:review" if tool is None else f"node:review/tool:{tool}:call_{i}",
                kind="dynamic",
                status="pending",
                created_at=now + t * PER_CHECKPOINT + i,
                deadline=None,
                body=body,
                tool=tool,
            )
        )
    record = CheckpointRecord(
        thread=thread,
        id=checkpoint,
        parent_id=None,
        seq=1,
        step=0,
        base_seq=1,
        created_at=now,
        source="loop",
        status="interrupted",
        body=b"",
    )
    return record, rows


async def _fill(app: App[Any], pending: int, label: str) -> float:
    """Write ``pending`` interrupts; return the seconds it took (progress on stderr)."""
    checkpoints = max(pending // PER_CHECKPOINT, 1)
    now = time.time() - 10 * checkpoints * PER_CHECKPOINT
    started = time.perf_counter()
    next_t = 0
    done = 0

    async def writer() -> None:
        nonlocal next_t, done
        while next_t < checkpoints:
            t = next_t
            next_t += 1
            record, rows = _rows(app, t, now)
            await app.store.append_checkpoint(
                record, expected_head=None, new_interrupts=rows, durable=False
            )
            done += 1
            if done % max(checkpoints // 20, 1) == 0 or done == checkpoints:
                rate = done * PER_CHECKPOINT / (time.perf_counter() - started)
                print(
                    f"{label}: {done * PER_CHECKPOINT:,}/{checkpoints * PER_CHECKPOINT:,} "
                    f"pending written ({rate:,.0f}/s)",
                    file=sys.stderr,
                    flush=True,
                )

    async with asyncio.TaskGroup() as tg:
        for _ in range(IN_FLIGHT):
            tg.create_task(writer())
    return time.perf_counter() - started


async def _p50_ms(call: Callable[[], Awaitable[object]], samples: int) -> float:
    for _ in range(3):  # warm the caches and the prepared statements
        await call()
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        await call()
        times.append((time.perf_counter() - start) * 1000)
    return round(percentile(times, 0.5), 3)


async def _measure(app: App[Any], pending: int) -> dict[str, Any]:
    page = await app.inbox(limit=50)
    assert len(page) == min(50, pending), len(page)
    counts = await app.inbox_counts()
    assert sum(counts.values()) == pending, counts
    assert len(await app.inbox(tool="refund", limit=50)) == min(50, counts.get("refund", 0))
    return {
        "first_page_p50_ms": await _p50_ms(lambda: app.inbox(limit=50), 200),
        "by_tool_page_p50_ms": await _p50_ms(lambda: app.inbox(tool="refund", limit=50), 200),
        "counts_p50_ms": await _p50_ms(app.inbox_counts, 50),
        "counts": {str(k): v for k, v in sorted(counts.items(), key=lambda kv: str(kv[0]))},
    }


async def _postgres(dsn: str, pending: int) -> dict[str, Any]:
    import psycopg

    store = PostgresStore(dsn)
    app = _app(store)
    try:
        fill_s = await _fill(app, pending, "postgres")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE interrupts")
        figures = await _measure(app, pending)
    finally:
        await store.close()
    return {"fill_s": round(fill_s, 1), **figures}


async def _sqlite(path: Path, pending: int) -> dict[str, Any]:
    store = SqliteStore(path)
    app = _app(store)
    try:
        fill_s = await _fill(app, pending, "sqlite")
        figures = await _measure(app, pending)
    finally:
        await store.close()
    return {"fill_s": round(fill_s, 1), **figures}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pending", type=int, default=1_000_000, help="PostgreSQL's pending rows")
    p.add_argument(
        "--sqlite-pending", type=int, default=5_000, help="SQLite's pending rows (default 5000)"
    )
    p.add_argument("--only", choices=["postgres", "sqlite"], default=None)
    args = p.parse_args()
    if args.only in (None, "sqlite"):
        with tempfile.TemporaryDirectory() as folder:
            out = asyncio.run(_sqlite(Path(folder) / "w3.db", args.sqlite_pending))
        line = {"bench": "W3", "store": "sqlite", "pending": args.sqlite_pending, **out}
        line["target"] = "first page p50 <= 1 ms"
        line["pass"] = out["first_page_p50_ms"] <= 1
        print(json.dumps(line), flush=True)
    if args.only in (None, "postgres"):
        from _pgserver import pg_server

        with pg_server() as server, server.schema_dsn() as dsn:
            out = asyncio.run(_postgres(dsn, args.pending))
        line = {"bench": "W3", "store": "postgres", "pending": args.pending, **out}
        line["target"] = "first page p50 <= 5 ms, by tool <= 5 ms, counts <= 50 ms"
        line["pass"] = {
            "first_page": out["first_page_p50_ms"] <= 5,
            "by_tool_page": out["by_tool_page_p50_ms"] <= 5,
            "counts": out["counts_p50_ms"] <= 50,
        }
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
