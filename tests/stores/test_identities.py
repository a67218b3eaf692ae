"""Principals and tokens across connections: concurrent writers through stores of their own,
a follower that pages through the identity changes while they commit, and databases written
before the identities existed.

`interlock.testing.StoreConformance` checks each store on its own (`IdentityConformance`).
"""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import closing
from pathlib import Path

import anyio
import psycopg
import pytest

from interlock import ContactTaken, PrincipalExists, StoreError
from interlock.stores import (
    CheckpointRecord,
    IdentityChange,
    PostgresStore,
    PrincipalRecord,
    SqliteStore,
    Store,
)
from interlock.stores import _postgres_schema as pg_schema
from interlock.stores import _sqlite_schema as sqlite_schema

pytestmark = pytest.mark.anyio

WRITERS = 4
ROUNDS = 15


def digest(secret: str) -> str:
    return "sha256:" + hashlib.sha256(secret.encode()).hexdigest()


def checkpoint(thread: str) -> CheckpointRecord:
    return CheckpointRecord(
        thread=thread,
        id=f"{thread}.1",
        parent_id=None,
        seq=1,
        step=-1,
        base_seq=1,
        created_at=1000.0,
        source="input",
        status="ready",
        body=b"body",
    )


async def follow_while_writing(opened: list[Store]) -> None:
    """Writers, each on a store of its own, add principals and tokens and revoke some, while a
    follower on another pages through the changes a few at a time; in the end the follower
    holds exactly what the store holds."""
    writers, follower = opened[:-1], opened[-1]
    held: dict[tuple[str, str], IdentityChange] = {}
    cursor = 0
    done = anyio.Event()

    def key(record: IdentityChange) -> tuple[str, str]:
        return ("p", record.key) if isinstance(record, PrincipalRecord) else ("t", record.id)

    async def write(n: int, store: Store) -> None:
        for r in range(ROUNDS):
            name = f"w{n}-{r}"
            await store.add_principal(name, role="approver")
            await store.add_token(f"{name}-t", hash=digest(name), principal=name)
            if r % 3 == 0:
                await store.revoke_tokens(principal=name)
            if r % 4 == 0:
                await store.update_principal(name, disabled=True)

    async def follow() -> None:
        nonlocal cursor
        while True:
            finished = done.is_set()
            while page := await follower.identity_changes(after=cursor, limit=3):
                revs = [r.rev for r in page]
                assert revs == sorted(revs) and revs[0] > cursor
                for record in page:
                    held[key(record)] = record
                cursor = page[-1].rev
            if finished:
                return
            await anyio.sleep(0.005)

    async with anyio.create_task_group() as group:
        group.start_soon(follow)
        async with anyio.create_task_group() as writing:
            for n, store in enumerate(writers):
                writing.start_soon(write, n, store)
        done.set()
    everything = await follower.identity_changes()
    assert held == {key(r): r for r in everything}
    assert len(everything) == 2 * WRITERS * ROUNDS


async def test_a_sqlite_follower_misses_no_change_of_other_connections(tmp_path: Path) -> None:
    path = tmp_path / "ids.db"
    opened: list[Store] = [SqliteStore(path) for _ in range(WRITERS + 1)]
    try:
        await follow_while_writing(opened)
    finally:
        for store in opened:
            await store.close()


async def test_a_postgres_follower_misses_no_change_of_other_connections(dsn: str) -> None:
    opened: list[Store] = [PostgresStore(dsn) for _ in range(WRITERS + 1)]
    try:
        await follow_while_writing(opened)
    finally:
        for store in opened:
            await store.close()


async def test_one_name_is_one_principal_across_postgres_connections(dsn: str) -> None:
    stores = [PostgresStore(dsn) for _ in range(6)]
    outcomes: list[str] = []

    async def add(store: Store, name: str) -> None:
        try:
            await store.add_principal(name, role="viewer")
            outcomes.append("added")
        except PrincipalExists:
            outcomes.append("exists")

    try:
        async with anyio.create_task_group() as group:
            names = ("ana", "Ana", "ANA", "aNa", "anA", "\uff41na")
            for store, name in zip(stores, names, strict=True):
                group.start_soon(add, store, name)
        assert sorted(outcomes) == ["added"] + ["exists"] * 5
        assert len(await stores[0].principals()) == 1
    finally:
        for store in stores:
            await store.close()


async def test_a_sqlite_file_of_version_6_gets_the_identities(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "v6.db"
    with monkeypatch.context() as old:
        old.setattr(sqlite_schema, "MIGRATIONS", sqlite_schema.MIGRATIONS[:6])
        old.setattr(sqlite_schema, "SCHEMA_VERSION", 6)
        async with SqliteStore(path) as store:
            await store.append_checkpoint(checkpoint("t"), expected_head=None)
    async with SqliteStore(path) as store:
        assert await store.identity_changes() == []
        assert (await store.get_thread("t")) is not None
        ana = await store.add_principal("ana", role="admin")
        assert ana.rev == 1
        assert await store.identity_changes() == [ana]


async def test_a_postgres_database_of_version_9_gets_the_identities(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as old:
        old.setattr(pg_schema, "MIGRATIONS", pg_schema.MIGRATIONS[:9])
        old.setattr(pg_schema, "SCHEMA_VERSION", 9)
        async with PostgresStore(dsn) as store:
            await store.append_checkpoint(checkpoint("t"), expected_head=None)
    async with PostgresStore(dsn) as store:
        assert await store.migrate() == []  # opening applied version 10
        assert await store.identity_changes() == []
        assert (await store.get_thread("t")) is not None
        ana = await store.add_principal("ana", role="admin")
        token = await store.add_token("t1", hash=digest("s"), principal="ana")
        assert await store.identity_changes() == [ana, token]
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
        assert [v for (v,) in rows] == list(range(1, pg_schema.SCHEMA_VERSION + 1))


async def test_a_damaged_identity_row_is_reported_not_guessed(tmp_path: Path) -> None:
    path = tmp_path / "ids.db"
    async with SqliteStore(path) as store:
        await store.add_principal("ana", role="approver")
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE principals SET role = 'root'")
    async with SqliteStore(path) as store:
        with pytest.raises(StoreError, match="identities are damaged: the role of principal"):
            await store.get_principal("ana")


async def test_a_sqlite_file_of_version_7_gets_contacts_and_channel_messages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "v7.db"
    with monkeypatch.context() as old:
        old.setattr(sqlite_schema, "MIGRATIONS", sqlite_schema.MIGRATIONS[:7])
        old.setattr(sqlite_schema, "SCHEMA_VERSION", 7)
        async with SqliteStore(path) as store:
            await store.append_checkpoint(checkpoint("t"), expected_head=None)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.executemany(VERSION_7_PRINCIPAL.replace("%s", "?"), OLD_PRINCIPALS)
        conn.execute("UPDATE identity_revision SET rev = 2")
    async with SqliteStore(path) as store:
        await contacts_and_messages_after_migration(store)
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == sqlite_schema.SCHEMA_VERSION


async def test_a_postgres_database_of_version_10_gets_contacts_and_channel_messages(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as old:
        old.setattr(pg_schema, "MIGRATIONS", pg_schema.MIGRATIONS[:10])
        old.setattr(pg_schema, "SCHEMA_VERSION", 10)
        async with PostgresStore(dsn) as store:
            await store.append_checkpoint(checkpoint("t"), expected_head=None)
    with psycopg.connect(dsn) as conn:
        conn.cursor().executemany(VERSION_7_PRINCIPAL, OLD_PRINCIPALS)
        conn.execute("UPDATE identity_revision SET rev = 2")
    async with PostgresStore(dsn) as store:
        assert await store.migrate() == []  # opening applied version 11
        await contacts_and_messages_after_migration(store)
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
        assert [v for (v,) in rows] == list(range(1, pg_schema.SCHEMA_VERSION + 1))


# A principal's row as the schema had it before the contact addresses (SQLite's version 7,
# PostgreSQL's 10), written as those versions' code wrote it.
VERSION_7_PRINCIPAL = (
    "INSERT INTO principals (name_key, name, display_name, role, group_names, disabled, "
    "created_at, rev) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)
OLD_PRINCIPALS = [
    ("ana", "Ana", "", "admin", '["ops"]', False, 1000.0, 1),
    ("ben", "ben", "Ben", "viewer", "[]", False, 1001.0, 2),
]


async def contacts_and_messages_after_migration(store: Store) -> None:
    """The principals written before the migration are there, with no contact address; they
    take one each, uniquely; channel messages are claimed once and go with their thread."""
    ana = PrincipalRecord(name="Ana", role="admin", groups=("ops",), created_at=1000.0, rev=1)
    ben = PrincipalRecord(name="ben", display_name="Ben", role="viewer", created_at=1001.0, rev=2)
    assert await store.principals() == [ana, ben]
    mailed = await store.update_principal("ana", email="Ana@Example.com", slack_user="U1ANA")
    assert (mailed.name, mailed.groups, mailed.rev) == ("Ana", ("ops",), ben.rev + 1)
    assert await store.principal_by_contact(email="ana@example.com") == mailed
    assert await store.principal_by_contact(slack_user="U1ANA") == mailed
    with pytest.raises(ContactTaken):
        await store.update_principal("ben", email="ANA@example.com")
    # Principals without an address are many NULLs, which the unique indexes allow.
    assert await store.add_principal("carla", role="viewer") is not None
    assert await store.identity_changes(after=ben.rev) == [
        mailed,
        await store.get_principal("carla"),
    ]
    assert await store.claim_channel_message("slack #approvals", "i1", thread="t")
    assert not await store.claim_channel_message("slack #approvals", "i1", thread="t")
    posted = await store.set_channel_message("slack #approvals", "i1", ref='{"ts": "1.2"}')
    assert posted.ref == '{"ts": "1.2"}'
    await store.delete_thread("t")
    assert await store.get_channel_message("slack #approvals", "i1") is None
