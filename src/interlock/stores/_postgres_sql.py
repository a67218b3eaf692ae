"""The SQL statements `PostgresStore` runs (its schema and migrations: `_postgres_schema`).

The statements it shares with `SqliteStore` are `SHARED` (see `_shared_sql`); the others, here,
are PostgreSQL's own.
"""

from __future__ import annotations

from typing import Final

from ._base import PendingFilter
from ._rows import (
    CHANGE_COLUMNS,
    CHECKPOINT_COLUMNS,
    EFFECT_COLUMNS,
    INTERRUPT_COLUMNS,
    THREAD_COLUMNS,
)
from ._shared_sql import SharedSql, pending_filters

SHARED: Final = SharedSql.bound_to("%s")
"""The statements both SQL stores run, with psycopg's placeholder."""

_APPEND_TYPES: Final = (
    # The checkpoint row, its digest, the thread's head digest.
    *("text", "bigint", "text", "text", "bigint", "bigint", "float8", "text", "text", "bytea"),
    *("bytea", "bytea"),
    # Expected head, fence (present, owner, token, ttl, release), now, retried.
    *("text", "boolean", "text", "bigint", "float8", "boolean", "float8", "boolean"),
    # Resolutions.
    *("text[]", "text[]", "float8[]", "bytea[]"),
    # New interrupts.
    *("text[]", "text[]", "text[]", "text[]", "text[]", "float8[]", "float8[]", "bytea[]"),
    *("float8[]", "bytea[]", "text[]", "bytea[]"),
    # Audit entries.
    *("bytea", "text[]", "text[]", "bytea[]", "bytea[]"),
)
APPEND: Final = "SELECT interlock_append(" + ", ".join(f"%s::{t}" for t in _APPEND_TYPES) + ")"
"""One append_checkpoint: see ``interlock_append`` in ``sql/postgres/0005_row_digests.sql``."""
APPEND_LAZILY: Final = APPEND[: -len(")")] + "), set_config('synchronous_commit', 'off', true)"
"""`APPEND` for a non-durable append: this transaction's commit does not wait for the WAL flush
(a later synchronous commit flushes it with its own)."""
APPEND_BINARY: Final = (
    "SELECT interlock_append("
    + ", ".join(f"${n}::{t}" for n, t in enumerate(_APPEND_TYPES, start=1))
    + ")"
).encode()
"""`APPEND` with numbered parameters, for libpq directly (`_postgres_wire.call`); its
parameters' types are those of the casts, so one prepared statement serves every shape of
append (psycopg's typed NULLs made one per shape)."""
APPEND_BINARY_LAZILY: Final = (
    APPEND_BINARY[:-1] + b"), set_config('synchronous_commit', 'off', true)"
)
"""`APPEND_BINARY` for a non-durable append (see `APPEND_LAZILY`)."""
COMMIT_LAZILY: Final = "SET LOCAL synchronous_commit = off"
"""Run first in a transaction whose commit need not wait for the WAL flush."""
GROUP_START: Final = "SAVEPOINT interlock_append"
"""Begins a group of appends in one transaction (`_postgres_ops.append_group`): each append
runs inside this savepoint."""
GROUP_START_LAZILY: Final = f"{COMMIT_LAZILY}; {GROUP_START}"
"""`GROUP_START` for a group none of whose appends is durable."""
GROUP_NEXT: Final = "RELEASE SAVEPOINT interlock_append; SAVEPOINT interlock_append"
"""Keeps the append that just went through, and opens the next one's savepoint (one round
trip: no parameters, so both statements go in one simple query)."""
GROUP_UNDO: Final = "ROLLBACK TO SAVEPOINT interlock_append"
"""Undoes the append that just failed; the savepoint stays, for the next one."""
APPEND_REFUSED: Final = "IL001"
"""The SQLSTATE of ``interlock_append``'s refusals; the message is JSON with the details."""

# Locks the thread's row first, as every write of the thread does (SQLite's write lock is the
# whole file's instead).
SELECT_LEASE: Final = (
    "SELECT lease_owner, lease_token, lease_expires, lease_digest FROM threads "
    "WHERE thread = %s FOR UPDATE"
)
# RETURNING the row saves a round trip to read it (SQLite reads it from the same process).
INSERT_EFFECT: Final = (
    f"INSERT INTO effects ({EFFECT_COLUMNS}) VALUES (%s, %s, %s, 'started', 1, %s, NULL, NULL) "
    f"ON CONFLICT (thread, key) DO NOTHING RETURNING {EFFECT_COLUMNS}"
)
RESTART_EFFECT: Final = (
    "UPDATE effects SET attempt = attempt + 1, started_at = %s "
    f"WHERE thread = %s AND key = %s AND status = 'started' RETURNING {EFFECT_COLUMNS}"
)

_C: Final = ", ".join(f"c.{column.strip()}" for column in CHECKPOINT_COLUMNS.split(","))
# The thread's row and its head checkpoint, to check one against the other.
SELECT_HEAD_CHECKPOINT: Final = (
    f"SELECT {_C}, "
    + ", ".join(f"t.{column.strip()}" for column in THREAD_COLUMNS.split(","))
    + " FROM threads t LEFT JOIN checkpoints c ON c.thread = t.thread AND c.seq = t.head_seq "
    "WHERE t.thread = %s"
)
# With the thread's head seq, read in the same statement (one snapshot): the rows must be
# exactly the seqs the head says exist.
SELECT_RANGE: Final = (
    f"SELECT t.head_seq, {_C} FROM threads t LEFT JOIN LATERAL ("
    f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints "
    "WHERE thread = t.thread AND seq >= %s AND seq <= %s) c ON true "
    "WHERE t.thread = %s ORDER BY c.seq"
)
SELECT_AT: Final = (
    f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints "
    "WHERE thread = %s AND seq = ANY(%s::bigint[]) ORDER BY seq"
)
SELECT_PAGE: Final = (
    f"SELECT t.head_seq, {_C} FROM threads t LEFT JOIN LATERAL ("
    f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints "
    "WHERE thread = t.thread AND seq < %s ORDER BY seq DESC LIMIT %s) c ON true "
    "WHERE t.thread = %s ORDER BY c.seq DESC"
)

# One statement per filter combination; each matches one index in (created_at, ord) order.
_PENDING: Final = f"SELECT {INTERRUPT_COLUMNS}, ord FROM interrupts WHERE "


def pending_query(
    where: PendingFilter, limit: int, after: str | None
) -> tuple[str, tuple[object, ...]]:
    """The inbox query for these filters (the partial indexes serve it)."""
    conditions, params = pending_filters(where, after, mark="%s", tiebreak="ord")
    query = f"{_PENDING}{' AND '.join(conditions)} ORDER BY created_at, ord LIMIT %s"
    return query, (*params, limit)


def pending_counts_query(where: PendingFilter) -> tuple[str, tuple[object, ...]]:
    """The query counting pending interrupts per tool.

    Filtered by nothing but the tool, the counts are sums of ``pending_count_deltas`` (schema
    version 8), a few rows per tool: see `PENDING_COUNTS`. Otherwise the pending index that
    fits the filters is read, a row per interrupt counted.
    """
    if (where.thread, where.key, where.older_than, where.deadline_before) == (None,) * 4:
        if where.tool is None:
            return PENDING_COUNTS, ()
        return PENDING_COUNT_OF_TOOL, (where.tool,)
    conditions, params = pending_filters(where, None, mark="%s", tiebreak="ord")
    query = f"SELECT tool, count(*) FROM interrupts WHERE {' AND '.join(conditions)} GROUP BY tool"
    return query, tuple(params)


FOLD_DELTAS_AFTER: Final = 256
"""Rows of ``pending_count_deltas`` past which counting folds them into one per tool."""
_COUNTS_LOCK: Final = 0x494C4B32
"""High half of the advisory lock key of folding (ASCII ``ILK2``); the low half is the table."""

# The sums, and the rows folded when there are many: each row deleted (by this statement or
# a concurrent one, never both) has its delta re-inserted within the same statement, so the
# sums never change. The advisory lock (keyed by the table, so one schema does not hold up
# another's) only spares two counts deleting the same rows: the one that does not get it
# leaves the folding to the other. The counts come from the statement's snapshot, which the
# folding does not change (the data-modifying parts' effects are not visible to it).
_PENDING_SUMS: Final = f"""
    WITH sums AS (
        SELECT tool, sum(delta)::BIGINT AS n, count(*) AS deltas
        FROM pending_count_deltas GROUP BY tool
    ), folded AS (
        DELETE FROM pending_count_deltas
        WHERE (SELECT sum(deltas) FROM sums) > {FOLD_DELTAS_AFTER}
            AND pg_try_advisory_xact_lock(
                ({_COUNTS_LOCK}::BIGINT << 32) | 'pending_count_deltas'::REGCLASS::OID::BIGINT)
        RETURNING tool, delta
    ), refolded AS (
        INSERT INTO pending_count_deltas (tool, delta)
        SELECT tool, sum(delta)::BIGINT FROM folded GROUP BY tool HAVING sum(delta) <> 0
    )
    SELECT tool, n FROM sums WHERE n <> 0"""
PENDING_COUNTS: Final = _PENDING_SUMS
PENDING_COUNT_OF_TOOL: Final = f"{_PENDING_SUMS} AND tool = %s"


CONTINUATION_TRIGGER: Final = "interlock_continue_after_decision"
"""The trigger `interlock.workers.Workers.install` puts on ``interrupts``: it queues a thread's
continuation for the workers in the transaction of each decision (public as
`PostgresStore.CONTINUATION_TRIGGER`)."""
SELECT_CONTINUATION_TRIGGER: Final = """
SELECT EXISTS (SELECT 1 FROM pg_trigger
    WHERE tgrelid = to_regclass('interrupts') AND tgname = %s AND tgenabled <> 'D')
"""
PAUSE_CHANNEL: Final = "interlock_pause"
"""The channel a pause request is announced on (payload: the thread), for whoever runs it
(public as `PostgresStore.PAUSE_CHANNEL`)."""
NOTIFY_PAUSE: Final = "SELECT pg_notify(%s, %s)"
PAUSE_PAYLOAD_MAX: Final = 7900
"""A NOTIFY payload must stay under 8,000 bytes: a longer thread id is announced as ``""``."""

# Locked, and skipping threads another transaction is writing: those wait for a later expiry.
EXPIRED_THREADS: Final = (
    f"SELECT {THREAD_COLUMNS} FROM threads WHERE status = 'done' AND updated_at < %s "
    "ORDER BY updated_at LIMIT %s FOR UPDATE SKIP LOCKED"
)

# The page after the cursor, of transactions that have all finished (see the changes table in
# ``sql/postgres/0006_change_feed.sql``), and the snapshot's xmax (no transaction id is at or
# above it yet), to refuse a cursor from beyond it. One statement, so one snapshot; a row of
# NULLs but the first when the page is empty.
CHANGES: Final = (
    "SELECT pg_snapshot_xmax(s.snap)::text, c.txid::text, c.seq, "
    + ", ".join(f"c.{column.strip()}" for column in CHANGE_COLUMNS.split(","))
    + " FROM pg_current_snapshot() AS s(snap) LEFT JOIN LATERAL ("
    f"SELECT txid, seq, {CHANGE_COLUMNS} FROM changes "
    "WHERE (txid, seq) > (%s::xid8, %s) AND txid < pg_snapshot_xmin(s.snap) "
    "ORDER BY txid, seq LIMIT %s) c ON true ORDER BY c.txid, c.seq"
)
# Every transaction below xmin has finished, and none will ever get an id below it.
CHANGE_CURSOR: Final = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text"
# The feed's first %(limit)s changes, up to the first one committed at or after %(older_than)s
# (see `Store.prune_changes`). Locked in feed order, so concurrent prunes cannot deadlock;
# deleted by their row addresses, which the locks keep in place: work in proportion to limit.
PRUNE_CHANGES: Final = """
    WITH head AS (
        SELECT ctid, txid, seq, at FROM changes
        WHERE txid < pg_snapshot_xmin(pg_current_snapshot())
        ORDER BY txid, seq LIMIT %(limit)s FOR UPDATE
    ), old AS (
        SELECT ctid, bool_and(at < %(older_than)s) OVER (ORDER BY txid, seq) AS before FROM head
    )
    DELETE FROM changes WHERE ctid = ANY (ARRAY(SELECT ctid FROM old WHERE before))
"""

DELETE_THREAD: Final = (
    # The threads row first, as every append locks it first: one lock order, no deadlock.
    "DELETE FROM threads WHERE thread = %s",
    "DELETE FROM pause_requests WHERE thread = %s",
    "DELETE FROM effects WHERE thread = %s",
    "DELETE FROM interrupts WHERE thread = %s",
    "DELETE FROM checkpoints WHERE thread = %s",
    "DELETE FROM channel_messages WHERE thread = %s",
)
