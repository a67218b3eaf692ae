"""PostgresStore's grouped appends: appends of concurrent callers commit together.

Under asyncio, an append whose caller is not alone on its loop goes to a committer thread,
which takes every append waiting by then and commits them in one transaction, each in a
savepoint. Each must still be all-or-nothing and checked on its own (head, lease,
resolutions), a failing one must not fail or lose the others, and nobody is told "committed"
before the group's ``COMMIT`` returned. The crash side (SIGKILL mid-group) is in
``tests/system/test_postgres_group_commit_crashes.py``.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import anyio.to_thread
import psycopg
import pytest

from interlock import StoreError, ThreadBusy, UnknownInterrupt
from interlock.stores import _postgres_ops as ops
from interlock.stores._postgres import PostgresStore
from interlock.testing._conformance._common import (
    EVERYTHING,
    make_checkpoint,
    make_interrupt,
    resolve,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.asyncio_only(reason="appends are grouped under asyncio only; trio's go one by one"),
]


@pytest.fixture
def groups(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every group of two or more appends the stores commit during the test."""
    sizes: list[int] = []
    real = ops.append_group

    def counted(conn: ops.Conn, writes: Any, *, durable: bool) -> Any:
        sizes.append(len(writes))
        return real(conn, writes, durable=durable)

    monkeypatch.setattr(ops, "append_group", counted)
    return sizes


@pytest.fixture
async def store(dsn: str) -> AsyncIterator[PostgresStore]:
    """A store with one connection, so one committer: a held one makes the others queue."""
    async with PostgresStore(dsn, max_size=1) as s:
        yield s


async def test_concurrent_appends_share_transactions(dsn: str, groups: list[int]) -> None:
    tasks, each = 32, 6
    async with PostgresStore(dsn, max_size=4) as store:

        async def chain(t: int) -> None:
            thread, parent = f"t{t}", None
            for seq in range(1, each + 1):
                record = make_checkpoint(thread, seq)
                await store.append_checkpoint(record, expected_head=parent)
                parent = record.id

        async with anyio.create_task_group() as tg:
            for t in range(tasks):
                tg.start_soon(chain, t)
        assert groups, "no two appends shared a transaction"
        assert max(groups) > 1
        for t in range(tasks):
            read = await store.checkpoint_range(f"t{t}", lo=1, hi=EVERYTHING)
            assert [c.seq for c in read] == list(range(1, each + 1))
            head = await store.get_thread(f"t{t}")
            assert head is not None and head.head_id == read[-1].id


@pytest.fixture
def row_lock(dsn: str) -> Iterator[Callable[[str], threading.Event]]:
    """``row_lock(thread)`` locks the thread's row from another connection until the returned
    event is set (or the test ends): an append to that thread waits on the server meanwhile."""
    releases: list[threading.Event] = []
    holders: list[threading.Thread] = []

    def lock(thread: str) -> threading.Event:
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            with psycopg.connect(dsn) as conn:
                conn.execute("SELECT 1 FROM threads WHERE thread = %s FOR UPDATE", (thread,))
                held.set()
                release.wait(20)

        holder = threading.Thread(target=hold)
        holder.start()
        assert held.wait(20), "could not lock the thread's row"
        releases.append(release)
        holders.append(holder)
        return release

    try:
        yield lock
    finally:
        for release in releases:
            release.set()
        for holder in holders:
            holder.join()


async def _waiting_on_lock(dsn: str) -> None:
    """Return once a session of the server waits for a row lock."""

    def count() -> int:
        with psycopg.connect(dsn) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            ).fetchone()
        return 0 if row is None else int(row[0])

    with anyio.fail_after(20):
        while await anyio.to_thread.run_sync(count) == 0:  # noqa: ASYNC110 - the server's state
            await anyio.sleep(0.01)


async def _as_one_group(
    store: PostgresStore,
    dsn: str,
    row_lock: Callable[[str], threading.Event],
    calls: list[Callable[[], Any]],
) -> list[BaseException | None]:
    """Run ``calls`` (appends) so that they all queue, then commit as one group: the store's
    only committer is busy meanwhile with an append that waits for a row lock held elsewhere."""
    blocker = make_checkpoint("blocker", 1)
    await store.append_checkpoint(blocker, expected_head=None)
    release = row_lock("blocker")
    outcomes: list[BaseException | None] = [None] * len(calls)

    async def call(i: int) -> None:
        try:
            await calls[i]()
        except Exception as exc:
            outcomes[i] = exc

    async with anyio.create_task_group() as tg:
        second = make_checkpoint("blocker", 2)
        tg.start_soon(lambda: store.append_checkpoint(second, expected_head=blocker.id))
        await _waiting_on_lock(dsn)
        for i in range(len(calls)):
            tg.start_soon(call, i)
        with anyio.fail_after(20):
            while store._appends.qsize() < len(calls):  # noqa: ASYNC110 - a thread's queue
                await anyio.sleep(0.001)
        release.set()
    return outcomes


async def test_a_failing_append_fails_alone_in_its_group(
    store: PostgresStore, dsn: str, row_lock: Any, groups: list[int]
) -> None:
    firsts = {}
    for t in ("a-ok", "b-stale", "c-unknown", "d-dup", "e-ok"):
        first = make_checkpoint(t, 1)
        await store.append_checkpoint(
            first, expected_head=None, new_interrupts=[make_interrupt(f"{t}-i", first)]
        )
        firsts[t] = first

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
        dsn,
        row_lock,
        [
            second("a-ok"),
            second("b-stale", expected_head="b-stale.0000"),  # not the head: ThreadBusy
            second("c-unknown", resolutions=[resolve("no-such")]),  # UnknownInterrupt
            second("d-dup", id="a-ok.0002"),  # a checkpoint id taken (by a-ok in this group)
            second("e-ok"),
        ],
    )
    assert groups == [5], "the five appends did not commit as one group"
    ok1, stale, unknown, dup, ok2 = outcomes
    assert ok1 is None and ok2 is None
    assert isinstance(stale, ThreadBusy)
    assert isinstance(unknown, UnknownInterrupt)
    assert list(unknown.pending) == ["c-unknown-i"]  # read after its own rollback
    assert isinstance(dup, StoreError) and "unique" in str(dup)
    for t in ("a-ok", "e-ok"):  # every row of a write that went through
        head = await store.get_thread(t)
        assert head is not None and head.head_seq == 2
        assert (await store.get_interrupt(f"{t}-i")).status == "resolved"  # type: ignore[union-attr]
        assert (await store.get_interrupt(f"{t}-j")).status == "pending"  # type: ignore[union-attr]
    for t in ("b-stale", "c-unknown", "d-dup"):  # no row of a write that failed
        head = await store.get_thread(t)
        assert head is not None and head.head_id == firsts[t].id
        assert [c.seq for c in await store.checkpoint_range(t, lo=1, hi=EVERYTHING)] == [1]
        assert (await store.get_interrupt(f"{t}-i")).status == "pending"  # type: ignore[union-attr]
        assert await store.get_interrupt(f"{t}-j") is None
    # The failed ones go on from their real head, and so do the others.
    for t in firsts:
        head = await store.get_thread(t)
        assert head is not None
        nxt = make_checkpoint(t, head.head_seq + 1, id=f"{t}.next", parent_id=head.head_id)
        await store.append_checkpoint(nxt, expected_head=head.head_id)


async def test_two_appends_to_one_thread_in_a_group_are_checked_in_order(
    store: PostgresStore, dsn: str, row_lock: Any, groups: list[int]
) -> None:
    first = make_checkpoint("t", 1)
    await store.append_checkpoint(first, expected_head=None)
    a, b, c = (make_checkpoint("t", 2, id=f"t.2{x}") for x in "abc")
    d = make_checkpoint("t", 3, parent_id=a.id)
    outcomes = await _as_one_group(
        store,
        dsn,
        row_lock,
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


async def test_a_failed_commit_fails_every_append_of_the_group(
    store: PostgresStore, dsn: str, row_lock: Any, groups: list[int]
) -> None:
    # A check that runs at COMMIT only: the whole transaction fails there, after every
    # append of the group went through on its own.
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION refuse_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN RAISE EXCEPTION 'refused at commit'; END $$"
        )
        conn.execute(
            "CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER INSERT ON checkpoints "
            "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.thread = 'y') "
            "EXECUTE FUNCTION refuse_at_commit()"
        )
    records = [make_checkpoint(t, 1) for t in ("x", "y", "z")]
    outcomes = await _as_one_group(
        store,
        dsn,
        row_lock,
        [
            (lambda r=r: store.append_checkpoint(r, expected_head=None))  # type: ignore[misc]
            for r in records
        ],
    )
    assert groups == [3]
    for outcome in outcomes:
        assert isinstance(outcome, StoreError) and "refused at commit" in str(outcome)
    for t in ("x", "y", "z"):
        assert await store.get_thread(t) is None


async def test_a_group_whose_connection_was_lost_is_written_again(
    store: PostgresStore, dsn: str, row_lock: Any, groups: list[int], monkeypatch: Any
) -> None:
    real = ops.append_group
    calls = 0

    def lose_first(conn: ops.Conn, writes: Any, *, durable: bool) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:  # the server ends the session midway: nothing committed
            with psycopg.connect(dsn, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        return real(conn, writes, durable=durable)

    monkeypatch.setattr(ops, "append_group", lose_first)
    records = [make_checkpoint(t, 1) for t in ("x", "y", "z")]
    outcomes = await _as_one_group(
        store,
        dsn,
        row_lock,
        [
            (lambda r=r: store.append_checkpoint(r, expected_head=None))  # type: ignore[misc]
            for r in records
        ],
    )
    assert calls == 2
    assert outcomes == [None, None, None]
    for r in records:
        head = await store.get_thread(r.thread)
        assert head is not None and head.head_id == r.id


@pytest.mark.parametrize("durable", [True, False])
def test_a_group_commits_lazily_only_when_none_of_its_appends_is_durable(
    dsn: str, durable: bool
) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:

        def level(c: ops.Conn) -> Any:
            row = c.execute("SHOW synchronous_commit").fetchone()
            return None if row is None else row[0]

        def refused(c: ops.Conn) -> Any:
            c.execute("SET LOCAL synchronous_commit = remote_write")  # undone with it
            raise ValueError("refused")

        outcomes = ops.append_group(conn, [level, refused, level], durable=durable)
    expected = "on" if durable else "off"
    assert outcomes[0] == (expected, None) and outcomes[2] == (expected, None)
    assert isinstance(outcomes[1][1], ValueError)


async def test_idle_committers_end_and_new_ones_start(
    dsn: str, groups: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    from interlock.stores import _postgres

    monkeypatch.setattr(_postgres, "_IDLE_EXIT", 0.05)

    async def burst(store: PostgresStore, tag: str) -> None:
        async def one(t: int) -> None:
            await store.append_checkpoint(make_checkpoint(f"{tag}{t}", 1), expected_head=None)

        async with anyio.create_task_group() as tg:
            for t in range(8):
                tg.start_soon(one, t)

    async with PostgresStore(dsn, max_size=2) as store:
        await burst(store, "a")
        started = list(store._committers)
        assert started, "the burst's appends did not go to committer threads"
        with anyio.fail_after(10):
            while any(t.is_alive() for t in started):  # noqa: ASYNC110 - other threads
                await anyio.sleep(0.01)
        assert store._committers == []
        await burst(store, "b")  # new committers take the next burst
        assert store._committers
        for tag in "ab":
            for t in range(8):
                head = await store.get_thread(f"{tag}{t}")
                assert head is not None and head.head_seq == 1
    assert store._committers == []  # closing stopped them
