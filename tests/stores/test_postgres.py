from __future__ import annotations

import contextlib
import itertools
import socket
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any, TypedDict

import anyio
import msgspec
import psycopg
import pytest
from psycopg import sql

from _pgserver import PgServer
from interlock import END, START, Graph, append, approve
from interlock._errors import StoreClosed, StoreError, ThreadBusy
from interlock.stores import (
    AuditEntry,
    CheckpointRecord,
    Fence,
    InterruptRecord,
    PendingFilter,
    Store,
    verify_audit,
)
from interlock.stores import _postgres_schema as schema
from interlock.stores._base import AUDIT_KINDS
from interlock.stores._postgres import PostgresStore
from interlock.stores._rows import digest
from interlock.testing import FakeClock, StoreConformance

pytestmark = pytest.mark.anyio


class TestPostgresStore(StoreConformance):
    @pytest.fixture(params=[True, False], ids=["prepared", "unprepared"])
    async def store(
        self, dsn: str, request: pytest.FixtureRequest, clock: FakeClock
    ) -> AsyncIterator[PostgresStore]:
        # Unprepared: what runs behind a transaction-pooling proxy without prepared statements.
        async with PostgresStore(dsn, max_size=4, prepare=request.param, clock=clock) as store:
            yield store


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
        status="ready",
        body=b"body",
    )


@contextlib.contextmanager
def socket_port() -> Iterator[int]:
    """A loopback port with nothing listening on it, held until the block ends."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))  # bound but not listening: connections are refused
        yield int(sock.getsockname()[1])


def versions(dsn: str) -> list[int]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
    return [row[0] for row in rows]


async def test_migrations_are_recorded_once_even_when_concurrent(dsn: str) -> None:
    first, second = PostgresStore(dsn), PostgresStore(dsn)
    applied: list[list[int]] = []

    async def run(store: PostgresStore) -> None:
        applied.append(await store.migrate())

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, first)
        tg.start_soon(run, second)
    assert sorted(applied) == [[], list(range(1, schema.SCHEMA_VERSION + 1))]
    assert versions(dsn) == list(range(1, schema.SCHEMA_VERSION + 1))
    # Opening again applies nothing and keeps the data.
    async with first:
        await first.append_checkpoint(checkpoint("t", 1), expected_head=None)
    assert await second.migrate() == []
    async with PostgresStore(dsn) as third:
        assert (await third.get_checkpoint("t")) == checkpoint("t", 1)
    await second.close()
    assert versions(dsn) == list(range(1, schema.SCHEMA_VERSION + 1))


async def test_newer_schema_is_refused(dsn: str) -> None:
    async with PostgresStore(dsn) as store:
        await store.get_thread("t")
    with psycopg.connect(dsn) as conn:
        conn.execute("INSERT INTO schema_version VALUES (%s, 0)", (schema.SCHEMA_VERSION + 1,))
    with pytest.raises(StoreError, match="newer interlock"):
        async with PostgresStore(dsn):
            pass


async def test_foreign_tables_are_refused(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute("CREATE TABLE threads (x int)")
    with pytest.raises(StoreError, match="schema of its own"):
        await PostgresStore(dsn).get_thread("t")


async def test_closed_store_raises_store_closed(dsn: str) -> None:
    unopened = PostgresStore(dsn)
    await unopened.close()
    with pytest.raises(StoreClosed):
        await unopened.get_thread("t")
    store = PostgresStore(dsn)
    assert repr(store).endswith(" unopened>")
    await store.get_thread("t")
    assert repr(store).endswith(" open>")
    await store.close()
    await store.close()
    assert repr(store).endswith(" closed>")
    with pytest.raises(StoreClosed):
        await store.request_pause("t")
    with pytest.raises(StoreClosed):
        await store.take_pause_request("t")
    with pytest.raises(StoreClosed):
        await store.migrate()


async def test_a_pause_request_is_announced_on_the_pause_channel(dsn: str) -> None:
    thread = f"paused-{uuid.uuid4().hex}"  # the channel is the whole server's
    async with PostgresStore(dsn) as store:
        await store.append_checkpoint(checkpoint(thread, 1), expected_head=None)
        with psycopg.connect(dsn, autocommit=True) as listener:
            listener.execute(f"LISTEN {PostgresStore.PAUSE_CHANNEL}")
            assert await store.request_pause(thread)
            notes = listener.notifies(timeout=10.0)
            heard = next((note for note in notes if note.payload == thread), None)
            notes.close()
    assert heard is not None and heard.channel == PostgresStore.PAUSE_CHANNEL == "interlock_pause"


async def test_workers_continue_once_the_continuation_trigger_is_there(dsn: str) -> None:
    async with PostgresStore(dsn) as store:
        assert not await store.workers_continue()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "CREATE FUNCTION queue_nothing() RETURNS TRIGGER LANGUAGE plpgsql "
                "AS $$BEGIN RETURN NULL; END$$"
            )
            trigger = sql.Identifier(PostgresStore.CONTINUATION_TRIGGER)
            conn.execute(
                sql.SQL(
                    "CREATE TRIGGER {} AFTER UPDATE ON interrupts FOR EACH ROW "
                    "EXECUTE FUNCTION queue_nothing()"
                ).format(trigger)
            )
            assert await store.workers_continue()
            conn.execute(sql.SQL("ALTER TABLE interrupts DISABLE TRIGGER {}").format(trigger))
            assert not await store.workers_continue()


async def test_bad_dsn_names_host_and_port_but_not_the_password() -> None:
    with socket_port() as port:
        store = PostgresStore(f"postgresql://alice:s3cret-pw@127.0.0.1:{port}/nowhere")
        with pytest.raises(StoreError) as caught:
            await store.get_thread("t")
        await store.close()
    message = str(caught.value)
    assert f"127.0.0.1:{port}" in message
    assert "alice@" in message
    assert "s3cret-pw" not in message and "s3cret-pw" not in repr(store)
    assert "server is up" in message
    assert isinstance(caught.value.__cause__, psycopg.OperationalError)


async def test_pool_survives_a_server_restart(server: PgServer, dsn: str) -> None:
    async with PostgresStore(dsn, min_size=2, max_size=2) as store:
        await store.append_checkpoint(checkpoint("t", 1), expected_head=None)
        await anyio.to_thread.run_sync(server.restart)
        await store.append_checkpoint(checkpoint("t", 2), expected_head="t.1")
        head = await store.get_thread("t")
        assert head is not None and head.head_seq == 2


async def test_run_interrupts_and_resumes_in_a_new_store(dsn: str) -> None:
    class S(TypedDict, total=False):
        log: Annotated[list[str], append]
        answer: Any
        amount: int

    entries: Counter[str] = Counter()

    def build() -> Graph[S]:
        g = Graph(S)

        def agent(s: S) -> dict[str, Any]:
            entries["agent"] += 1
            return {"log": ["agent"]}

        def gate(s: S) -> dict[str, Any]:
            entries["approve"] += 1
            ok = approve(f"pay {s.get('amount', 0)}?", key="pay")
            return {"answer": ok, "log": ["approved" if ok else "rejected"]}

        def execute(s: S) -> dict[str, Any]:
            entries["execute"] += 1
            return {"log": ["executed"]}

        g.add_node("agent", agent).add_node("approve", gate).add_node("execute", execute)
        g.add_edge(START, "agent").add_edge("agent", "approve")
        g.add_conditional_edges("approve", lambda s: "execute" if s["answer"] else END)
        return g

    async with PostgresStore(dsn) as first:
        store: Store = first
        run = await build().compile(store=store).run({"amount": 5000}, thread="t")
        assert run.status == "interrupted"
        (pending,) = run.interrupts
    async with PostgresStore(dsn) as second:
        assert [i.id for i in await second.pending(PendingFilter(thread="t"))] == [pending.id]
        done = await build().compile(store=second).resume("t", {pending.id: True})
        assert done.status == "done"
        assert done.values["log"] == ["agent", "approved", "executed"]
        assert await second.pending() == []
    assert entries == Counter(agent=1, approve=2, execute=1)


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE audit SET data = convert_to('{}', 'UTF8') WHERE seq = 2",
        "UPDATE audit SET actor = 'mallory' WHERE seq = 3",
        "DELETE FROM audit WHERE seq = 2",
    ],
)
async def test_any_edited_audit_row_is_detected(dsn: str, edit: str) -> None:
    async with PostgresStore(dsn) as store:
        for n in range(4):
            entry = AuditEntry(kind="decision", actor="ann", data=f'{{"n": {n}}}'.encode())
            await store.begin_effect("t", f"k{n}", name="x", fence=None, audit=[entry])
        assert (await verify_audit(store)).ok
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(edit)
        report = await verify_audit(store)
    assert not report.ok
    assert min(p.seq for p in report.problems) in (2, 3)


async def test_an_append_whose_reply_was_lost_is_not_reported_busy(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit reached the server, the connection broke before the reply: the store retries,
    finds its own checkpoint at the head, and reports the success it was."""
    from interlock.stores import Fence
    from interlock.stores import _postgres_ops as ops

    real = ops.append
    broke: list[bool] = []

    def commit_then_break(*args: Any, **kwargs: Any) -> int | None:
        result = real(*args, **kwargs)
        if not broke:
            broke.append(True)
            raise psycopg.errors.AdminShutdown(
                "terminating connection due to administrator command"
            )
        return result

    async with PostgresStore(dsn) as store:
        fence = Fence(owner="me", token=None, ttl=30)
        monkeypatch.setattr(ops, "append", commit_then_break)
        token = await store.append_checkpoint(checkpoint("t", 1), expected_head=None, fence=fence)
        assert broke and token == 1
        head = await store.get_thread("t")
        assert head is not None and head.head_seq == 1
        monkeypatch.undo()
        # A genuine second append of the same checkpoint is still refused.
        with pytest.raises(ThreadBusy):
            await store.append_checkpoint(checkpoint("t", 1), expected_head=None)


async def test_audit_hashes_chained_by_the_server_match_audit_hash(dsn: str) -> None:
    """The server encodes seq and hashes; Python's `audit_hash` must agree byte for byte."""
    from interlock.stores._audit import audit_hash

    sizes = [0, 1, 31, 32, 255, 256, 65535, 65536, 70000]
    kinds = sorted(AUDIT_KINDS)
    entries = [
        AuditEntry(
            kind=kinds[i % len(kinds)],  # type: ignore[arg-type]
            actor=None if n % 2 else "é" * n,
            data=bytes(n % 251) * n,
        )
        for i, n in enumerate(sizes)
    ]
    async with PostgresStore(dsn) as store:
        for thread in ("t", "x" * 300):
            for seq in (1, 2):
                head = None if seq == 1 else f"{thread}.{seq - 1}"
                await store.append_checkpoint(
                    checkpoint(thread, seq), expected_head=head, audit=entries
                )
        report = await verify_audit(store)
        assert report.ok, report.problems
        assert report.entries == 4 * len(sizes)
        # Every width msgpack has for seq: start each thread's log just below a boundary.
        for last in (126, 127, 254, 255, 65534, 65535, 2**32 - 2, 2**32 - 1, 2**40):
            thread = f"s{last}"
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(
                    "INSERT INTO audit VALUES (%s, %s, 0, 'edit', NULL, '', %s, %s)",
                    (thread, last, bytes(32), bytes(range(32))),
                )
            await store.append_checkpoint(
                checkpoint(thread, 1), expected_head=None, audit=entries[:3]
            )
            rows = await store.audit_log(thread=thread)
            assert [r.seq for r in rows] == [last, last + 1, last + 2, last + 3]
            for prev, row in itertools.pairwise(rows):
                assert row.prev == prev.hash
                expected = audit_hash(
                    row.prev, thread, row.seq, row.at, row.kind, row.actor, row.data
                )
                assert row.hash == expected


async def test_the_migration_digests_rows_as_the_store_does(dsn: str) -> None:
    # Version 5 computes the digests of rows written before it in SQL: they must be the very
    # bytes the store computes (and checks) itself. A checkpoint's digest is the form rows of
    # that time had, over the body itself, which the store still accepts (a new row sums its
    # body instead: `checkpoint_digest`).
    async with PostgresStore(dsn) as store:
        # Lengths and numbers across msgpack's size classes: str 5/40/300 bytes, bin 7/300/70000
        # bytes, the step -1, floats and NULLs.
        first = msgspec.structs.replace(checkpoint("t", 1), body=b"b" * 70_000, parent_id="p" * 40)
        await store.append_checkpoint(
            first,
            expected_head=None,
            new_interrupts=[
                InterruptRecord(
                    id="i1",
                    thread="t",
                    checkpoint_id=first.id,
                    key="k\u00e9",
                    address="node:" + "a" * 300,
                    kind="dynamic",
                    status="pending",
                    created_at=12.5,
                    deadline=None,
                    body=b"\x00body",
                    tool="t" * 40,
                ),
                InterruptRecord(
                    id="i2",
                    thread="t",
                    checkpoint_id=first.id,
                    key=None,
                    address="node:b",
                    kind="dynamic",
                    status="pending",
                    created_at=1e9 + 0.1,
                    deadline=-5.25,
                    body=b"x" * 300,
                ),
            ],
            fence=Fence(owner="me", token=None, ttl=30.0),
        )
    tables = {"threads": "thread", "checkpoints": "id", "interrupts": "id"}
    with psycopg.connect(dsn) as conn:

        def digests() -> list[Any]:
            return [
                conn.execute(f"SELECT * FROM {table} ORDER BY {key}").fetchall()
                for table, key in tables.items()
            ]

        before = digests()
        # The checkpoints as a store of version 5 wrote them: digested over the body.
        before[1] = [(*row[:-1], digest(*row[:-1])) for row in before[1]]
        assert all(len(row) == 11 and len(row[9]) > 0 for row in before[1])
        updates = [s for s in schema.MIGRATIONS[4] if s.lstrip().startswith("UPDATE")]
        assert len(updates) == 3
        for statement in updates:
            conn.execute(statement)
        assert digests() == before
        conn.rollback()


def test_a_program_that_never_closes_its_store_exits_cleanly(dsn: str) -> None:
    # A script or an `interlock` command on an app's store may end without closing it; its
    # pool's threads must still stop (left to the garbage collector at the interpreter's exit,
    # each made Python 3.13 wait 5 s and print "couldn't stop thread").
    script = (
        "import asyncio, sys\n"
        "from interlock import PostgresStore\n"
        "store = PostgresStore(sys.argv[1])\n"
        "assert asyncio.run(store.get_thread('nobody')) is None\n"
        "print('read')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, dsn], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, "read\n"), done.stderr
    assert "couldn't stop thread" not in done.stderr, done.stderr
