"""PostgresStore's appends sent to libpq directly (`interlock.stores._postgres_wire`).

The call of ``interlock_append`` bypasses psycopg: its parameters go in PostgreSQL's binary
format, under a statement prepared by a name psycopg does not know. These tests hold what
that must not change: every value arrives exactly, the statement survives psycopg's
``DEALLOCATE ALL`` (alone and inside a group's transaction), a connection that does not speak
UTF-8 or a store that keeps no session state still appends, and errors keep their types.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import psycopg
import pytest

from interlock import StoreError, ThreadBusy
from interlock.stores import _postgres_ops as ops
from interlock.stores._base import AuditEntry, InterruptRecord
from interlock.stores._postgres import PostgresStore
from interlock.testing._conformance._common import (
    make_checkpoint,
    make_fence,
    make_interrupt,
    resolve,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store(dsn: str) -> AsyncIterator[PostgresStore]:
    """A migrated store, for reading back what the tests write on connections of their own."""
    async with PostgresStore(dsn) as s:
        yield s


def _prepared(conn: psycopg.Connection[Any]) -> set[str]:
    """The names of the statements prepared on ``conn``'s session."""
    return {row[0] for row in conn.execute("SELECT name FROM pg_prepared_statements")}


async def test_every_value_arrives_exactly(store: PostgresStore, dsn: str) -> None:
    first = make_checkpoint("wire-é", 1, body=b"\x00\xff binary \x00")
    raised = [
        InterruptRecord(
            id="ï-1",
            thread=first.thread,
            checkpoint_id=first.id,
            key='a "quoted" key, with {braces} and \\ backslash',
            address="node:revue/tool:étape",
            kind="dynamic",
            status="pending",
            created_at=0.1 + 0.2,
            deadline=None,
            body=b"",
            tool=None,
        ),
        make_interrupt("ï-2", first, deadline=1e300),
    ]
    audit = [AuditEntry(kind="decision", actor=None, data=b"\x01\x02"),
             AuditEntry(kind="decision", actor="ünïcode", data=b"")]  # fmt: skip
    fence = make_fence("owner-ø", None, ttl=12.5)
    with psycopg.connect(dsn, autocommit=True) as conn:
        token = ops.append(conn, first, None, raised, [], fence, audit, 1000.25)
        assert "interlock_append" in _prepared(conn)  # it went the direct way
        second = make_checkpoint(first.thread, 2)
        assert (
            ops.append(
                conn,
                second,
                first.id,
                [],
                [resolve("ï-1", value=None), resolve("ï-2", "expired", b"\x00")],
                make_fence("owner-ø", token, ttl=12.5, release=True),
                [],
                1001.5,
            )
            == token
        )
    assert await store.get_checkpoint(first.thread, first.id) == first
    assert await store.get_checkpoint(first.thread) == second
    one, two = [await store.get_interrupt(i.id) for i in raised]
    assert one is not None and two is not None
    assert (one.key, one.address, one.created_at, one.deadline, one.body, one.tool) == (
        raised[0].key, raised[0].address, 0.1 + 0.2, None, b"", None
    )  # fmt: skip
    assert (one.status, one.resolution) == ("resolved", None)
    assert (two.deadline, two.status, two.resolution) == (1e300, "expired", b"\x00")
    entries = [e for e in await store.audit_log(thread=first.thread) if e.kind == "decision"]
    assert [(e.actor, e.data, e.at) for e in entries] == [(None, b"\x01\x02", 1000.25),
                                                          ("ünïcode", b"", 1000.25)]  # fmt: skip
    with psycopg.connect(dsn, autocommit=True) as conn:  # released: another owner takes it
        third = make_checkpoint(first.thread, 3)
        assert ops.append(conn, third, second.id, [], [], make_fence("b", None), [], 1002.0)


async def test_a_deallocated_statement_is_prepared_again(store: PostgresStore, dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        ops.append(conn, make_checkpoint("t", 1), None, [], [], None, [], 1.0)
        conn.execute("DEALLOCATE ALL")  # what psycopg sends after a rollback
        assert "interlock_append" not in _prepared(conn)
        ops.append(conn, make_checkpoint("t", 2), "t.0001", [], [], None, [], 2.0)
        assert "interlock_append" in _prepared(conn)
    head = await store.get_thread("t")
    assert head is not None and head.head_seq == 2


async def test_a_deallocated_statement_inside_a_group(store: PostgresStore, dsn: str) -> None:
    """The append that finds its statement gone has aborted the group's transaction: it goes
    back to its savepoint, prepares again and runs; the appends before it stay."""

    def append(seq: int, deallocate: bool = False) -> Any:
        def write(conn: ops.Conn) -> Any:
            if deallocate:
                conn.execute("DEALLOCATE ALL")
            parent = f"g.{seq - 1:04d}" if seq > 1 else None
            return ops.append(conn, make_checkpoint("g", seq), parent, [], [], None, [], seq)

        return write

    with psycopg.connect(dsn, autocommit=True) as conn:
        ops.append(conn, make_checkpoint("other", 1), None, [], [], None, [], 1.0)  # prepares
        outcomes = ops.append_group(
            conn, [append(1), append(2, deallocate=True), append(3)], durable=True
        )
        assert outcomes == [(None, None)] * 3
    assert [c.seq for c in await store.checkpoint_range("g", lo=1, hi=3)] == [1, 2, 3]


async def test_a_refused_append_in_a_group_leaves_the_others(
    store: PostgresStore, dsn: str
) -> None:
    """A refusal rolls back to the savepoint, after which psycopg deallocates everything on
    its next statement: the next append of the group still goes through."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        ops.append(conn, make_checkpoint("r", 1), None, [], [], None, [], 1.0)
        conn.execute("SELECT 1", prepare=True)  # psycopg now has a statement to deallocate
        psycopg_own = _prepared(conn) - {"interlock_append"}
        assert psycopg_own
        writes = [
            lambda c: ops.append(c, make_checkpoint("r", 2), "wrong", [], [], None, [], 2.0),
            lambda c: ops.append(c, make_checkpoint("r", 2), "r.0001", [], [], None, [], 2.0),
            lambda c: ops.append(c, make_checkpoint("r", 3), "r.0002", [], [], None, [], 3.0),
        ]
        (_, refused), *rest = ops.append_group(conn, writes, durable=True)
        assert isinstance(refused, ThreadBusy)
        assert rest == [(None, None)] * 2
        assert not psycopg_own & _prepared(conn)  # it did deallocate everything meanwhile
        assert "interlock_append" in _prepared(conn)
    head = await store.get_thread("r")
    assert head is not None and head.head_seq == 3


async def test_a_connection_in_another_encoding_takes_psycopg_s_path(
    store: PostgresStore, dsn: str
) -> None:
    record = make_checkpoint("latin-é", 1)
    with psycopg.connect(dsn, autocommit=True, client_encoding="LATIN1") as conn:
        ops.append(conn, record, None, [make_interrupt("à", record)], [], None, [], 1.0)
        assert "interlock_append" not in _prepared(conn)
    assert await store.get_checkpoint(record.thread) == record
    found = await store.get_interrupt("à")
    assert found is not None and found.thread == "latin-é"


async def test_a_store_without_prepared_statements_keeps_no_session_state(dsn: str) -> None:
    async with PostgresStore(dsn, prepare=False, max_size=1) as store:
        parent = None
        for seq in range(1, 8):  # past psycopg's threshold, had it been on
            record = make_checkpoint("unprepared", seq)
            await store.append_checkpoint(record, expected_head=parent)
            parent = record.id
        pool = store._pool
        assert pool is not None
        with pool.connection() as conn:
            assert _prepared(conn) == set()
        head = await store.get_thread("unprepared")
        assert head is not None and head.head_seq == 7


async def test_errors_keep_their_types(store: PostgresStore, dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        ops.append(conn, make_checkpoint("e", 1), None, [], [], None, [], 1.0)
        with pytest.raises(ThreadBusy):
            ops.append(conn, make_checkpoint("e", 2), "not the head", [], [], None, [], 2.0)
        taken = make_checkpoint("f", 1, id="e.0001")  # a checkpoint id already used
        with pytest.raises(StoreError, match="must be unique"):
            ops.append(conn, taken, None, [], [], None, [], 3.0)
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        with pytest.raises(psycopg.OperationalError):
            ops.append(conn, make_checkpoint("e", 2), "e.0001", [], [], None, [], 4.0)
        assert conn.broken


async def test_a_value_out_of_bigint_s_range_is_refused_by_the_server(
    store: PostgresStore, dsn: str
) -> None:
    """The binary encoding cannot hold it; psycopg's path sends it and the server refuses."""
    huge = msgspec.structs.replace(make_checkpoint("huge", 1), seq=2**63)
    with (
        psycopg.connect(dsn, autocommit=True) as conn,
        pytest.raises(psycopg.errors.NumericValueOutOfRange),
    ):
        ops.append(conn, huge, None, [], [], None, [], 1.0)
    with pytest.raises(StoreError, match="out of range"):
        await store.append_checkpoint(huge, expected_head=None)
    assert await store.get_thread("huge") is None
