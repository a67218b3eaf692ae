"""What `Workers.install` writes into the database: procrastinate's schema, and the trigger that
queues a thread's continuation in the transaction of the decision that makes it runnable.

The trigger is the reason a decision is never recorded without its continuation queued, nor
queued twice: it runs inside the decision's own commit (a deferred constraint trigger fires at
commit time, when the thread's lease shows who goes on), whatever process, tool or interlock
version made the decision. It queues when an interrupt leaves ``pending`` answered (resolved,
or expired by the sweeper) and nobody holds the thread's lease: a caller that resumes with
targets holds the lease through its decision and goes on itself, so nothing is queued for it.

A continuation runs without its queueing lock (procrastinate's is only on ``todo`` jobs), so a
decision made while it runs queues the next one. Were the running one then retried (a lost
connection), it would clash with that one on the queueing lock, stay ``doing`` and hold the
thread's lock: a second trigger hands the retry over instead. The job queued meanwhile goes
on, with every decision there is, and the retried one ends ``cancelled``.

The two triggers and their functions are the statements of ``sql/install.sql`` (split as
`interlock._sqlfiles` describes), run in file order as psycopg templates.
"""

from __future__ import annotations

from typing import Any, Final

from psycopg import AsyncConnection, sql

from .._sqlfiles import statements
from ..stores import PostgresStore

__all__ = ["INSTALL_LOCK", "QUEUE_LOCK", "install"]

INSTALL_LOCK: Final = 0x696E746C6B776B  # "intlkwk": one installer at a time per database
QUEUE_LOCK: Final = 0x494C4B33
"""High key of the transaction-scoped advisory lock taken by whoever queues or retries a
continuation of a thread (ASCII ``ILK3``); the low key hashes its queueing lock."""

_INSTALL: Final = statements("interlock.workers", "sql/install.sql")
"""The continuation trigger, the hand-over trigger and their functions, in the order they are
(re)created; each a `psycopg.sql.SQL` template (its placeholders: the file's header)."""


async def install(
    conn: AsyncConnection[Any], *, schema_sql: str, queue: str, task: str, lock_prefix: str
) -> bool:
    """Create procrastinate's schema when missing, and (re)create the continuation trigger.

    One transaction under an advisory lock, so workers starting together install once.
    Returns whether procrastinate's schema was created by this call.
    """
    values = {
        "lock_prefix": sql.Literal(lock_prefix),
        "queue_lock": sql.Literal(QUEUE_LOCK),
        "queue": sql.Literal(queue),
        "task": sql.Literal(task),
        "continuation_trigger": sql.Identifier(PostgresStore.CONTINUATION_TRIGGER),
    }
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (INSTALL_LOCK,))
        cur = await conn.execute("SELECT to_regclass('procrastinate_jobs') IS NULL")
        row = await cur.fetchone()
        created = bool(row and row[0])
        if created:
            await conn.execute(schema_sql)  # procrastinate's own SQL, as it applies it
        for statement in _INSTALL.values():
            await conn.execute(sql.SQL(statement).format(**values))
    return created
