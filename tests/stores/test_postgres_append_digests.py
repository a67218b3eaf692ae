"""``interlock_append``'s digests on PostgreSQL: inlined into the function's plans (schema
version 12), the same bytes as before, and still refusing damaged rows."""

from __future__ import annotations

import msgspec
import psycopg
import pytest

from interlock._errors import CheckpointCorrupt
from interlock.stores import CheckpointRecord, Fence, InterruptRecord, Resolution
from interlock.stores import _postgres_schema as pg_schema
from interlock.stores._base import CheckpointStatus
from interlock.stores._postgres import PostgresStore
from interlock.testing._conformance._common import make_checkpoint

pytestmark = pytest.mark.anyio

# Across msgpack's size classes of a str (fixstr, str 8, str 16): the branches of
# interlock_field(TEXT), each of which must give the client's bytes.
THREAD = "t" * 40
OWNER = "o" * 300


def checkpoint(seq: int, status: CheckpointStatus = "ready") -> CheckpointRecord:
    parent = f"c{seq - 1}" if seq > 1 else None
    return make_checkpoint(THREAD, seq, id=f"c{seq}", parent_id=parent, status=status)


def question(at: CheckpointRecord, n: int) -> InterruptRecord:
    return InterruptRecord(
        id=f"q{n}",
        thread=THREAD,
        checkpoint_id=at.id,
        key="k\u00e9" * 20,
        address="node:review/tool:mail:" + "c" * 300,
        kind="dynamic",
        status="pending",
        created_at=1000.5 + n,
        deadline=None,
        body=b"?" * 300,
        tool="mail",
    )


def answer(n: int) -> Resolution:
    return Resolution(id=f"q{n}", status="resolved", resolved_at=2000.0 + n, resolution=b"yes")


async def start(store: PostgresStore) -> int | None:
    """A thread whose head asks two questions, under a lease: every digest the append checks."""
    one = checkpoint(1)
    return await store.append_checkpoint(
        one,
        expected_head=None,
        new_interrupts=[question(one, 1), question(one, 2)],
        fence=Fence(owner=OWNER, token=None, ttl=3600.0),
    )


def rows(dsn: str) -> list[object]:
    with psycopg.connect(dsn) as conn:
        return [
            conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
            for table in ("threads", "checkpoints", "interrupts")
        ]


async def test_the_digest_helpers_are_inlined_into_their_callers(dsn: str) -> None:
    # Not inlined, each call of interlock_field(TEXT) ran as a function of its own, its body
    # planned again in every transaction: most of the server's time in an append.
    async with PostgresStore(dsn) as store:
        await start(store)
    with psycopg.connect(dsn) as conn:
        for table, columns in [
            ("threads", "thread, head_id, head_seq, status, updated_at"),
            ("interrupts", "id, key, deadline, body, resolution, tool"),
        ]:
            fields = " || ".join(f"interlock_field({c})" for c in columns.split(", "))
            n = len(columns.split(", "))
            plan = conn.execute(
                f"EXPLAIN (VERBOSE, COSTS OFF) SELECT interlock_digest({n}, {fields}) FROM {table}"
            ).fetchall()
            text = "\n".join(line for (line,) in plan)
            assert "interlock_field" not in text and "interlock_digest" not in text, text
            assert "convert_to" in text and "sha256" in text


async def test_a_database_of_version_11_migrates_and_its_digests_still_hold(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as old:
        old.setattr(pg_schema, "MIGRATIONS", pg_schema.MIGRATIONS[:11])
        old.setattr(pg_schema, "SCHEMA_VERSION", 11)
        async with PostgresStore(dsn) as store:
            token = await start(store)
    written = rows(dsn)
    async with PostgresStore(dsn) as store:
        assert await store.migrate() == []  # opening applied version 12
        assert rows(dsn) == written  # no row, and so no digest, was rewritten
        # The server recomputes the head's, the lease's and both questions' digests from the
        # rows version 11 wrote, and checks them, before it moves any of them.
        two = checkpoint(2, status="done")
        await store.append_checkpoint(
            two,
            expected_head="c1",
            resolutions=[answer(1), answer(2)],
            fence=Fence(owner=OWNER, token=token, ttl=3600.0, release=True),
        )
        head = await store.get_checkpoint(THREAD)
        assert head is not None and head.id == "c2"
        assert await store.pending() == []
        q2 = await store.get_interrupt("q2")
        assert q2 is not None and q2.status == "resolved" and q2.resolution == b"yes"
        thread = await store.get_thread(THREAD)
        assert thread is not None and thread.status == "done"
    with psycopg.connect(dsn) as conn:
        found = conn.execute(
            "SELECT max(version), (SELECT provolatile FROM pg_proc "
            "WHERE oid = 'interlock_field(text)'::regprocedure) FROM schema_version"
        ).fetchone()
        assert found == (pg_schema.SCHEMA_VERSION, "s")


@pytest.mark.parametrize(
    ("damage", "what"),
    [
        ("UPDATE threads SET updated_at = updated_at + 1", "the head of the thread"),
        ("UPDATE threads SET lease_owner = 'someone else'", "the head of the thread"),
        ("UPDATE threads SET head_id = 'c1 '", "the head of the thread"),
        ("UPDATE interrupts SET address = address || '!' WHERE id = 'q2'", "interrupt q2"),
        ("UPDATE interrupts SET key = NULL WHERE id = 'q2'", "interrupt q2"),
    ],
)
async def test_an_append_still_refuses_a_damaged_row(dsn: str, damage: str, what: str) -> None:
    async with PostgresStore(dsn) as store:
        token = await start(store)
        with psycopg.connect(dsn) as conn:
            conn.execute(damage)  # a change that did not go through the store: no new digest
        with pytest.raises(CheckpointCorrupt, match=what):
            await store.append_checkpoint(
                checkpoint(2),
                expected_head="c1",
                resolutions=[answer(1), answer(2)],
                fence=Fence(owner=OWNER, token=token, ttl=3600.0),
            )
    # Refused whole: nothing of the append was written.
    assert len(rows(dsn)[1]) == 1


async def test_an_intact_row_is_not_taken_for_a_damaged_one(dsn: str) -> None:
    # The same edits, made through the store, keep every digest right: the refusals above are
    # the damage's, not the inlined digests'.
    async with PostgresStore(dsn) as store:
        token = await start(store)
        two = msgspec.structs.replace(checkpoint(2), created_at=1002.25)
        await store.append_checkpoint(
            two,
            expected_head="c1",
            resolutions=[answer(2)],
            fence=Fence(owner=OWNER, token=token, ttl=3600.0),
        )
        three = checkpoint(3)
        await store.append_checkpoint(
            three,
            expected_head="c2",
            resolutions=[answer(1)],
            fence=Fence(owner=OWNER + "!", token=token, ttl=3600.0),
        )
        head = await store.get_checkpoint(THREAD)
        assert head is not None and head.id == "c3"
        assert await store.pending() == []
