from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from interlock._errors import (
    CheckpointCorrupt,
    FencedOut,
    InterruptAlreadyResolved,
    StoreError,
    ThreadBusy,
    UnknownInterrupt,
)
from interlock.stores import (
    AuditEntry,
    CheckpointRecord,
    Fence,
    InterruptRecord,
    MemoryStore,
    PendingFilter,
    Resolution,
    SqliteStore,
    Store,
    verify_audit,
)
from interlock.stores import _sqlite_schema as schema
from interlock.stores import _sqlite_sql as sql
from interlock.stores._rows import (
    CHECKPOINT_COLUMNS,
    checkpoint_digest,
    checkpoint_values,
    digest,
)
from interlock.stores._sqlite_ops import KNOWN_HEADS_MAX
from interlock.testing import FakeClock, StoreConformance

pytestmark = pytest.mark.anyio


class TestSqliteStore(StoreConformance):
    @pytest.fixture
    async def store(self, tmp_path: Path, clock: FakeClock) -> AsyncIterator[SqliteStore]:
        async with SqliteStore(tmp_path / "store.db", clock=clock) as store:
            yield store


def checkpoint(thread: str, seq: int, body: bytes = b"body") -> CheckpointRecord:
    return CheckpointRecord(
        thread=thread,
        id=f"{thread}.{seq}",
        parent_id=f"{thread}.{seq - 1}" if seq > 1 else None,
        seq=seq,
        step=seq - 2,
        base_seq=1,
        created_at=1000.0 + seq,
        source="loop",
        status="ready",
        body=body,
    )


def interrupt(id: str, at: CheckpointRecord, key: str | None = None) -> InterruptRecord:
    return InterruptRecord(
        id=id,
        thread=at.thread,
        checkpoint_id=at.id,
        key=key,
        address=f"node:{id}",
        kind="dynamic",
        status="pending",
        created_at=at.created_at,
        deadline=None,
        body=b"i",
    )


async def grow(store: SqliteStore, thread: str, n: int, body: bytes = b"body") -> None:
    for seq in range(1, n + 1):
        head = None if seq == 1 else f"{thread}.{seq - 1}"
        await store.append_checkpoint(checkpoint(thread, seq, body), expected_head=head)


@contextlib.contextmanager
def side_connection(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection beside the store's, closed afterwards."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


@pytest.mark.parametrize(("synchronous", "level"), [("FULL", 2), ("NORMAL", 1), ("OFF", 0)])
async def test_file_is_wal_with_the_requested_sync(
    tmp_path: Path, synchronous: str, level: int
) -> None:
    async with SqliteStore(tmp_path / "s.db", synchronous=synchronous) as store:  # type: ignore[arg-type]
        pragmas = await store._run(
            lambda c: (
                c.execute("PRAGMA journal_mode").fetchone()[0],
                c.execute("PRAGMA synchronous").fetchone()[0],
            )
        )
    assert pragmas == ("wal", level)


async def test_default_is_full_sync(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "s.db") as store:
        assert await store._run(lambda c: c.execute("PRAGMA synchronous").fetchone()[0]) == 2


async def test_schema_version_and_owner_are_recorded(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteStore(path) as store:
        await grow(store, "t", 1)
    with side_connection(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION == 8
        assert conn.execute("PRAGMA application_id").fetchone()[0] == schema.APPLICATION_ID
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        # migrate() is a no-op on a current database and reports the version it found.
        assert schema.migrate(conn) == 8


async def test_a_version_1_file_is_migrated_in_place(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        for statement in schema.MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
        conn.execute("PRAGMA user_version = 1")
        # A thread written by version 1, before leases existed.
        conn.execute("INSERT INTO threads VALUES ('old', 'c1', 1, 'done', 1.0)")
    finally:
        conn.close()
    async with SqliteStore(path) as store:
        await grow(store, "t", 2)
        assert await store.request_pause("t", kind="planned")
        assert await store.take_pause_request("t") == "planned"
        # ... and its row got its digests: it reads back whole.
        old = await store.get_thread("old")
        assert old is not None and (old.head_id, old.status) == ("c1", "done")
    with side_connection(path) as side:
        assert side.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        # Rows written before the migration get a free lease.
        lease = side.execute(
            "SELECT lease_owner, lease_token, lease_expires FROM threads WHERE thread = 'old'"
        ).fetchone()
        assert tuple(lease) == (None, 0, 0)


async def test_reopened_store_sees_everything(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteStore(path) as store:
        await grow(store, "t", 3)
        head = await store.get_checkpoint("t")
        assert head is not None
        second = checkpoint("u", 1)
        await store.append_checkpoint(
            second, expected_head=None, new_interrupts=[interrupt("i", second, key="k")]
        )
        before = (
            await store.get_thread("t"),
            await store.checkpoint_range("t", lo=1, hi=9),
            await store.pending(),
        )
    async with SqliteStore(path) as reopened:
        after = (
            await reopened.get_thread("t"),
            await reopened.checkpoint_range("t", lo=1, hi=9),
            await reopened.pending(),
        )
        assert after == before
        assert [i.id for i in await reopened.pending(PendingFilter(key="k"))] == ["i"]
        await reopened.append_checkpoint(checkpoint("t", 4), expected_head=head.id)


async def test_file_and_directory_are_created_on_first_use(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "app.db"
    store = SqliteStore(path)
    assert repr(store) == f"<SqliteStore {str(path)!r} unopened>"
    assert not path.parent.exists()
    assert await store.get_thread("t") is None
    assert path.exists()
    assert repr(store) == f"<SqliteStore {str(path)!r} open>"
    await store.close()
    assert repr(store) == f"<SqliteStore {str(path)!r} closed>"


async def test_close_folds_the_wal_into_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    wal = anyio.Path(f"{path}-wal")
    store = SqliteStore(path)
    await grow(store, "t", 200, body=os.urandom(500))
    assert await wal.exists()
    await store.close()
    assert not await wal.exists()
    assert not await anyio.Path(f"{path}-shm").exists()
    # About 100 kB of bodies: the file holds them with modest overhead (an empty store is
    # about 140 kB already: a 4 kB page for each of its tables and indexes).
    assert 100_000 < (await anyio.Path(path).stat()).st_size < 275_000
    with side_connection(path) as conn:
        assert conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0] == 200


@pytest.mark.parametrize(
    ("query", "params", "index"),
    [
        (sql.PENDING_ALL, (10,), "interrupts_pending"),
        (sql.PENDING_BY_THREAD, ("t", 10), "interrupts_thread"),
        (sql.PENDING_BY_KEY, ("k", 10), "interrupts_pending_key"),
        (sql.PENDING_BY_THREAD_AND_KEY, ("t", "k", 10), "interrupts_thread"),
        (sql.PENDING_IDS_OF_THREAD, ("t",), "interrupts_thread"),
    ],
)
async def test_pending_queries_read_an_index_in_order(
    tmp_path: Path, query: str, params: tuple[object, ...], index: str
) -> None:
    async with SqliteStore(tmp_path / "s.db") as store:
        await grow(store, "t", 1)
    with side_connection(tmp_path / "s.db") as conn:
        plan = " | ".join(row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {query}", params))
    assert f"USING INDEX {index}" in plan
    assert "TEMP B-TREE" not in plan  # no sort: rows come out of the index oldest first


async def test_inbox_cost_does_not_grow_with_resolved_interrupts(tmp_path: Path) -> None:
    path = tmp_path / "s.db"

    def vm_steps(conn: sqlite3.Connection, query: str, params: tuple[object, ...]) -> int:
        count = 0

        def tick() -> int:
            nonlocal count
            count += 1
            return 0

        conn.set_progress_handler(tick, 1)
        try:
            conn.execute(query, params).fetchall()
        finally:
            conn.set_progress_handler(None, 1)
        return count

    def cost() -> list[int]:
        with side_connection(path) as conn:
            return [
                vm_steps(conn, sql.PENDING_ALL, (100,)),
                vm_steps(conn, sql.PENDING_BY_THREAD, ("t", 100)),
                vm_steps(conn, sql.PENDING_BY_KEY, ("k", 100)),
            ]

    async with SqliteStore(path, synchronous="OFF") as store:
        first = checkpoint("t", 1)
        few = [interrupt(f"live{n}", first, key="k") for n in range(5)]
        await store.append_checkpoint(first, expected_head=None, new_interrupts=few)
        small = cost()
        second = checkpoint("t", 2)
        crowd = [interrupt(f"old{n}", second, key="k") for n in range(2000)]
        await store.append_checkpoint(second, expected_head=first.id, new_interrupts=crowd)
        await store.append_checkpoint(
            checkpoint("t", 3),
            expected_head=second.id,
            resolutions=[
                Resolution(id=i.id, status="resolved", resolved_at=2.0, resolution=None)
                for i in crowd
            ],
        )
        assert await store.pending() == few
        after = cost()
    # 2,000 resolved interrupts of the same thread and key cost the inbox (almost) nothing.
    assert all(a <= s * 1.2 for a, s in zip(after, small, strict=True)), (after, small)


async def test_corrupt_file_gives_a_clear_store_error(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    path.write_bytes(b"this is not a database, just some text " * 200)
    store = SqliteStore(path)
    with pytest.raises(StoreError, match="is not a SQLite database or is corrupted") as caught:
        await store.get_thread("t")
    assert isinstance(caught.value.__cause__, sqlite3.DatabaseError)
    assert str(path) in str(caught.value)
    await store.close()
    assert path.read_bytes().startswith(b"this is not a database")


async def test_another_applications_database_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with side_connection(path) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    store = SqliteStore(path)
    with pytest.raises(StoreError, match="another application"):
        await store.get_thread("t")
    await store.close()
    with side_connection(path) as conn:
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master")]
        assert tables == ["users"]
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 0


async def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteStore(path) as store:
        await grow(store, "t", 1)
    with side_connection(path) as conn:
        conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 1}")
    store = SqliteStore(path)
    with pytest.raises(StoreError, match="newer interlock"):
        await store.get_checkpoint("t")
    await store.close()


async def test_long_lock_gives_store_error_then_store_recovers(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteStore(path, busy_timeout=0.2) as store:
        await grow(store, "t", 1)
        with side_connection(path) as blocker:
            blocker.execute("BEGIN IMMEDIATE")
            with pytest.raises(StoreError, match="stayed locked") as caught:
                await store.append_checkpoint(checkpoint("t", 2), expected_head="t.1")
            assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
            assert "busy_timeout" in str(caught.value)
            blocker.execute("COMMIT")
        await store.append_checkpoint(checkpoint("t", 2), expected_head="t.1")
        assert (await store.get_checkpoint("t")) == checkpoint("t", 2)


async def test_waiting_for_the_lock_does_not_block_the_event_loop(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteStore(path, busy_timeout=30) as store:
        await grow(store, "t", 1)

        async def append(record: CheckpointRecord, head: str) -> None:
            await store.append_checkpoint(record, expected_head=head)

        with side_connection(path) as blocker:
            blocker.execute("BEGIN IMMEDIATE")
            async with anyio.create_task_group() as tg:
                tg.start_soon(append, checkpoint("t", 2), "t.1")
                # Runs only if the append waits off the event loop; otherwise the append
                # waits 30 s for a lock this task would release.
                await anyio.wait_all_tasks_blocked()
                blocker.execute("COMMIT")
        assert (await store.get_checkpoint("t")) == checkpoint("t", 2)


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="synchronous"):
        SqliteStore(tmp_path / "s.db", synchronous="EXTRA")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="busy_timeout"):
        SqliteStore(tmp_path / "s.db", busy_timeout=-1)


# SqliteStore against MemoryStore on random operation sequences: same outcomes, same state.

THREADS = ("a", "b", "c")
step = st.tuples(
    st.sampled_from(["append"] * 5 + ["delete"]),
    st.sampled_from(THREADS),
    st.sampled_from(["head"] * 7 + ["first", "none", "bogus"]),
    st.sampled_from([0] * 9 + [1, -1]),  # seq off by
    st.lists(st.sampled_from(["k1", "k2", None]), max_size=3),  # keys of new interrupts
    st.lists(  # resolutions: which of the interrupt ids so far (or one more: an unknown id)
        st.tuples(st.integers(0, 999), st.sampled_from(["resolved", "expired", "cancelled"])),
        max_size=2,
    ),
)


def outcome(exc: BaseException | None) -> object:
    if isinstance(exc, UnknownInterrupt):
        return ("unknown", exc.target, exc.pending, exc.thread)
    if isinstance(exc, InterruptAlreadyResolved):
        return ("already", exc.interrupt_id, exc.status)
    if isinstance(exc, ThreadBusy):
        return ("busy", exc.thread)
    return None if exc is None else type(exc)


async def everything(store: Store) -> object:
    seen = []
    for t in THREADS:
        seen += [await store.get_thread(t), await store.checkpoint_range(t, lo=1, hi=999)]
        seen += [await store.list_checkpoints(t, limit=3), await store.get_checkpoint(t)]
        seen.append(await store.checkpoints_at(t, [5, 1, 3, 3, 40, 0]))
        for key in ("k1", "k2", None):
            seen.append(await store.pending(PendingFilter(thread=t, key=key)))
    seen += [await store.pending(PendingFilter(key="k1"), limit=2), await store.pending()]
    seen.append(await store.changes(limit=10**6))  # the same changes, at the same cursors
    return seen


@settings(max_examples=80, deadline=None)
@given(steps=st.lists(step, min_size=5, max_size=40))
def test_sqlite_store_behaves_like_memory_store(steps: list[tuple[Any, ...]]) -> None:
    async def run(path: Path) -> None:
        model = MemoryStore()
        async with SqliteStore(path, synchronous="OFF") as real:
            interrupt_ids: dict[str, list[str]] = {t: [] for t in THREADS}
            for n, (op, thread, head_mode, off_by, keys, picks) in enumerate(steps):
                head = await model.get_thread(thread)
                if op == "delete":
                    await model.delete_thread(thread)
                    await real.delete_thread(thread)
                    continue
                first = await model.checkpoint_range(thread, lo=1, hi=1)
                expected = {
                    "head": head.head_id if head else None,
                    "first": first[0].id if first else None,
                    "none": None,
                    "bogus": "bogus",
                }[head_mode]
                record = checkpoint_record(thread, n, (head.head_seq if head else 0) + 1 + off_by)
                new = [
                    replace(interrupt(f"i{n}.{k}", record, key), created_at=float(n % 3))
                    for k, key in enumerate(keys)
                ]
                # Mostly this thread's interrupts, sometimes another's or an unknown id.
                others = [i for ids in interrupt_ids.values() for i in ids]
                pool = [*interrupt_ids[thread] * 10, *others, "ghost"]
                resolutions = [
                    Resolution(
                        id=pool[i % len(pool)],
                        status=status,
                        resolved_at=float(n),
                        resolution=f"r{n}".encode(),
                    )
                    for i, status in picks
                ]
                results = []
                for store in (model, real):
                    try:
                        await store.append_checkpoint(
                            record,
                            expected_head=expected,
                            new_interrupts=new,
                            resolutions=resolutions,
                        )
                    except (ThreadBusy, InterruptAlreadyResolved, UnknownInterrupt) as exc:
                        results.append(outcome(exc))
                    else:
                        results.append(outcome(None))
                assert results[0] == results[1], (record, expected, resolutions)
                interrupt_ids[thread] += [i.id for i in new]
            assert await everything(real) == await everything(model)

    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(run, Path(tmp) / "s.db")


def checkpoint_record(thread: str, n: int, seq: int) -> CheckpointRecord:
    return replace(checkpoint(thread, seq), id=f"{thread}.{n}", parent_id=None, created_at=n)


TAMPERING = {
    "edited data": ["UPDATE audit SET data = '{\"approved\": false}' WHERE seq = 2"],
    "edited actor": ["UPDATE audit SET actor = 'mallory' WHERE seq = 2"],
    "removed entry": ["DELETE FROM audit WHERE seq = 2"],
    "rehashed entry": [
        "UPDATE audit SET data = '{}' WHERE seq = 2",
        "UPDATE audit SET hash = zeroblob(32) WHERE seq = 2",
    ],
    "inserted entry": [
        "UPDATE audit SET seq = seq + 100 WHERE seq >= 2",
        "UPDATE audit SET seq = seq - 99 WHERE seq >= 100",
        "INSERT INTO audit SELECT thread, 2, at, kind, actor, data, prev, hash FROM audit "
        "WHERE seq = 1",
    ],
}


@pytest.mark.parametrize("edit", list(TAMPERING))
async def test_any_edited_audit_row_is_detected(tmp_path: Path, edit: str) -> None:
    path = tmp_path / "s.db"
    async with SqliteStore(path) as store:
        await grow(store, "t", 1)
        for n in range(4):
            entry = AuditEntry(kind="decision", actor="ann", data=f'{{"n": {n}}}'.encode())
            await store.begin_effect("t", f"k{n}", name="x", fence=None, audit=[entry])
        assert (await verify_audit(store)).ok
    with side_connection(path) as conn:
        for statement in TAMPERING[edit]:
            conn.execute(statement)
    async with SqliteStore(path) as store:
        report = await verify_audit(store)
    assert not report.ok
    assert {p.thread for p in report.problems} == {"t"}
    assert min(p.seq for p in report.problems) in (2, 3)


async def test_a_lazy_append_skips_the_fsync_and_the_next_write_has_it_again(
    tmp_path: Path,
) -> None:
    async with SqliteStore(tmp_path / "s.db") as store:
        seen: list[int] = []

        def level(c: sqlite3.Connection) -> int:
            return int(c.execute("PRAGMA synchronous").fetchone()[0])

        first = CheckpointRecord(
            thread="t", id="c1", parent_id=None, seq=1, step=0, base_seq=1, created_at=1.0,
            source="input", status="ready", body=b"x",
        )  # fmt: skip
        await store.append_checkpoint(first, expected_head=None, durable=False)
        seen.append(await store._run(level, synchronous="NORMAL"))
        seen.append(await store._run(level))  # any other call runs at the configured level
        assert seen == [1, 2]
        assert (await store.get_checkpoint("t")) == first


def test_every_statement_uses_placeholders_each_python_accepts() -> None:
    # Python 3.12 deprecates numbered placeholders (?1) bound from a sequence, and the tests
    # run with warnings as errors. (A trace callback would show the statements with their
    # values bound, so look at the statements themselves.)
    modules = [vars(schema).values(), vars(sql).values()]
    statements = [
        value
        for values in modules
        for value in values
        if isinstance(value, str) and re.search(r"\b(SELECT|INSERT|UPDATE|DELETE)\b", value)
    ]
    statements += [
        s for values in modules for value in values if isinstance(value, tuple) for s in value
    ]
    every = PendingFilter(thread="t", key="k", tool="tool", older_than=2.0, deadline_before=1.0)
    statements += [
        sql.pending_query(every, 5, "a")[0],
        sql.pending_query(PendingFilter(), 5, None)[0],
    ]
    assert any("pause_requests" in s for s in statements)
    numbered = [s for s in statements if isinstance(s, str) and re.search(r"\?\d", s)]
    assert numbered == []


def remove_log(path: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink()


async def test_a_removed_write_ahead_log_is_named_as_the_cause(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteStore(path) as running:
        await grow(running, "t", 2)
        remove_log(path)
        other = SqliteStore(path)
        with pytest.raises(StoreError, match=r"write-ahead log .* was removed") as caught:
            await other.get_thread("t")
        assert "-shm" in str(caught.value)
        assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
        await other.close()


def statements_of(store: SqliteStore) -> list[str]:
    """Record the statements the store's connection runs from now on (open stores only)."""
    seen: list[str] = []
    assert store._conn is not None
    store._conn.set_trace_callback(seen.append)
    return seen


async def test_an_append_after_an_append_does_not_read_the_thread_row(tmp_path: Path) -> None:
    # The row is known as this store committed it; the head moves by a compare-and-set on
    # every column of it, and nothing reads it first.
    async with SqliteStore(tmp_path / "s.db") as store:
        await grow(store, "t", 2)
        seen = statements_of(store)
        await store.append_checkpoint(checkpoint("t", 3), expected_head="t.2")
        assert not any(s.startswith("SELECT") for s in seen)
        assert (await store.get_thread("t")) is not None
        assert (await store.get_checkpoint("t")) == checkpoint("t", 3)


async def test_a_known_row_moved_by_another_process_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    lease = Fence(owner="a", token=None, ttl=60.0)
    async with SqliteStore(path) as one, SqliteStore(path) as two:
        await one.append_checkpoint(checkpoint("t", 1), expected_head=None, fence=lease)
        token = await one.append_checkpoint(
            checkpoint("t", 2), expected_head="t.1", fence=replace(lease, token=1, release=True)
        )
        assert token == 1
        # Another store moves the head, taking the lease over (token 2) and letting it go.
        taken = await two.append_checkpoint(
            checkpoint("t", 3), expected_head="t.2", fence=replace(lease, release=True)
        )
        assert taken == 2
        # What the first store knows is stale: it must answer as a fresh read would.
        with pytest.raises(ThreadBusy, match=r"expected head 't\.2', found 't\.3'"):
            await one.append_checkpoint(checkpoint("t", 3), expected_head="t.2")
        with pytest.raises(FencedOut):
            await one.append_checkpoint(
                checkpoint("t", 4), expected_head="t.3", fence=replace(lease, token=1)
            )
        # The other store takes the lease and keeps it: the first one is refused.
        await two.append_checkpoint(checkpoint("t", 4), expected_head="t.3", fence=lease)
        with pytest.raises(ThreadBusy, match="lease"):
            await one.append_checkpoint(checkpoint("t", 5), expected_head="t.4", fence=lease)
        await two.append_checkpoint(
            checkpoint("t", 5), expected_head="t.4", fence=replace(lease, token=3, release=True)
        )
        await one.append_checkpoint(checkpoint("t", 6), expected_head="t.5")
        assert (await two.get_checkpoint("t")) == checkpoint("t", 6)
        assert (await one.get_thread("t")) == (await two.get_thread("t"))


async def test_a_known_row_whose_lease_a_renewal_moved_is_still_written_without_a_read(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    async with SqliteStore(tmp_path / "s.db", clock=clock) as store:
        lease = Fence(owner="a", token=None, ttl=60.0)
        token = await store.append_checkpoint(checkpoint("t", 1), expected_head=None, fence=lease)
        held = replace(lease, token=token)
        clock.advance(30)
        await store.renew_lease("t", held)
        seen = statements_of(store)
        clock.advance(40)  # 70 s after the lease was taken: live only thanks to the renewal
        await store.append_checkpoint(checkpoint("t", 2), expected_head="t.1", fence=held)
        assert [s for s in seen if s.startswith("SELECT")] == []
        with pytest.raises(ThreadBusy, match="lease"):
            await store.append_checkpoint(checkpoint("t", 3), expected_head="t.2")
        clock.advance(61)
        await store.append_checkpoint(checkpoint("t", 3), expected_head="t.2")


@pytest.mark.parametrize("column", ["digest", "lease_digest", "status", "lease_token"])
async def test_a_known_row_damaged_on_disk_is_refused_as_a_read_refuses_it(
    tmp_path: Path, column: str
) -> None:
    path = tmp_path / "s.db"
    async with SqliteStore(path) as store:
        await grow(store, "t", 2)
        value = {"status": "'done'", "lease_token": "7"}.get(column, "x'00'")
        with side_connection(path) as side:
            side.execute(f"UPDATE threads SET {column} = {value} WHERE thread = 't'")
        for _ in range(2):  # once with the row known, once with it forgotten: the same
            with pytest.raises(CheckpointCorrupt, match="does not match its digest"):
                await store.append_checkpoint(checkpoint("t", 3), expected_head="t.2")


async def test_known_rows_are_bounded(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "s.db", synchronous="OFF") as store:
        for n in range(KNOWN_HEADS_MAX + 10):
            await store.append_checkpoint(checkpoint(f"t{n}", 1), expected_head=None)
        assert len(store._known._rows) == KNOWN_HEADS_MAX
        assert "t0" not in store._known._rows
        # A thread that was forgotten is read again, and written all the same.
        await store.append_checkpoint(checkpoint("t0", 2), expected_head="t0.1")
        assert (await store.get_checkpoint("t0")) == checkpoint("t0", 2)


async def test_blobs_read_back_as_bytes_whatever_their_size(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "s.db") as store:
        small, large = checkpoint("s", 1, b"s" * 10), checkpoint("l", 1, b"l" * 100_000)
        for record in (small, large):
            await store.append_checkpoint(record, expected_head=None)
            found = await store.get_checkpoint(record.thread)
            assert found == record
            assert found is not None and type(found.body) is bytes


@pytest.mark.parametrize("written", ["summed", "before"])
async def test_a_checkpoint_body_is_checked_by_its_digest_in_either_form(
    tmp_path: Path, written: str
) -> None:
    # A row's digest covers its body as its length and CRC-32; a row written before digests
    # the body itself. Both read, one at a time and as a range, and a flipped byte of the
    # body fails both.
    path = tmp_path / "s.db"
    async with SqliteStore(path) as store:
        await grow(store, "t", 3, body=b"x" * 5000)
        stored = await store.checkpoint_range("t", lo=1, hi=3)
    with side_connection(path) as side:
        if written == "before":
            for row in side.execute(f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints").fetchall():
                side.execute(
                    "UPDATE checkpoints SET digest = ? WHERE id = ?", (digest(*row[:10]), row[2])
                )
        (summed,) = side.execute("SELECT digest FROM checkpoints WHERE seq = 2").fetchone()
        assert (summed == checkpoint_digest(checkpoint_values(stored[1]))) is (written == "summed")
    async with SqliteStore(path) as store:
        assert await store.checkpoint_range("t", lo=1, hi=3) == stored
        assert await store.get_checkpoint("t", stored[1].id) == stored[1]
    with side_connection(path) as side:
        damaged = b"x" * 2000 + b"y" + b"x" * 2999  # same length, one byte changed
        side.execute("UPDATE checkpoints SET body = ? WHERE seq = 2", (damaged,))
    async with SqliteStore(path) as store:
        with pytest.raises(CheckpointCorrupt, match="does not match its digest"):
            await store.checkpoint_range("t", lo=1, hi=3)
        with pytest.raises(CheckpointCorrupt, match="does not match its digest"):
            await store.get_checkpoint("t", stored[1].id)
