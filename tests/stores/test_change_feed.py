"""The change feed across connections: concurrent writers, a late commit, upgraded databases.

`interlock.testing.StoreConformance` checks the feed of each store on its own; these tests
follow it from another connection while writers on other OS threads (each with a store of
its own) commit, hold a PostgreSQL transaction open to commit out of sequence order, and open
databases written before the feed existed.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import anyio
import anyio.lowlevel
import anyio.to_thread
import psycopg
import pytest

from interlock import END, START, Graph, NodeError, append, approve
from interlock._errors import CheckpointCorrupt
from interlock.stores import (
    ChangeRecord,
    CheckpointRecord,
    CheckpointStatus,
    InterruptRecord,
    Resolution,
    SqliteStore,
    Store,
)
from interlock.stores import _postgres_ops as pg_ops
from interlock.stores import _postgres_schema as pg_schema
from interlock.stores import _sqlite_ops as sqlite_ops
from interlock.stores import _sqlite_schema as sqlite_schema
from interlock.stores._postgres import PostgresStore

pytestmark = pytest.mark.anyio

Seen = tuple[str, str, str, str | None]

WRITERS = 4
ROUNDS = 25


def checkpoint(thread: str, seq: int, status: CheckpointStatus = "interrupted") -> CheckpointRecord:
    return CheckpointRecord(
        thread=thread,
        id=f"{thread}.{seq}",
        parent_id=f"{thread}.{seq - 1}" if seq > 1 else None,
        seq=seq,
        step=seq - 2,
        base_seq=1,
        created_at=1000.0 + seq,
        source="loop",
        status=status,
        body=b"body",
    )


def raised(id: str, at: CheckpointRecord) -> InterruptRecord:
    return InterruptRecord(
        id=id,
        thread=at.thread,
        checkpoint_id=at.id,
        key=None,
        address=f"node:{id}",
        kind="dynamic",
        status="pending",
        created_at=at.created_at,
        deadline=None,
        body=b"?",
    )


def answer(id: str) -> Resolution:
    return Resolution(id=id, status="resolved", resolved_at=1.0, resolution=b"y")


def seen(changes: list[ChangeRecord]) -> list[Seen]:
    return [(c.kind, c.thread, c.checkpoint_id, c.interrupt_id) for c in changes]


async def write_rounds(store: Store, thread: str, committed: list[Seen]) -> None:
    """``ROUNDS`` appends to ``thread``, each answering the interrupt the one before raised."""
    for seq in range(1, ROUNDS + 1):
        last = seq == ROUNDS
        record = checkpoint(thread, seq, "done" if last else "interrupted")
        new = [] if last else [raised(f"{thread}.{seq}.ask", record)]
        earlier = [answer(f"{thread}.{seq - 1}.ask")] if seq > 1 else []
        await store.append_checkpoint(
            record,
            expected_head=record.parent_id,
            new_interrupts=new,
            resolutions=earlier,
        )
        committed += [("interrupt_resolved", thread, record.id, r.id) for r in earlier]
        committed += [("interrupt_created", thread, record.id, i.id) for i in new]
        if last:
            committed.append(("run_finished", thread, record.id, None))


async def follow_concurrent_writers(follower: Store, open_store: Callable[[], Store]) -> None:
    """Writers on ``WRITERS`` OS threads, each with its own store, while ``follower`` polls.

    The follower must see exactly the committed changes: none missing, none twice, each
    thread's in the order it committed them.
    """
    start = await follower.change_cursor()
    committed: dict[str, list[Seen]] = {f"w{n}": [] for n in range(WRITERS)}
    failures: list[BaseException] = []
    go = threading.Barrier(WRITERS)

    def writer(thread: str) -> None:
        async def main() -> None:
            store = open_store()
            try:
                go.wait()
                await write_rounds(store, thread, committed[thread])
            finally:
                await store.close()

        try:
            anyio.run(main)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(name,)) for name in committed]
    for t in threads:
        t.start()
    got: list[ChangeRecord] = []
    after = start
    total = WRITERS * (2 * ROUNDS - 1)
    polls = 0
    with anyio.fail_after(120):  # a lost change would keep the follower waiting for it
        while len(got) < total and not failures:
            page = await follower.changes(after=after, limit=7)
            polls += 1
            got += page
            if page:
                after = page[-1].cursor
            else:
                await anyio.lowlevel.checkpoint()
    for t in threads:
        await anyio.to_thread.run_sync(t.join)
    assert not failures, failures
    assert polls > 1  # the follower read while the writers were writing
    assert len({c.cursor for c in got}) == len(got) == total
    for thread, changes in committed.items():
        assert [s for s in seen(got) if s[1] == thread] == changes
    assert await follower.changes(after=after) == []
    assert await follower.changes(after=start, limit=total + 1) == got


async def test_sqlite_writers_on_other_threads_reach_a_follower_once_each(
    tmp_path: Path,
) -> None:
    path = tmp_path / "feed.db"
    async with SqliteStore(path, synchronous="NORMAL") as follower:
        await follow_concurrent_writers(follower, lambda: SqliteStore(path, synchronous="NORMAL"))


async def test_postgres_writers_on_other_threads_reach_a_follower_once_each(dsn: str) -> None:
    async with PostgresStore(dsn, max_size=2) as follower:
        await follow_concurrent_writers(follower, lambda: PostgresStore(dsn, max_size=1))


async def test_postgres_feed_waits_for_a_transaction_that_commits_out_of_order(
    dsn: str,
) -> None:
    """A transaction takes its change's seq, and commits after a later seq is visible.

    Ordered by seq alone, a follower would read the later change, move past it and never see
    the earlier one. The feed holds both back until the older transaction ends.
    """
    async with PostgresStore(dsn) as store:
        before = await store.change_cursor()
        slow = checkpoint("slow", 1)
        fast = checkpoint("fast", 1)
        with psycopg.connect(dsn) as side:  # not autocommit: the append stays uncommitted
            pg_ops.append(side, slow, None, [raised("s", slow)], [], None, [], 1.0)
            now = await store.change_cursor()
            await store.append_checkpoint(
                fast, expected_head=None, new_interrupts=[raised("f", fast)]
            )
            rows = side.execute("SELECT interrupt_id, seq FROM changes").fetchall()
            seqs: dict[str, int] = dict(rows)
            assert seqs["s"] < seqs["f"]  # seq order is not commit order here
            # The fast change is committed, but an older transaction is still open.
            assert await store.changes(after=before) == []
            assert await store.changes(after=now) == []
            side.commit()
        both = await store.changes(after=before)
        assert seen(both) == [
            ("interrupt_created", "slow", slow.id, "s"),
            ("interrupt_created", "fast", fast.id, "f"),
        ]
        # Taken while the slow transaction ran: both reached the feed after it.
        assert await store.changes(after=now) == both
        # A transaction that rolls back holds the feed while it runs, and adds nothing.
        later = checkpoint("fast", 2, "done")
        with psycopg.connect(dsn) as side:
            gone = checkpoint("gone", 1)
            pg_ops.append(side, gone, None, [raised("g", gone)], [], None, [], 1.0)
            await store.append_checkpoint(later, expected_head=fast.id, resolutions=[answer("f")])
            assert await store.changes(after=both[-1].cursor) == []
            side.rollback()
        assert seen(await store.changes(after=both[-1].cursor)) == [
            ("interrupt_resolved", "fast", later.id, "f"),
            ("run_finished", "fast", later.id, None),
        ]


async def test_a_sqlite_file_of_version_4_gets_the_feed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "v4.db"
    one = checkpoint("t", 1)
    with monkeypatch.context() as old:
        # What version 4 wrote: its schema, and no feed.
        old.setattr(sqlite_schema, "MIGRATIONS", sqlite_schema.MIGRATIONS[:4])
        old.setattr(sqlite_schema, "SCHEMA_VERSION", 4)
        old.setattr(sqlite_ops, "derive", lambda *args: [])
        async with SqliteStore(path) as store:
            await store.append_checkpoint(
                one, expected_head=None, new_interrupts=[raised("a", one)]
            )
    async with SqliteStore(path) as store:
        assert await store.changes() == []
        start = await store.change_cursor()
        two = checkpoint("t", 2, "done")
        await store.append_checkpoint(two, expected_head=one.id, resolutions=[answer("a")])
        expected = [("interrupt_resolved", "t", two.id, "a"), ("run_finished", "t", two.id, None)]
        assert seen(await store.changes(after=start)) == expected
        assert seen(await store.changes()) == expected


async def test_a_postgres_database_of_version_5_gets_the_feed(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = checkpoint("t", 1)
    with monkeypatch.context() as old:
        old.setattr(pg_schema, "MIGRATIONS", pg_schema.MIGRATIONS[:5])
        old.setattr(pg_schema, "SCHEMA_VERSION", 5)
        async with PostgresStore(dsn) as store:
            await store.append_checkpoint(
                one, expected_head=None, new_interrupts=[raised("a", one)]
            )
    async with PostgresStore(dsn) as store:
        assert await store.migrate() == []  # opening applied version 6
        assert await store.changes() == []
        two = checkpoint("t", 2, "done")
        await store.append_checkpoint(two, expected_head=one.id, resolutions=[answer("a")])
        expected = [("interrupt_resolved", "t", two.id, "a"), ("run_finished", "t", two.id, None)]
        assert seen(await store.changes()) == expected


class S(TypedDict, total=False):
    log: Annotated[list[str], append]
    ok: bool


async def test_runs_and_resumes_reach_the_feed(store: Store) -> None:
    g = Graph(S)
    g.add_node("ask", lambda s: {"ok": approve("pay?"), "log": ["asked"]})
    g.add_node("pay", lambda s: {"log": ["paid"]})
    g.add_edge(START, "ask")
    g.add_conditional_edges("ask", lambda s: "pay" if s["ok"] else END)
    app = g.compile(store=store)
    run = await app.run({}, thread="t")
    (asked,) = await store.changes()
    assert (asked.kind, asked.thread, asked.interrupt_id) == (
        "interrupt_created",
        "t",
        run.interrupt().id,
    )
    assert asked.checkpoint_id == run.checkpoint_id
    done = await app.resume("t", {run.interrupt().id: True})
    resolved, finished = await store.changes(after=asked.cursor)
    assert (resolved.kind, resolved.interrupt_id) == ("interrupt_resolved", run.interrupt().id)
    assert (finished.kind, finished.interrupt_id, finished.checkpoint_id) == (
        "run_finished",
        None,
        done.checkpoint_id,
    )

    def broken(s: S) -> dict[str, Any]:
        raise RuntimeError("upstream timeout")

    failing = Graph(S)
    failing.add_node("broken", broken).add_edge(START, "broken")
    with pytest.raises(NodeError):
        await failing.compile(store=store).run({}, thread="f")
    (failed,) = await store.changes(after=finished.cursor)
    assert (failed.kind, failed.thread) == ("run_failed", "f")


@pytest.mark.parametrize(
    "edit",
    ["UPDATE changes SET thread = 'other'", "UPDATE changes SET kind = 'run_paused'"],
)
async def test_a_damaged_sqlite_change_row_is_reported(tmp_path: Path, edit: str) -> None:
    path = tmp_path / "s.db"
    async with SqliteStore(path) as store:
        await store.append_checkpoint(checkpoint("t", 1, "done"), expected_head=None)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(edit)
    finally:
        conn.close()
    async with SqliteStore(path) as store:
        with pytest.raises(CheckpointCorrupt, match="change feed"):
            await store.changes()


async def test_a_damaged_postgres_change_row_is_reported(dsn: str) -> None:
    async with PostgresStore(dsn) as store:
        await store.append_checkpoint(checkpoint("t", 1, "failed"), expected_head=None)
        assert [c.kind for c in await store.changes()] == ["run_failed"]
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("UPDATE changes SET checkpoint_id = 'other'")
        with pytest.raises(CheckpointCorrupt, match="change feed"):
            await store.changes()
