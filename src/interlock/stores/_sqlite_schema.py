"""The SQLite schema of `SqliteStore`, its migrations and the SQL it runs.

The schema version lives in ``PRAGMA user_version``; ``PRAGMA application_id`` marks the file
as interlock's so that a store never migrates somebody else's database. To change the schema,
append a step to `MIGRATIONS`: the step at index ``i`` takes a database from version ``i`` to
``i + 1`` and runs inside the migration transaction.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from ._rows import (
    AUDIT_COLUMNS,
    CHECKPOINT_COLUMNS,
    EFFECT_COLUMNS,
    INTERRUPT_COLUMNS,
    THREAD_COLUMNS,
    pending_filters,
    sql_digest,
)

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

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (_V1, _V2, _V3, _V4)
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


# The statements below are reused verbatim so sqlite3's statement cache prepares each once.

INSERT_THREAD: Final = (
    "INSERT INTO threads (thread, head_id, head_seq, status, updated_at, digest, lease_owner, "
    "lease_token, lease_expires, lease_digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (thread) DO NOTHING"
)
SELECT_HEAD_AND_LEASE: Final = (
    f"SELECT {THREAD_COLUMNS}, lease_owner, lease_token, lease_expires, lease_digest "
    "FROM threads WHERE thread = ?"
)
MOVE_HEAD: Final = (
    "UPDATE threads SET head_id = ?, head_seq = ?, status = ?, updated_at = ?, digest = ?, "
    "lease_owner = ?, lease_token = ?, lease_expires = ?, lease_digest = ? WHERE thread = ?"
)
SELECT_LEASE: Final = (
    "SELECT lease_owner, lease_token, lease_expires, lease_digest FROM threads WHERE thread = ?"
)
SET_LEASE: Final = (
    "UPDATE threads SET lease_owner = ?, lease_token = ?, lease_expires = ?, lease_digest = ? "
    "WHERE thread = ?"
)
SELECT_EFFECT: Final = f"SELECT {EFFECT_COLUMNS} FROM effects WHERE thread = ? AND key = ?"
INSERT_EFFECT: Final = (
    f"INSERT INTO effects ({EFFECT_COLUMNS}) VALUES (?, ?, ?, 'started', 1, ?, NULL, NULL)"
)
RESTART_EFFECT: Final = (
    "UPDATE effects SET attempt = attempt + 1, started_at = ? "
    "WHERE thread = ? AND key = ? AND status = 'started'"
)
FINISH_EFFECT: Final = (
    "UPDATE effects SET status = 'done', finished_at = ?, result = ? "
    "WHERE thread = ? AND key = ? AND status = 'started'"
)
AUDIT_TAIL: Final = "SELECT seq, hash FROM audit WHERE thread = ? ORDER BY seq DESC LIMIT 1"
INSERT_AUDIT: Final = f"INSERT INTO audit ({AUDIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
AUDIT_ALL: Final = (
    f"SELECT {AUDIT_COLUMNS} FROM audit WHERE (thread, seq) > (?, ?) ORDER BY thread, seq LIMIT ?"
)
AUDIT_OF_THREAD: Final = (
    f"SELECT {AUDIT_COLUMNS} FROM audit WHERE thread = ? AND seq > ? ORDER BY seq LIMIT ?"
)
SELECT_THREAD: Final = f"SELECT {THREAD_COLUMNS} FROM threads WHERE thread = ?"
HAS_CHECKPOINTS: Final = "SELECT 1 FROM checkpoints WHERE thread = ? LIMIT 1"
INSERT_CHECKPOINT: Final = (
    f"INSERT INTO checkpoints ({CHECKPOINT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# Resolving rewrites the row's digest; the old one must still be there (checked when read).
RESOLVE: Final = (
    "UPDATE interrupts SET status = ?, resolved_at = ?, resolution = ?, digest = ? "
    "WHERE id = ? AND thread = ? AND status = 'pending' AND digest = ?"
)
INSERT_INTERRUPT: Final = (
    f"INSERT INTO interrupts ({INTERRUPT_COLUMNS}) VALUES ({', '.join('?' * 14)})"
)
SELECT_INTERRUPT_OF_THREAD: Final = (
    f"SELECT {INTERRUPT_COLUMNS} FROM interrupts WHERE id = ? AND thread = ?"
)

# The thread's row and its head checkpoint, to check one against the other.
SELECT_HEAD_CHECKPOINT: Final = (
    "SELECT "
    + ", ".join(f"c.{column.strip()}" for column in CHECKPOINT_COLUMNS.split(","))
    + ", "
    + ", ".join(f"t.{column.strip()}" for column in THREAD_COLUMNS.split(","))
    + " FROM threads t LEFT JOIN checkpoints c ON c.thread = t.thread AND c.seq = t.head_seq "
    "WHERE t.thread = ?"
)
SELECT_CHECKPOINT: Final = (
    f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE id = ? AND thread = ?"
)
# Each row starts with the thread's head seq, read in the same statement (one snapshot): the
# rows must be exactly the seqs the head says exist.
_HEAD_SEQ: Final = "(SELECT t.head_seq FROM threads t WHERE t.thread = :thread)"
SELECT_RANGE: Final = (
    f"SELECT {_HEAD_SEQ}, {CHECKPOINT_COLUMNS} FROM checkpoints "
    "WHERE thread = :thread AND seq >= :lo AND seq <= :hi ORDER BY seq"
)
SELECT_PAGE: Final = (
    f"SELECT {_HEAD_SEQ}, {CHECKPOINT_COLUMNS} FROM checkpoints "
    "WHERE thread = :thread AND seq < :before ORDER BY seq DESC LIMIT :limit"
)
SELECT_INTERRUPT: Final = f"SELECT {INTERRUPT_COLUMNS} FROM interrupts WHERE id = ?"

# One statement per filter combination, each answered by one index in created_at order
# (rowid, the index's hidden last column, breaks ties).
_PENDING: Final = f"SELECT {INTERRUPT_COLUMNS}, rowid FROM interrupts INDEXED BY "


def pending_query(
    thread: str | None,
    key: str | None,
    limit: int,
    after: str | None,
    deadline_before: float | None,
    tool: str | None = None,
    older_than: float | None = None,
) -> tuple[str, tuple[object, ...]]:
    """The inbox query for these filters, through the partial index that fits them."""
    where, params = pending_filters(
        thread=thread,
        key=key,
        after=after,
        deadline_before=deadline_before,
        mark="?",
        tiebreak="rowid",
        tool=tool,
        older_than=older_than,
    )
    if thread is not None:
        index = "interrupts_thread"
    elif key is not None:
        index = "interrupts_pending_key"
    elif tool is not None:
        index = "interrupts_pending_tool"
    else:
        index = "interrupts_pending"
    query = f"{_PENDING}{index} WHERE {' AND '.join(where)} ORDER BY created_at, rowid LIMIT ?"
    return query, (*params, limit)


PENDING_ALL: Final = pending_query(None, None, 0, None, None)[0]
PENDING_BY_THREAD: Final = pending_query("", None, 0, None, None)[0]
PENDING_BY_KEY: Final = pending_query(None, "", 0, None, None)[0]
PENDING_BY_THREAD_AND_KEY: Final = pending_query("", "", 0, None, None)[0]

PENDING_IDS_OF_THREAD: Final = (
    "SELECT id FROM interrupts INDEXED BY interrupts_thread "
    "WHERE thread = ? AND status = 'pending' ORDER BY created_at, rowid"
)

REQUEST_PAUSE: Final = """
    INSERT INTO pause_requests (thread, kind, requested_at)
    SELECT :thread, :kind, :at WHERE EXISTS (SELECT 1 FROM threads WHERE thread = :thread)
    ON CONFLICT (thread) DO UPDATE SET
        kind = CASE WHEN excluded.kind = 'forced' THEN 'forced' ELSE pause_requests.kind END,
        requested_at = excluded.requested_at
"""
PEEK_PAUSE: Final = "SELECT kind FROM pause_requests WHERE thread = ?"
TAKE_PAUSE: Final = "DELETE FROM pause_requests WHERE thread = ? RETURNING kind"

EXPIRED_THREADS: Final = (
    f"SELECT {THREAD_COLUMNS} FROM threads WHERE status = 'done' AND updated_at < ? "
    "ORDER BY updated_at LIMIT ?"
)

DELETE_THREAD: Final = (
    "DELETE FROM pause_requests WHERE thread = ?",
    "DELETE FROM effects WHERE thread = ?",
    "DELETE FROM interrupts WHERE thread = ?",
    "DELETE FROM checkpoints WHERE thread = ?",
    "DELETE FROM threads WHERE thread = ?",
)
