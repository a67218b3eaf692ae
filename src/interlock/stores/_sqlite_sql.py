"""The SQL statements `SqliteStore` runs (its schema and migrations: `_sqlite_schema`).

The statements it shares with `PostgresStore` are `SHARED` (see `_shared_sql`); the others,
here, are SQLite's own. Each statement is a constant reused verbatim, so sqlite3's statement
cache prepares it once.
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

SHARED: Final = SharedSql.bound_to("?")
"""The statements both SQL stores run, with SQLite's placeholder."""


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
# MOVE_HEAD for a thread whose row is known (`_sqlite_ops.KnownHeads`): it changes the row only
# while every column is still exactly what is known (the digests included).
MOVE_KNOWN_HEAD: Final = (
    "UPDATE threads SET head_id = ?, head_seq = ?, status = ?, updated_at = ?, digest = ?, "
    "lease_owner = ?, lease_token = ?, lease_expires = ?, lease_digest = ? WHERE thread = ? "
    "AND head_id = ? AND head_seq = ? AND status = ? AND updated_at = ? AND digest = ? "
    "AND lease_owner IS ? AND lease_token = ? AND lease_expires = ? AND lease_digest = ?"
)
# No row lock needed (PostgreSQL's reads FOR UPDATE): a write transaction holds the file's.
SELECT_LEASE: Final = (
    "SELECT lease_owner, lease_token, lease_expires, lease_digest FROM threads WHERE thread = ?"
)
INSERT_EFFECT: Final = (
    f"INSERT INTO effects ({EFFECT_COLUMNS}) VALUES (?, ?, ?, 'started', 1, ?, NULL, NULL)"
)
RESTART_EFFECT: Final = (
    "UPDATE effects SET attempt = attempt + 1, started_at = ? "
    "WHERE thread = ? AND key = ? AND status = 'started'"
)
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

# The thread's row and its head checkpoint, to check one against the other; then its lease.
SELECT_HEAD_CHECKPOINT: Final = (
    "SELECT "
    + ", ".join(f"c.{column.strip()}" for column in CHECKPOINT_COLUMNS.split(","))
    + ", "
    + ", ".join(f"t.{column.strip()}" for column in THREAD_COLUMNS.split(","))
    + ", t.lease_owner, t.lease_token, t.lease_expires, t.lease_digest"
    + " FROM threads t LEFT JOIN checkpoints c ON c.thread = t.thread AND c.seq = t.head_seq "
    "WHERE t.thread = ?"
)
# Each row starts with the thread's head seq, read in the same statement (one snapshot): the
# rows must be exactly the seqs the head says exist.
_HEAD_SEQ: Final = "(SELECT t.head_seq FROM threads t WHERE t.thread = :thread)"
SELECT_RANGE: Final = (
    f"SELECT {_HEAD_SEQ}, {CHECKPOINT_COLUMNS} FROM checkpoints "
    "WHERE thread = :thread AND seq >= :lo AND seq <= :hi ORDER BY seq"
)
# The seqs come as one JSON array, so one prepared statement serves any number of them.
SELECT_AT: Final = (
    f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints "
    "WHERE thread = ? AND seq IN (SELECT value FROM json_each(?)) ORDER BY seq"
)
SELECT_PAGE: Final = (
    f"SELECT {_HEAD_SEQ}, {CHECKPOINT_COLUMNS} FROM checkpoints "
    "WHERE thread = :thread AND seq < :before ORDER BY seq DESC LIMIT :limit"
)

# One statement per filter combination, each answered by one index in created_at order
# (rowid, the index's hidden last column, breaks ties).
_PENDING: Final = f"SELECT {INTERRUPT_COLUMNS}, rowid FROM interrupts INDEXED BY "


def pending_query(
    where: PendingFilter, limit: int, after: str | None
) -> tuple[str, tuple[object, ...]]:
    """The inbox query for these filters, through the partial index that fits them."""
    conditions, params = pending_filters(where, after, mark="?", tiebreak="rowid")
    if where.thread is not None:
        index = "interrupts_thread"
    elif where.key is not None:
        index = "interrupts_pending_key"
    elif where.tool is not None:
        index = "interrupts_pending_tool"
    else:
        index = "interrupts_pending"
    query = f"{_PENDING}{index} WHERE {' AND '.join(conditions)} ORDER BY created_at, rowid LIMIT ?"
    return query, (*params, limit)


def pending_counts_query(where: PendingFilter) -> tuple[str, tuple[object, ...]]:
    """The query counting pending interrupts per tool, through the partial index that fits.

    Without a thread or key filter, ``interrupts_pending_tool`` (tool, created_at) yields the
    rows already grouped by tool, so no sort is needed.
    """
    conditions, params = pending_filters(where, None, mark="?", tiebreak="rowid")
    if where.thread is not None:
        index = "interrupts_thread"
    elif where.key is not None:
        index = "interrupts_pending_key"
    else:
        index = "interrupts_pending_tool"
    query = (
        f"SELECT tool, count(*) FROM interrupts INDEXED BY {index} "
        f"WHERE {' AND '.join(conditions)} GROUP BY tool"
    )
    return query, tuple(params)


PENDING_ALL: Final = pending_query(PendingFilter(), 0, None)[0]
PENDING_BY_THREAD: Final = pending_query(PendingFilter(thread=""), 0, None)[0]
PENDING_BY_KEY: Final = pending_query(PendingFilter(key=""), 0, None)[0]
PENDING_BY_THREAD_AND_KEY: Final = pending_query(PendingFilter(thread="", key=""), 0, None)[0]

PENDING_IDS_OF_THREAD: Final = (
    "SELECT id FROM interrupts INDEXED BY interrupts_thread "
    "WHERE thread = ? AND status = 'pending' ORDER BY created_at, rowid"
)

PEEK_PAUSE: Final = "SELECT kind FROM pause_requests WHERE thread = ?"

EXPIRED_THREADS: Final = (
    f"SELECT {THREAD_COLUMNS} FROM threads WHERE status = 'done' AND updated_at < ? "
    "ORDER BY updated_at LIMIT ?"
)

INSERT_CHANGE: Final = f"INSERT INTO changes ({CHANGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
# The last seq ever written (AUTOINCREMENT keeps it in sqlite_sequence, even once pruned away).
_LAST_CHANGE: Final = "coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'changes'), 0)"
CHANGE_CURSOR: Final = f"SELECT {_LAST_CHANGE}"
# One statement, so one snapshot: the last seq, then the page (a row of NULLs when it is empty).
CHANGES: Final = (
    f"SELECT s.last, c.seq, {', '.join(f'c.{c.strip()}' for c in CHANGE_COLUMNS.split(','))} "
    f"FROM (SELECT {_LAST_CHANGE} AS last) AS s LEFT JOIN ("
    f"SELECT seq, {CHANGE_COLUMNS} FROM changes WHERE seq > ? ORDER BY seq LIMIT ?"
    ") AS c ON 1 ORDER BY c.seq"
)
# The feed's first :limit changes, up to the first one committed at or after :older_than (see
# `Store.prune_changes`): a walk of the table's first rows, no index on the time needed.
PRUNE_CHANGES: Final = (
    "WITH head AS (SELECT seq, at FROM changes ORDER BY seq LIMIT :limit) "
    "DELETE FROM changes WHERE seq IN (SELECT seq FROM head WHERE seq < "
    "coalesce((SELECT min(seq) FROM head WHERE at >= :older_than), 9223372036854775807))"
)

DELETE_THREAD: Final = (
    "DELETE FROM pause_requests WHERE thread = ?",
    "DELETE FROM effects WHERE thread = ?",
    "DELETE FROM interrupts WHERE thread = ?",
    "DELETE FROM checkpoints WHERE thread = ?",
    "DELETE FROM channel_messages WHERE thread = ?",
    "DELETE FROM threads WHERE thread = ?",
)
