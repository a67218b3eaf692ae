"""The PostgreSQL schema of `PostgresStore` and its migrations (the statements it runs:
`_postgres_sql`).

The schema's history is the files of ``sql/postgres/``, one per version, each a list of named
statements (the layout, and how it is split into statements, is in `interlock._sqlfiles`):
``0001_threads_checkpoints_interrupts.sql`` takes an empty database to version 1, and file
``N`` takes it from ``N - 1`` to ``N``. The applied versions are rows of ``schema_version``.
To change the schema, add the next file and raise `SCHEMA_VERSION` to its number. A file,
once released, is never edited (databases out there were migrated by its exact text), so
version 4's ``interlock_append``, which version 5 replaces, stays in its file.

All pending versions run in one transaction that first takes a transaction-scoped advisory
lock, so concurrent migrators queue up and exactly one of them applies each version. Nothing
here needs session state (no session locks, no prepared statements): it works behind a
transaction-pooling proxy.
"""

from __future__ import annotations

import time
from typing import Any, Final

from psycopg import Connection

from .._sqlfiles import Migrations

__all__ = ["MIGRATIONS", "MIGRATION_LOCK", "SCHEMA_VERSION", "SchemaMismatch", "migrate"]

MIGRATION_LOCK: Final = 0x494C4B31
"""Key of the ``pg_advisory_xact_lock`` that serialises migrations (ASCII ``ILK1``)."""

SCHEMA_VERSION: Final = 12
"""The version this code reads and writes: the number of the last file of ``sql/postgres/``."""

MIGRATIONS: Final = Migrations("interlock.stores", "sql/postgres", SCHEMA_VERSION)
"""``MIGRATIONS[i]``, the statements of file ``i + 1``, takes the schema from version ``i`` to
``i + 1``. The files are read when a migration is first looked at, not on import."""


class SchemaMismatch(Exception):
    """Raised by `migrate` when the database is not one this code may use."""


def migrate(conn: Connection[Any]) -> list[int]:
    """Bring the database to `SCHEMA_VERSION` in one transaction; safe to run concurrently.

    Returns:
        The versions this call applied (empty when the schema was current).

    Raises:
        SchemaMismatch: The schema was written by a newer interlock, or the tables of another
            application are in the way.
    """
    applied: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        # Under the lock: whoever got here first has committed its versions already.
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            "version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
        )
        cur = conn.execute("SELECT coalesce(max(version), 0) FROM schema_version")
        row = cur.fetchone()
        found = 0 if row is None else int(row[0])
        if found > SCHEMA_VERSION:
            raise SchemaMismatch(
                f"schema version {found} was written by a newer interlock (this one knows up "
                f"to {SCHEMA_VERSION}); upgrade interlock to use this database"
            )
        if found == 0:
            cur = conn.execute("SELECT to_regclass('threads') IS NOT NULL")
            row = cur.fetchone()
            if row is not None and row[0]:
                raise SchemaMismatch(
                    "a table 'threads' exists but interlock never migrated this schema; give "
                    "PostgresStore a database or schema of its own (e.g. options=-csearch_path=…)"
                )
        for version, step in enumerate(MIGRATIONS[found:], start=found + 1):
            for statement in step:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_version (version, applied_at) VALUES (%s, %s)",
                (version, time.time()),
            )
            applied.append(version)
    return applied
