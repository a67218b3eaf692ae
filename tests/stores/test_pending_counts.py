"""`Store.pending_counts` through the indexes (the plans; PostgreSQL's counter rows, version 8),
and `App.inbox_counts` over it."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import TypedDict

import anyio
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


def resolved(id: str) -> Resolution:
    return Resolution(id=id, status="resolved", resolved_at=2000.0, resolution=None)


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


@pytest.mark.parametrize("version", [6, 7])
async def test_a_postgres_database_of_an_older_version_keeps_its_counts(
    dsn: str, monkeypatch: pytest.MonkeyPatch, version: int
) -> None:
    one = checkpoint("t", 1)
    with monkeypatch.context() as old:
        old.setattr(pg_schema, "MIGRATIONS", pg_schema.MIGRATIONS[:version])
        old.setattr(pg_schema, "SCHEMA_VERSION", version)
        async with PostgresStore(dsn) as store:
            rows = [raised(n, one) for n in range(7)]
            await store.append_checkpoint(one, expected_head=None, new_interrupts=rows)
            two = checkpoint("t", 2)
            await store.append_checkpoint(two, expected_head=one.id, resolutions=[resolved("t-0")])
    async with PostgresStore(dsn) as store:
        assert await store.migrate() == []  # opening applied the versions after it
        assert await store.pending_counts() == {"mail": 2, "shell": 2, None: 2}
        three = checkpoint("t", 3)
        await store.append_checkpoint(
            three,
            expected_head=two.id,
            resolutions=[resolved("t-1"), resolved("t-2")],
            new_interrupts=[raised(n, three) for n in (7, 9)],
        )
        assert await store.pending_counts() == {"mail": 3, "shell": 2, None: 1}
        assert await store.pending_counts(PendingFilter(tool="mail")) == {"mail": 3}
        assert await store.pending_counts(PendingFilter(tool="deploy")) == {}
        await store.delete_thread("t")
        assert await store.pending_counts() == {}
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
        assert [v for (v,) in rows] == list(range(1, pg_schema.SCHEMA_VERSION + 1))
        found = conn.execute("SELECT to_regclass('interrupts_pending_tool_count')").fetchone()
        assert found == (None,)  # version 8 dropped the index only the old count read


async def test_postgres_counts_read_no_interrupt_unless_filtered(dsn: str) -> None:
    async with PostgresStore(dsn) as store:
        await store.get_thread("t")
    with psycopg.connect(dsn) as conn:
        for where, reads in [
            (PendingFilter(), "pending_count_deltas"),
            (PendingFilter(tool="mail"), "pending_count_deltas"),
            (PendingFilter(thread="t"), "interrupts"),
            (PendingFilter(key="k", tool="mail"), "interrupts"),
            (PendingFilter(older_than=5.0), "interrupts"),
        ]:
            query, params = pg_sql.pending_counts_query(where)
            plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN {query}", params).fetchall())
            tables = {
                line.split(" on ")[1].split()[0] for line in plan.split("\n") if " on " in line
            }
            assert tables & {"interrupts", "pending_count_deltas"} == {reads}, (where, plan)


async def test_postgres_counts_fold_their_deltas_and_keep_every_sum(dsn: str) -> None:
    threads = [f"t{i}" for i in range(pg_sql.FOLD_DELTAS_AFTER // 2 + 10)]
    async with PostgresStore(dsn) as store:
        for t in threads:  # two delta rows a thread: more than folding lets stand
            one = checkpoint(t, 1)
            await store.append_checkpoint(
                one, expected_head=None, new_interrupts=[raised(n, one) for n in range(3)]
            )
            await store.append_checkpoint(
                checkpoint(t, 2), expected_head=one.id, resolutions=[resolved(f"{t}-0")]
            )
        expected = {"shell": len(threads), None: len(threads)}
        with psycopg.connect(dsn, autocommit=True) as conn:
            (before,) = conn.execute("SELECT count(*) FROM pending_count_deltas").fetchone()
            assert before > pg_sql.FOLD_DELTAS_AFTER
            assert await store.pending_counts() == expected  # and folds
            (after,) = conn.execute("SELECT count(*) FROM pending_count_deltas").fetchone()
            assert after <= len(TOOLS)
        assert await store.pending_counts() == expected


async def test_postgres_counts_agree_with_the_inbox_under_concurrent_appends(dsn: str) -> None:
    writers, rounds = 4, 40
    counted: list[dict[str | None, int]] = []
    async with PostgresStore(dsn) as store:

        async def write(w: int) -> None:
            for r in range(rounds):
                t = f"w{w}-{r}"
                one = checkpoint(t, 1)
                await store.append_checkpoint(
                    one, expected_head=None, new_interrupts=[raised(n, one) for n in range(4)]
                )
                if r % 2:
                    await store.append_checkpoint(
                        checkpoint(t, 2), expected_head=one.id, resolutions=[resolved(f"{t}-3")]
                    )
                else:
                    await store.delete_thread(t)

        async def count() -> None:
            for _ in range(rounds):
                counted.append(await store.pending_counts())

        async with anyio.create_task_group() as tg:
            for w in range(writers):
                tg.start_soon(write, w)
            tg.start_soon(count)
        listed: dict[str | None, int] = {}
        for i in await store.pending(limit=10_000):
            listed[i.tool] = listed.get(i.tool, 0) + 1
        assert await store.pending_counts() == listed
        assert sum(listed.values()) == writers * rounds // 2 * 3
    assert all(n >= 0 for c in counted for n in c.values())


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
