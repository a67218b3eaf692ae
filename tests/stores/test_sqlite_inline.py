"""SqliteStore runs calls that never wait on the disk on the caller's thread, and only those.

A point read and a commit without an fsync run right where they are called when the
connection is free, even on a busy event loop (a server's), instead of a hand-off to the
store's worker thread and back. What must hold: a durable commit still goes to the worker
(its fsync never blocks the loop); a call that would wait (the worker holds the connection,
another connection holds the file's write lock) goes to the worker instead of blocking the
loop; the connection's busy wait and automatic checkpoints are back for the worker's calls;
and a run of such commits cannot grow the write-ahead log without bound.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from interlock import SqliteStore
from interlock.stores import _sqlite
from interlock.stores import _sqlite_ops as ops
from interlock.testing._conformance._common import make_checkpoint, make_interrupt

pytestmark = pytest.mark.anyio


@pytest.fixture
def threads_of(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[int]]:
    """The thread each commit, head read and interrupt read ran on, by kind."""
    seen: dict[str, list[int]] = {"commit": [], "head": [], "interrupt": []}

    def spy(kind: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def called(*args: Any) -> Any:
            seen[kind].append(threading.get_ident())
            return real(*args)

        return called

    monkeypatch.setattr(ops, "commit_group", spy("commit", ops.commit_group))
    monkeypatch.setattr(ops, "head_checkpoint", spy("head", ops.head_checkpoint))
    monkeypatch.setattr(ops, "interrupt", spy("interrupt", ops.interrupt))
    return seen


@pytest.fixture
async def busy_loop() -> AsyncIterator[None]:
    """Another task on the loop, as in a server: the loop is never idle meanwhile."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.sleep_forever)
        yield
        tg.cancel_scope.cancel()


async def _ticks_while(call: Any) -> tuple[Any, float]:
    """Await ``call()`` while a ticker runs on the loop; the result and the ticker's longest
    gap in seconds (a blocked loop shows as a long gap)."""
    gaps: list[float] = []
    done = anyio.Event()

    async def tick() -> None:
        last = time.monotonic()
        while not done.is_set():
            await anyio.sleep(0.005)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    async with anyio.create_task_group() as tg:
        tg.start_soon(tick)
        try:
            result = await call()
        finally:
            done.set()
    return result, max(gaps, default=0.0)


async def test_point_reads_and_fsync_less_commits_run_on_the_callers_thread(
    tmp_path: Path,
    sqlite_files: Callable[[Path], SqliteStore],
    threads_of: dict[str, list[int]],
    busy_loop: None,
) -> None:
    store = sqlite_files(tmp_path / "inline.db")
    await store.open()
    here = threading.get_ident()
    one = make_checkpoint("t", 1, status="interrupted")
    question = make_interrupt("q1", one)
    await store.append_checkpoint(one, expected_head=None, new_interrupts=[question], durable=False)
    assert await store.get_checkpoint("t") == one
    assert await store.get_interrupt("q1") is not None
    assert threads_of["commit"] == [here], "an fsync-less commit was handed to the worker"
    assert threads_of["head"] == [here], "a head read was handed to the worker"
    assert threads_of["interrupt"] == [here], "an interrupt read was handed to the worker"

    two = make_checkpoint("t", 2)
    await store.append_checkpoint(two, expected_head=one.id)  # durable: an fsync
    assert threads_of["commit"][-1] != here, "a durable commit ran on the event loop's thread"
    assert (await store.get_checkpoint("t")) == two


async def test_a_busy_connection_sends_the_call_to_the_worker_and_the_loop_runs_on(
    tmp_path: Path,
    sqlite_files: Callable[[Path], SqliteStore],
    threads_of: dict[str, list[int]],
    busy_loop: None,
) -> None:
    store = sqlite_files(tmp_path / "held.db")
    one = make_checkpoint("t", 1)
    await store.append_checkpoint(one, expected_head=None)
    here = threading.get_ident()
    # Another thread holds the store's connection (as the worker does during an fsync).
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store._lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    try:

        async def read_then_release() -> Any:
            with anyio.fail_after(10):
                reading = anyio.Event()
                found: list[Any] = []

                async def read() -> None:
                    reading.set()
                    found.append(await store.get_checkpoint("t"))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(read)
                    await reading.wait()
                    await anyio.sleep(0.3)
                    assert not found, "the read did not wait for the connection"
                    release.set()
                return found[0]

        head, gap = await _ticks_while(read_then_release)
    finally:
        release.set()
        holder.join(10)
    assert head == one
    assert threads_of["head"] == [threads_of["head"][0]] and threads_of["head"][0] != here
    assert gap < 0.2, f"the event loop stood still {gap:.3f}s while the connection was held"


async def test_another_connections_write_lock_sends_the_commit_to_the_worker(
    tmp_path: Path,
    sqlite_files: Callable[[Path], SqliteStore],
    threads_of: dict[str, list[int]],
    busy_loop: None,
) -> None:
    path = tmp_path / "locked.db"
    store = sqlite_files(path)
    one = make_checkpoint("t", 1)
    await store.append_checkpoint(one, expected_head=None)
    here = threading.get_ident()
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process's writer, say

        async def commit_then_release() -> None:
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(
                        lambda: store.append_checkpoint(
                            make_checkpoint("t", 2), expected_head=one.id, durable=False
                        )
                    )
                    await anyio.sleep(0.3)
                    other.execute("COMMIT")

        _, gap = await _ticks_while(commit_then_release)
    finally:
        if other.in_transaction:
            other.execute("ROLLBACK")
        other.close()
    assert gap < 0.2, f"the event loop stood still {gap:.3f}s behind another connection's lock"
    # First tried here, found the file locked, then committed by the worker once it was free.
    assert threads_of["commit"][-2] == here and threads_of["commit"][-1] != here
    # The worker's calls wait for the lock again, and checkpoint the log again.
    conn = store._conn
    assert conn is not None
    with store._lock:
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    head = await store.get_checkpoint("t")
    assert head is not None and head.seq == 2


async def test_a_run_of_fsync_less_commits_ends_with_one_on_the_worker(
    tmp_path: Path,
    sqlite_files: Callable[[Path], SqliteStore],
    threads_of: dict[str, list[int]],
    busy_loop: None,
) -> None:
    store = sqlite_files(tmp_path / "run.db")
    await store.open()
    here = threading.get_ident()
    parent = None
    runs = _sqlite._INLINE_WRITES_MAX + 1
    for seq in range(1, 2 * runs + 1):
        record = make_checkpoint("t", seq)
        await store.append_checkpoint(record, expected_head=parent, durable=False)
        parent = record.id
    on_worker = [n for n, ident in enumerate(threads_of["commit"]) if ident != here]
    # Commits on the caller's thread never checkpoint the log: every so many, one that does.
    assert on_worker == [_sqlite._INLINE_WRITES_MAX, 2 * _sqlite._INLINE_WRITES_MAX + 1]


@pytest.mark.asyncio_only(reason="under trio the worker's calls go to anyio.to_thread, unseen")
async def test_a_call_queued_for_the_worker_is_not_overtaken(
    tmp_path: Path,
    sqlite_files: Callable[[Path], SqliteStore],
    threads_of: dict[str, list[int]],
    busy_loop: None,
) -> None:
    store = sqlite_files(tmp_path / "queued.db")
    one = make_checkpoint("t", 1)
    await store.append_checkpoint(one, expected_head=None)
    here = threading.get_ident()
    started, release = threading.Event(), threading.Event()
    order: list[str] = []

    def slow() -> None:  # a long call on the worker thread, such as an fsync on a slow disk
        started.set()
        release.wait(10)
        order.append("slow")

    async def read() -> None:
        await store.get_checkpoint("t")
        order.append("read")

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(store._worker.run, slow)
            await anyio.to_thread.run_sync(started.wait, 10)
            assert store._worker.busy
            tg.start_soon(read)
            await anyio.sleep(0.2)
            assert order == [], "a read overtook a call the worker was running"
            release.set()
    assert order == ["slow", "read"]
    assert threads_of["head"][-1] != here, "the read ran beside the worker's call"
    assert not store._worker.busy
