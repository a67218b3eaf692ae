"""The SQLite schema of `SqliteStore` and its migrations (the statements it runs: `_sqlite_sql`).

The schema's history is the files of ``sql/sqlite/``, one per version, each a list of named
statements (the layout, and how it is split into statements, is in `interlock._sqlfiles`):
``0001_threads_checkpoints_interrupts.sql`` takes an empty file to version 1, and file ``N``
takes it from ``N - 1`` to ``N``, inside the migration transaction. To change the schema, add
the next file and raise `SCHEMA_VERSION` to its number; a released file is never edited.

The schema version lives in ``PRAGMA user_version``; ``PRAGMA application_id`` marks the file
as interlock's so that a store never migrates somebody else's database.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from .._sqlfiles import Migrations
from ._rows import sql_digest

__all__ = ["APPLICATION_ID", "MIGRATIONS", "SCHEMA_VERSION", "SchemaMismatch", "migrate"]

APPLICATION_ID: Final = 0x494C4B31
"""``PRAGMA application_id`` of an interlock database (ASCII ``ILK1``)."""

SCHEMA_VERSION: Final = 8
"""The version this code reads and writes: the number of the last file of ``sql/sqlite/``."""

MIGRATIONS: Final = Migrations("interlock.stores", "sql/sqlite", SCHEMA_VERSION)
"""``MIGRATIONS[i]``, the statements of file ``i + 1``, takes the schema from version ``i`` to
``i + 1``. The files are read when a migration is first looked at, not on import."""


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
