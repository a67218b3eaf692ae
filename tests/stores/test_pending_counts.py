"""`Store.pending_counts` through the indexes (the plans, PostgreSQL's version 7), and
`App.inbox_counts` over it."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import TypedDict

import psycopg
import pytest

from interlock import END, START, Graph, approve
from interlock.stores import (
    CheckpointRecord,
    InterruptRecord,
    PendingFilter,
    Resolution,
    SqliteStore,
)
from interlock.stores import _postgres_schema as pg_schema
from interlock.stores import _postgres_sql as pg_sql
from interlock.stores import _sqlite_sql as sqlite_sql
from interlock.stores._postgres import PostgresStore

pytestmark = pytest.mark.anyio

TOOLS = ("mail", "shell", None)


def checkpoint(thread: str, seq: int) -> CheckpointRecord:
    return CheckpointRecord(
        thread=thread,
        id=f"{thread}.{seq}",
        parent_id=f"{thread}.{seq - 1}" if seq > 1 else None,
        seq=seq,
        step=seq - 2,
        base_seq=1,
        created_at=1000.0 + seq,
        source="loop",
        status="interrupted",
        body=b"body",
    )


def raised(n: int, at: CheckpointRecord) -> InterruptRecord:
    tool = TOOLS[n % len(TOOLS)]
    return InterruptRecord(
        id=f"{at.thread}-{n}",
        thread=at.thread,
        checkpoint_id=at.id,
        key=None,
        address="node:review" if tool is None else f"node:review/tool:{tool}:c{n}",
        kind="dynamic",
        status="pending",
        created_at=at.created_at + n,
        deadline=None,
        body=b"?",
        tool=tool,
    )


async def test_a_postgres_database_of_version_6_gets_the_count_index(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = checkpoint("t", 1)
    with monkeypatch.context() as old:
        old.setattr(pg_schema, "MIGRATIONS", pg_schema.MIGRATIONS[:6])
        old.setattr(pg_schema, "SCHEMA_VERSION", 6)
        async with PostgresStore(dsn) as store:
            rows = [raised(n, one) for n in range(7)]
            await store.append_checkpoint(one, expected_head=None, new_interrupts=rows)
    with psycopg.connect(dsn) as conn:
        found = conn.execute("SELECT to_regclass('interrupts_pending_tool_count')").fetchone()
        assert found == (None,)
    async with PostgresStore(dsn) as store:
        assert await store.migrate() == []  # opening applied version 7
        assert await store.pending_counts() == {"mail": 3, "shell": 2, None: 2}
        await store.append_checkpoint(
            checkpoint("t", 2),
            expected_head=one.id,
            resolutions=[
                Resolution(id="t-0", status="resolved", resolved_at=2000.0, resolution=None)
            ],
        )
        assert await store.pending_counts() == {"mail": 2, "shell": 2, None: 2}
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
        assert [v for (v,) in rows] == list(range(1, 8))
        conn.execute("SET enable_seqscan = off")
        query, params = pg_sql.pending_counts_query(PendingFilter())
        plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN {query}", params).fetchall())
        assert "interrupts_pending_tool_count" in plan, plan


async def test_sqlite_counts_go_through_a_pending_index(tmp_path: Path) -> None:
    path = tmp_path / "counts.db"
    async with SqliteStore(path) as store:
        await store.get_thread("t")
    with closing(sqlite3.connect(path)) as conn:
        for where, index in [
            (PendingFilter(), "INDEX interrupts_pending_tool"),
            (PendingFilter(tool="mail"), "INDEX interrupts_pending_tool"),
            (PendingFilter(older_than=5.0), "INDEX interrupts_pending_tool"),
            (PendingFilter(key="k"), "INDEX interrupts_pending_key"),
            (PendingFilter(thread="t"), "INDEX interrupts_thread"),
        ]:
            query, params = sqlite_sql.pending_counts_query(where)
            plan = " ".join(r[-1] for r in conn.execute(f"EXPLAIN QUERY PLAN {query}", params))
            assert index in plan, (where, plan)


class Order(TypedDict, total=False):
    ok: bool


async def test_app_inbox_counts_checks_its_arguments_and_counts(tmp_path: Path) -> None:
    def review(state: Order) -> Order:
        return {"ok": approve("Ship it?")}

    g = Graph(Order, name="orders")
    g.add_node("review", review).add_edge(START, "review").add_edge("review", END)
    store = SqliteStore(tmp_path / "app.db")
    app = g.compile(store=store)
    try:
        for thread in ("a", "b"):
            await app.run({}, thread=thread)
        assert await app.inbox_counts() == {None: 2}
        assert await app.inbox_counts(thread="a") == {None: 1}
        assert await app.inbox_counts(tool="send_email") == {}
        assert await app.inbox_counts(older_than=0.0) == {}
        with pytest.raises(TypeError, match="thread"):
            await app.inbox_counts(thread=5)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="older_than"):
            await app.inbox_counts(older_than="soon")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="deadline_before"):
            await app.inbox_counts(deadline_before=float("nan"))
        with pytest.raises(ValueError, match="key"):
            await app.inbox_counts(key="")
    finally:
        await store.close()
