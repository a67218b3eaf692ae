"""The SQLite schema of `SqliteStore` and its migrations (the statements it runs: `_sqlite_sql`).

The schema version lives in ``PRAGMA user_version``; ``PRAGMA application_id`` marks the file
as interlock's so that a store never migrates somebody else's database. To change the schema,
append a step to `MIGRATIONS`: the step at index ``i`` takes a database from version ``i`` to
``i + 1`` and runs inside the migration transaction.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from ._rows import sql_digest

__all__ = ["APPLICATION_ID", "MIGRATIONS", "SCHEMA_VERSION", "SchemaMismatch", "migrate"]

APPLICATION_ID: Final = 0x494C4B31
"""``PRAGMA application_id`` of an interlock database (ASCII ``ILK1``)."""

_V1: Final = (
    # Small rows looked up by key only: no rowid needed.
    """
    CREATE TABLE threads (
        thread     TEXT PRIMARY KEY,
        head_id    TEXT NOT NULL,
        head_seq   INTEGER NOT NULL,
        status     TEXT NOT NULL,
        updated_at REAL NOT NULL
    ) WITHOUT ROWID
    """,
    # A rowid table, not WITHOUT ROWID: bodies are large rows, which SQLite advises against
    # clustering. Measured with 20 interleaved threads, the rowid table appended 4 kB bodies
    # ~30% faster, looked up heads and ids faster and made a 5-12% smaller file; clustering
    # won only on range reads of 500 B bodies.
    """
    CREATE TABLE checkpoints (
        thread     TEXT NOT NULL,
        seq        INTEGER NOT NULL,
        id         TEXT NOT NULL UNIQUE,
        parent_id  TEXT,
        step       INTEGER NOT NULL,
        base_seq   INTEGER NOT NULL,
        created_at REAL NOT NULL,
        source     TEXT NOT NULL,
        status     TEXT NOT NULL,
        body       BLOB NOT NULL,
        PRIMARY KEY (thread, seq)
    )
    """,
    # A rowid table: the rowid is the insertion order that breaks created_at ties.
    """
    CREATE TABLE interrupts (
        id            TEXT PRIMARY KEY,
        thread        TEXT NOT NULL,
        checkpoint_id TEXT NOT NULL,
        key           TEXT,
        address       TEXT NOT NULL,
        kind          TEXT NOT NULL,
        status        TEXT NOT NULL,
        created_at    REAL NOT NULL,
        deadline      REAL,
        body          BLOB NOT NULL,
        resolved_at   REAL,
        resolution    BLOB
    )
    """,
    # The inbox across threads, and by key: partial, so they hold only pending interrupts.
    "CREATE INDEX interrupts_pending ON interrupts (created_at) WHERE status = 'pending'",
    "CREATE INDEX interrupts_pending_key ON interrupts (key, created_at) WHERE status = 'pending'",
    # Full, not partial: with status as an equality prefix it serves the per-thread inbox in
    # O(pending of the thread) and also lets delete_thread find resolved interrupts.
    "CREATE INDEX interrupts_thread ON interrupts (thread, status, created_at)",
)

_V2: Final = (
    # A request, from any process, that whoever runs the thread pauses it; the executor takes
    # (deletes) it when it sees it.
    """
    CREATE TABLE pause_requests (
        thread       TEXT PRIMARY KEY,
        kind         TEXT NOT NULL,
        requested_at REAL NOT NULL
    ) WITHOUT ROWID
    """,
)

_V3: Final = (
    # The lease: who runs the thread now and until when; the fencing token only grows.
    "ALTER TABLE threads ADD COLUMN lease_owner TEXT",
    "ALTER TABLE threads ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE threads ADD COLUMN lease_expires REAL NOT NULL DEFAULT 0",
    # The tool an interrupt gates, for the inbox filter.
    "ALTER TABLE interrupts ADD COLUMN tool TEXT",
    "CREATE INDEX interrupts_pending_tool ON interrupts (tool, created_at) "
    "WHERE status = 'pending'",
    # Side effects: started before the call, done after it.
    """
    CREATE TABLE effects (
        thread      TEXT NOT NULL,
        key         TEXT NOT NULL,
        name        TEXT NOT NULL,
        status      TEXT NOT NULL,
        attempt     INTEGER NOT NULL,
        started_at  REAL NOT NULL,
        finished_at REAL,
        result      BLOB,
        PRIMARY KEY (thread, key)
    )
    """,
    # The audit log: one hash chain per thread, never updated or deleted by the store.
    """
    CREATE TABLE audit (
        thread TEXT NOT NULL,
        seq    INTEGER NOT NULL,
        at     REAL NOT NULL,
        kind   TEXT NOT NULL,
        actor  TEXT,
        data   BLOB NOT NULL,
        prev   BLOB NOT NULL,
        hash   BLOB NOT NULL,
        PRIMARY KEY (thread, seq)
    )
    """,
)

_V4: Final = (
    # Digests of each row's columns (see `interlock.stores._rows`), checked on every read: a
    # damaged file fails a read rather than answering it with another row. Rows written
    # before get theirs now, from the values they hold.
    "ALTER TABLE threads ADD COLUMN digest BLOB",
    "ALTER TABLE threads ADD COLUMN lease_digest BLOB",
    "ALTER TABLE checkpoints ADD COLUMN digest BLOB",
    "ALTER TABLE interrupts ADD COLUMN digest BLOB",
    "UPDATE threads SET "
    "digest = interlock_digest(thread, head_id, head_seq, status, updated_at), "
    "lease_digest = interlock_digest(thread, lease_owner, lease_token, lease_expires)",
    "UPDATE checkpoints SET digest = interlock_digest(thread, seq, id, parent_id, step, "
    "base_seq, created_at, source, status, body)",
    "UPDATE interrupts SET digest = interlock_digest(id, thread, checkpoint_id, key, address, "
    "kind, status, created_at, deadline, body, resolved_at, resolution, tool)",
)

_V5: Final = (
    # The change feed (`Store.changes`): a row per change an append makes, written in its
    # transaction. Appends hold the write lock, so seq goes up in commit order and a reader
    # that has seen seq n has seen every change before it. AUTOINCREMENT: a seq is never used
    # twice, even after pruning removed the newest rows (a follower's cursor names the last
    # one it saw). The feed starts empty in a file written before this version.
    """
    CREATE TABLE changes (
        seq           INTEGER PRIMARY KEY AUTOINCREMENT,
        at            REAL NOT NULL,
        kind          TEXT NOT NULL,
        thread        TEXT NOT NULL,
        checkpoint_id TEXT NOT NULL,
        interrupt_id  TEXT,
        actor         TEXT,
        digest        BLOB NOT NULL
    )
    """,
)

_V6: Final = (
    # `Store.threads(status="failed")`: the threads whose continuation could not run, or
    # whose node raised, each waiting for a fix and a resume. Few, so an index of their own.
    "CREATE INDEX threads_failed ON threads (thread) WHERE status = 'failed'",
)

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (_V1, _V2, _V3, _V4, _V5, _V6)
"""``MIGRATIONS[i]`` takes the schema from version ``i`` to ``i + 1``."""

SCHEMA_VERSION: Final = len(MIGRATIONS)
"""The version this code reads and writes."""


class SchemaMismatch(Exception):
    """Raised by `migrate` when the file is not a database this code may use."""


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the database to `SCHEMA_VERSION` in one ``BEGIN IMMEDIATE`` transaction.

    Safe to run from several processes at once: the version is read again under the write
    lock, so exactly one of them migrates.

    Returns:
        The version the database had before.

    Raises:
        SchemaMismatch: The file belongs to another application or a newer interlock.
    """
    found = _user_version(conn)
    if found == SCHEMA_VERSION:
        _check_application_id(conn)
        _check_tables(conn, found)
        return found
    conn.create_function("interlock_digest", -1, _digest, deterministic=True)
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = _user_version(conn)
        if found > SCHEMA_VERSION:
            raise SchemaMismatch(
                f"schema version {found} was written by a newer interlock (this one knows up "
                f"to {SCHEMA_VERSION}); upgrade interlock to open it"
            )
        if found == 0:
            _check_empty(conn)
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        else:
            _check_application_id(conn)
            _check_tables(conn, found)
        for step in MIGRATIONS[found:]:
            for statement in step:
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.rollback()
        raise
    return found


def _digest(*values: object) -> bytes:
    return sql_digest(*values)


def _user_version(conn: sqlite3.Connection) -> int:
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    return int(version)


def _check_application_id(conn: sqlite3.Connection) -> None:
    (app_id,) = conn.execute("PRAGMA application_id").fetchone()
    if app_id != APPLICATION_ID:
        raise SchemaMismatch(
            f"the database belongs to another application (application_id {app_id:#x}); "
            "give SqliteStore a file of its own"
        )


def _check_tables(conn: sqlite3.Connection, version: int) -> None:
    # The header says interlock wrote a schema here: its tables must still be there, or the
    # file was damaged (and must not be taken for an empty store).
    (tables,) = conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
        "('threads', 'checkpoints', 'interrupts')"
    ).fetchone()
    if tables != 3:
        raise SchemaMismatch(
            f"its header says interlock schema version {version}, but the tables of that schema "
            "are gone: the file was damaged. Restore it from a backup"
        )


def _check_empty(conn: sqlite3.Connection) -> None:
    (tables,) = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    if tables:
        raise SchemaMismatch(
            "the database already has tables of another application; "
            "give SqliteStore a file of its own"
        )
