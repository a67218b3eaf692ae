"""The PostgreSQL schema of `PostgresStore`, its migrations and the SQL it runs.

The applied versions are rows of ``schema_version``. To change the schema, append a step to
`MIGRATIONS`: the step at index ``i`` takes a database from version ``i`` to ``i + 1``. All
pending steps run in one transaction that first takes a transaction-scoped advisory lock, so
concurrent migrators queue up and exactly one of them applies each step. Nothing here needs
session state (no session locks, no prepared statements): it works behind a transaction-pooling
proxy.
"""

from __future__ import annotations

import time
from typing import Any, Final

from psycopg import AsyncConnection

from ._rows import (
    AUDIT_COLUMNS,
    CHECKPOINT_COLUMNS,
    EFFECT_COLUMNS,
    INTERRUPT_COLUMNS,
    pending_filters,
)

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SchemaMismatch", "migrate"]

MIGRATION_LOCK: Final = 0x494C4B31
"""Key of the ``pg_advisory_xact_lock`` that serialises migrations (ASCII ``ILK1``)."""

_V1: Final = (
    """
    CREATE TABLE threads (
        thread     TEXT PRIMARY KEY,
        head_id    TEXT NOT NULL,
        head_seq   BIGINT NOT NULL,
        status     TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    )
    """,
    """
    CREATE TABLE checkpoints (
        thread     TEXT NOT NULL,
        seq        BIGINT NOT NULL,
        id         TEXT NOT NULL UNIQUE,
        parent_id  TEXT,
        step       BIGINT NOT NULL,
        base_seq   BIGINT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        source     TEXT NOT NULL,
        status     TEXT NOT NULL,
        body       BYTEA NOT NULL,
        PRIMARY KEY (thread, seq)
    )
    """,
    # ord is the insertion order that breaks created_at ties in the inbox.
    """
    CREATE TABLE interrupts (
        id            TEXT PRIMARY KEY,
        ord           BIGSERIAL NOT NULL,
        thread        TEXT NOT NULL,
        checkpoint_id TEXT NOT NULL,
        key           TEXT,
        address       TEXT NOT NULL,
        kind          TEXT NOT NULL,
        status        TEXT NOT NULL,
        created_at    DOUBLE PRECISION NOT NULL,
        deadline      DOUBLE PRECISION,
        body          BYTEA NOT NULL,
        resolved_at   DOUBLE PRECISION,
        resolution    BYTEA
    )
    """,
    # The inbox across threads, and by key: partial, so they hold only pending interrupts.
    "CREATE INDEX interrupts_pending ON interrupts (created_at, ord) WHERE status = 'pending'",
    "CREATE INDEX interrupts_pending_key ON interrupts (key, created_at, ord) "
    "WHERE status = 'pending'",
    # Full, not partial: with status as an equality prefix it serves the per-thread inbox in
    # O(pending of the thread) and also lets delete_thread find resolved interrupts.
    "CREATE INDEX interrupts_thread ON interrupts (thread, status, created_at, ord)",
)

_V2: Final = (
    """
    CREATE TABLE pause_requests (
        thread       TEXT PRIMARY KEY,
        kind         TEXT NOT NULL,
        requested_at DOUBLE PRECISION NOT NULL
    )
    """,
)

_V3: Final = (
    # The lease: who runs the thread now and until when; the fencing token only grows.
    "ALTER TABLE threads ADD COLUMN lease_owner TEXT",
    "ALTER TABLE threads ADD COLUMN lease_token BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE threads ADD COLUMN lease_expires DOUBLE PRECISION NOT NULL DEFAULT 0",
    "ALTER TABLE interrupts ADD COLUMN tool TEXT",
    "CREATE INDEX interrupts_pending_tool ON interrupts (tool, created_at, ord) "
    "WHERE status = 'pending'",
    """
    CREATE TABLE effects (
        thread      TEXT NOT NULL,
        key         TEXT NOT NULL,
        name        TEXT NOT NULL,
        status      TEXT NOT NULL,
        attempt     BIGINT NOT NULL,
        started_at  DOUBLE PRECISION NOT NULL,
        finished_at DOUBLE PRECISION,
        result      BYTEA,
        PRIMARY KEY (thread, key)
    )
    """,
    """
    CREATE TABLE audit (
        thread TEXT NOT NULL,
        seq    BIGINT NOT NULL,
        at     DOUBLE PRECISION NOT NULL,
        kind   TEXT NOT NULL,
        actor  TEXT,
        data   BYTEA NOT NULL,
        prev   BYTEA NOT NULL,
        hash   BYTEA NOT NULL,
        PRIMARY KEY (thread, seq)
    )
    """,
)

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (_V1, _V2, _V3)
"""``MIGRATIONS[i]`` takes the schema from version ``i`` to ``i + 1``."""

SCHEMA_VERSION: Final = len(MIGRATIONS)
"""The version this code reads and writes."""


class SchemaMismatch(Exception):
    """Raised by `migrate` when the database is not one this code may use."""


async def migrate(conn: AsyncConnection[Any]) -> list[int]:
    """Bring the database to `SCHEMA_VERSION` in one transaction; safe to run concurrently.

    Returns:
        The versions this call applied (empty when the schema was current).

    Raises:
        SchemaMismatch: The schema was written by a newer interlock, or the tables of another
            application are in the way.
    """
    applied: list[int] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        # Under the lock: whoever got here first has committed its versions already.
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            "version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
        )
        cur = await conn.execute("SELECT coalesce(max(version), 0) FROM schema_version")
        row = await cur.fetchone()
        found = 0 if row is None else int(row[0])
        if found > SCHEMA_VERSION:
            raise SchemaMismatch(
                f"schema version {found} was written by a newer interlock (this one knows up "
                f"to {SCHEMA_VERSION}); upgrade interlock to use this database"
            )
        if found == 0:
            cur = await conn.execute("SELECT to_regclass('threads') IS NOT NULL")
            row = await cur.fetchone()
            if row is not None and row[0]:
                raise SchemaMismatch(
                    "a table 'threads' exists but interlock never migrated this schema; give "
                    "PostgresStore a database or schema of its own (e.g. options=-csearch_path=…)"
                )
        for version, step in enumerate(MIGRATIONS[found:], start=found + 1):
            for statement in step:
                await conn.execute(statement)
            await conn.execute(
                "INSERT INTO schema_version (version, applied_at) VALUES (%s, %s)",
                (version, time.time()),
            )
            applied.append(version)
    return applied


INSERT_THREAD: Final = (
    "INSERT INTO threads (thread, head_id, head_seq, status, updated_at, lease_owner, "
    "lease_token, lease_expires) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (thread) DO NOTHING"
)
SELECT_HEAD_AND_LEASE: Final = (
    "SELECT head_id, head_seq, lease_owner, lease_token, lease_expires FROM threads "
    "WHERE thread = %s FOR UPDATE"
)
MOVE_HEAD: Final = (
    "UPDATE threads SET head_id = %s, head_seq = %s, status = %s, updated_at = %s, "
    "lease_owner = %s, lease_token = %s, lease_expires = %s WHERE thread = %s"
)
SELECT_LEASE: Final = (
    "SELECT lease_owner, lease_token, lease_expires FROM threads WHERE thread = %s FOR UPDATE"
)
SET_LEASE: Final = (
    "UPDATE threads SET lease_owner = %s, lease_token = %s, lease_expires = %s WHERE thread = %s"
)
SELECT_EFFECT: Final = f"SELECT {EFFECT_COLUMNS} FROM effects WHERE thread = %s AND key = %s"
INSERT_EFFECT: Final = (
    f"INSERT INTO effects ({EFFECT_COLUMNS}) VALUES (%s, %s, %s, 'started', 1, %s, NULL, NULL) "
    f"ON CONFLICT (thread, key) DO NOTHING RETURNING {EFFECT_COLUMNS}"
)
RESTART_EFFECT: Final = (
    "UPDATE effects SET attempt = attempt + 1, started_at = %s "
    f"WHERE thread = %s AND key = %s AND status = 'started' RETURNING {EFFECT_COLUMNS}"
)
FINISH_EFFECT: Final = (
    "UPDATE effects SET status = 'done', finished_at = %s, result = %s "
    "WHERE thread = %s AND key = %s AND status = 'started'"
)
AUDIT_TAIL: Final = "SELECT seq, hash FROM audit WHERE thread = %s ORDER BY seq DESC LIMIT 1"
INSERT_AUDIT: Final = f"INSERT INTO audit ({AUDIT_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
AUDIT_ALL: Final = (
    f"SELECT {AUDIT_COLUMNS} FROM audit WHERE (thread, seq) > (%s, %s) "
    "ORDER BY thread, seq LIMIT %s"
)
AUDIT_OF_THREAD: Final = (
    f"SELECT {AUDIT_COLUMNS} FROM audit WHERE thread = %s AND seq > %s ORDER BY seq LIMIT %s"
)
SELECT_THREAD: Final = (
    "SELECT thread, head_id, head_seq, status, updated_at FROM threads WHERE thread = %s"
)
INSERT_CHECKPOINT: Final = (
    f"INSERT INTO checkpoints ({CHECKPOINT_COLUMNS}) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
RESOLVE: Final = (
    "UPDATE interrupts SET status = %s, resolved_at = %s, resolution = %s "
    "WHERE id = %s AND thread = %s AND status = 'pending'"
)
SELECT_INTERRUPT_STATUS: Final = "SELECT status FROM interrupts WHERE id = %s AND thread = %s"
INSERT_INTERRUPT: Final = (
    f"INSERT INTO interrupts ({INTERRUPT_COLUMNS}) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)

SELECT_HEAD_CHECKPOINT: Final = (
    f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints "
    "WHERE thread = %(thread)s "
    "AND seq = (SELECT head_seq FROM threads WHERE thread = %(thread)s)"
)
SELECT_CHECKPOINT: Final = (
    f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE id = %s AND thread = %s"
)
SELECT_RANGE: Final = (
    f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints "
    "WHERE thread = %s AND seq >= %s AND seq <= %s ORDER BY seq"
)
SELECT_PAGE: Final = (
    f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints "
    "WHERE thread = %s AND seq < %s ORDER BY seq DESC LIMIT %s"
)
SELECT_INTERRUPT: Final = f"SELECT {INTERRUPT_COLUMNS} FROM interrupts WHERE id = %s"

# One statement per filter combination; each matches one index in (created_at, ord) order.
_PENDING: Final = f"SELECT {INTERRUPT_COLUMNS} FROM interrupts WHERE "


def pending_query(
    thread: str | None,
    key: str | None,
    limit: int,
    after: str | None,
    deadline_before: float | None,
    tool: str | None = None,
    older_than: float | None = None,
) -> tuple[str, tuple[object, ...]]:
    """The inbox query for these filters (the partial indexes serve it)."""
    where, params = pending_filters(
        thread=thread,
        key=key,
        after=after,
        deadline_before=deadline_before,
        mark="%s",
        tiebreak="ord",
        tool=tool,
        older_than=older_than,
    )
    query = f"{_PENDING}{' AND '.join(where)} ORDER BY created_at, ord LIMIT %s"
    return query, (*params, limit)


PENDING_IDS_OF_THREAD: Final = (
    "SELECT id FROM interrupts WHERE thread = %s AND status = 'pending' ORDER BY created_at, ord"
)

REQUEST_PAUSE: Final = """
    INSERT INTO pause_requests (thread, kind, requested_at)
    SELECT %(thread)s, %(kind)s, %(at)s
    WHERE EXISTS (SELECT 1 FROM threads WHERE thread = %(thread)s)
    ON CONFLICT (thread) DO UPDATE SET
        kind = CASE WHEN excluded.kind = 'forced' THEN 'forced' ELSE pause_requests.kind END,
        requested_at = excluded.requested_at
"""
TAKE_PAUSE: Final = "DELETE FROM pause_requests WHERE thread = %s RETURNING kind"

EXPIRED_THREADS: Final = (
    "SELECT thread FROM threads WHERE status = 'done' AND updated_at < %s "
    "ORDER BY updated_at LIMIT %s FOR UPDATE SKIP LOCKED"
)

DELETE_THREAD: Final = (
    # The threads row first, as every append locks it first: one lock order, no deadlock.
    "DELETE FROM threads WHERE thread = %s",
    "DELETE FROM pause_requests WHERE thread = %s",
    "DELETE FROM effects WHERE thread = %s",
    "DELETE FROM interrupts WHERE thread = %s",
    "DELETE FROM checkpoints WHERE thread = %s",
)
