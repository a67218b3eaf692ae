"""SqliteStore's group commit: appends queued while a transaction is in flight commit together.

Each append of a group must still be all-or-nothing and checked on its own (head, lease,
resolutions), a failing one must not fail or lose the others, and nobody is told "committed"
before the group's ``COMMIT`` returned. The crash side (SIGKILL mid-group) is in
``tests/system/test_group_commit_crashes.py``.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from interlock import SqliteStore, StoreError, ThreadBusy, UnknownInterrupt
from interlock.stores import _sqlite_ops as ops
from interlock.testing._conformance._common import (
    EVERYTHING,
    make_checkpoint,
    make_interrupt,
    resolve,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def groups(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every group the stores commit during the test."""
    sizes: list[int] = []
    real = ops.commit_group

    def counted(conn: sqlite3.Connection, group: Any) -> None:
        sizes.append(len(group))
        real(conn, group)

    monkeypatch.setattr(ops, "commit_group", counted)
    return sizes


async def test_concurrent_appends_share_transactions(
    tmp_path: Path, sqlite_files: Callable[[Path], SqliteStore], groups: list[int]
) -> None:
    store = sqlite_files(tmp_path / "g.db")
    await store.open()
    tasks, each = 32, 8

    async def chain(t: int) -> None:
        thread, parent = f"t{t}", None
        for seq in range(1, each + 1):
            record = make_checkpoint(thread, seq)
            await store.append_checkpoint(record, expected_head=parent)
            parent = record.id

    async with anyio.create_task_group() as tg:
        for t in range(tasks):
            tg.start_soon(chain, t)
    assert sum(groups) == tasks * each
    assert max(groups) > 1, f"no two appends shared a transaction: {groups}"
    assert len(groups) < tasks * each
    for t in range(tasks):
        read = await store.checkpoint_range(f"t{t}", lo=1, hi=EVERYTHING)
        assert [c.seq for c in read] == list(range(1, each + 1))
        head = await store.get_thread(f"t{t}")
        assert head is not None and head.head_id == read[-1].id


async def _as_one_group(
    store: SqliteStore, calls: list[Callable[[], Any]]
) -> list[BaseException | None]:
    """Run ``calls`` (appends) so that they all wait for the connection, then commit as one
    group in this order: the store's lock is held by another thread until all are queued."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store._lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    outcomes: list[BaseException | None] = [None] * len(calls)

    async def call(i: int) -> None:
        try:
            await calls[i]()
        except Exception as exc:
            outcomes[i] = exc

    try:
        async with anyio.create_task_group() as tg:
            for i in range(len(calls)):  # one at a time, so that they queue in this order
                tg.start_soon(call, i)
                with anyio.fail_after(10):
                    while len(store._waiting) <= i:  # noqa: ASYNC110 - another thread's queue
                        await anyio.sleep(0.001)
            release.set()
    finally:
        release.set()
        holder.join()
    return outcomes


async def test_a_failing_append_fails_alone_in_its_group(
    tmp_path: Path, sqlite_files: Callable[[Path], SqliteStore], groups: list[int]
) -> None:
    store = sqlite_files(tmp_path / "g.db")
    firsts = {}
    for t in ("ok1", "stale", "unknown", "dup", "ok2"):
        first = make_checkpoint(t, 1)
        await store.append_checkpoint(
            first, expected_head=None, new_interrupts=[make_interrupt(f"{t}-i", first)]
        )
        firsts[t] = first
    groups.clear()

    def second(t: str, **changes: Any) -> Callable[[], Any]:
        record = make_checkpoint(t, 2, id=changes.pop("id", None))
        args: dict[str, Any] = {
            "expected_head": firsts[t].id,
            "new_interrupts": [make_interrupt(f"{t}-j", record)],
            "resolutions": [resolve(f"{t}-i")],
            **changes,
        }
        return lambda: store.append_checkpoint(record, **args)

    outcomes = await _as_one_group(
        store,
        [
            second("ok1"),
            second("stale", expected_head="stale.0000"),  # not the head: ThreadBusy
            second("unknown", resolutions=[resolve("no-such")]),  # UnknownInterrupt
            second("dup", id="ok1.0002"),  # a checkpoint id taken (by ok1 in this group)
            second("ok2"),
        ],
    )
    assert groups == [5], "the five appends did not commit as one group"
    ok1, stale, unknown, dup, ok2 = outcomes
    assert ok1 is None and ok2 is None
    assert isinstance(stale, ThreadBusy)
    assert isinstance(unknown, UnknownInterrupt)
    assert list(unknown.pending) == ["unknown-i"]  # read after its own rollback, not half-written
    assert isinstance(dup, StoreError) and "unique" in str(dup)
    for t in ("ok1", "ok2"):  # every row of a write that went through
        head = await store.get_thread(t)
        assert head is not None and head.head_seq == 2
        assert (await store.get_interrupt(f"{t}-i")).status == "resolved"  # type: ignore[union-attr]
        assert (await store.get_interrupt(f"{t}-j")).status == "pending"  # type: ignore[union-attr]
    for t in ("stale", "unknown", "dup"):  # no row of a write that failed
        head = await store.get_thread(t)
        assert head is not None and head.head_id == firsts[t].id
        assert [c.seq for c in await store.checkpoint_range(t, lo=1, hi=EVERYTHING)] == [1]
        assert (await store.get_interrupt(f"{t}-i")).status == "pending"  # type: ignore[union-attr]
        assert await store.get_interrupt(f"{t}-j") is None
    # The failed ones go on from their real head; the store knows the others' new heads.
    for t in ("stale", "unknown", "dup", "ok1", "ok2"):
        head = await store.get_thread(t)
        assert head is not None
        nxt = make_checkpoint(t, head.head_seq + 1, id=f"{t}.next", parent_id=head.head_id)
        await store.append_checkpoint(nxt, expected_head=head.head_id)


async def test_two_appends_to_one_thread_in_a_group_are_checked_in_order(
    tmp_path: Path, sqlite_files: Callable[[Path], SqliteStore], groups: list[int]
) -> None:
    store = sqlite_files(tmp_path / "g.db")
    first = make_checkpoint("t", 1)
    await store.append_checkpoint(first, expected_head=None)
    groups.clear()
    a, b, c = (make_checkpoint("t", 2, id=f"t.2{x}") for x in "abc")
    d = make_checkpoint("t", 3, parent_id=a.id)
    outcomes = await _as_one_group(
        store,
        [
            lambda: store.append_checkpoint(a, expected_head=first.id),
            lambda: store.append_checkpoint(b, expected_head=first.id),  # a moved the head
            lambda: store.append_checkpoint(d, expected_head=a.id),  # after a: goes through
            lambda: store.append_checkpoint(c, expected_head=first.id),
        ],
    )
    assert groups == [4]
    assert outcomes[0] is None and outcomes[2] is None
    assert isinstance(outcomes[1], ThreadBusy) and isinstance(outcomes[3], ThreadBusy)
    read = await store.checkpoint_range("t", lo=1, hi=EVERYTHING)
    assert [r.id for r in read] == [first.id, a.id, d.id]


def _write(conn: sqlite3.Connection, value: int, *, lose_transaction: bool = False) -> Any:
    def write(c: sqlite3.Connection) -> tuple[int, None]:
        c.execute("INSERT INTO t VALUES (?)", (value,))
        if lose_transaction:  # what SQLite does on a full disk or an I/O error
            c.execute("ROLLBACK")
            raise sqlite3.OperationalError("database or disk is full")
        return value, None

    return ops.Pending(write, "FULL")


def test_writes_before_one_that_loses_the_transaction_are_written_again(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "raw.db", isolation_level=None)
    try:
        conn.execute("CREATE TABLE t (v INTEGER PRIMARY KEY)")
        group = [_write(conn, 1), _write(conn, 2), _write(conn, 3, lose_transaction=True)]
        group.append(_write(conn, 4))
        ops.commit_group(conn, group)
        assert [group[i].outcome() for i in (0, 1, 3)] == [1, 2, 4]
        with pytest.raises(sqlite3.OperationalError, match="full"):
            group[2].outcome()
        assert [r[0] for r in conn.execute("SELECT v FROM t ORDER BY v")] == [1, 2, 4]
        assert not conn.in_transaction
    finally:
        conn.close()


def test_a_failed_commit_fails_every_write_of_the_group(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "raw.db", isolation_level=None)
    try:
        conn.execute("CREATE TABLE t (v INTEGER PRIMARY KEY)")
        conn.execute("CREATE TABLE p (v INTEGER REFERENCES t (v) DEFERRABLE INITIALLY DEFERRED)")
        conn.execute("PRAGMA foreign_keys = ON")

        def dangling(c: sqlite3.Connection) -> tuple[int, None]:
            c.execute("INSERT INTO p VALUES (99)")  # fails only at COMMIT
            return 0, None

        group = [_write(conn, 1), ops.Pending(dangling, "FULL"), _write(conn, 2)]
        ops.commit_group(conn, group)
        for p in group:
            with pytest.raises(sqlite3.IntegrityError):
                p.outcome()
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
        assert not conn.in_transaction
    finally:
        conn.close()


async def test_a_group_that_found_the_file_busy_is_retried_by_each_caller(
    tmp_path: Path, sqlite_files: Callable[[Path], SqliteStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = sqlite_files(tmp_path / "g.db")
    await store.open()
    real = ops.commit_group
    sizes: list[int] = []

    def busy_once(conn: sqlite3.Connection, group: Any) -> None:
        sizes.append(len(group))
        if len(sizes) == 1:  # as if BEGIN IMMEDIATE found another process's write lock
            locked = sqlite3.OperationalError("database is locked")
            locked.sqlite_errorcode = sqlite3.SQLITE_BUSY  # type: ignore[attr-defined]
            for p in group:
                p.fail(locked)
            return
        real(conn, group)

    monkeypatch.setattr(ops, "commit_group", busy_once)
    records = [make_checkpoint(f"t{i}", 1) for i in range(4)]
    outcomes = await _as_one_group(
        store, [lambda r=r: store.append_checkpoint(r, expected_head=None) for r in records]
    )
    assert outcomes == [None] * 4
    assert sizes[0] == 4 and sum(sizes[1:]) == 4  # each written once, after the busy group
    for r in records:
        assert [c.id for c in await store.checkpoint_range(r.thread, lo=1, hi=EVERYTHING)] == [r.id]
