"""What each `SqliteStore` operation does on its connection: one transaction per write.

Every function here runs with the store's lock held on the one connection (on its worker
thread, or on the caller's when the event loop has nothing else to do), and takes the store's
clock reading (``now``) from the caller. Errors of the driver are left to
`SqliteStore`, which translates them at its edge.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import msgspec

from .._collector import collector_paused
from .._errors import CheckpointCorrupt, InterruptAlreadyResolved, StoreError, UnknownInterrupt
from . import _rows as conv
from . import _sqlite_sql as sql
from ._audit import chain, thread_deleted
from ._base import (
    AuditEntry,
    AuditRecord,
    ChangeRecord,
    CheckpointRecord,
    EffectRecord,
    Fence,
    InterruptRecord,
    PauseKind,
    PendingFilter,
    Resolution,
    ThreadRecord,
)
from ._changes import cursor_ahead, derive
from ._checks import finish_refused, head_mismatch, lease_after

__all__ = [
    "append",
    "audit_log",
    "begin_effect",
    "change_cursor",
    "changes",
    "checkpoint",
    "checkpoint_page",
    "checkpoint_range",
    "checkpoints_at",
    "delete",
    "effect",
    "expire",
    "finish_effect",
    "head_checkpoint",
    "interrupt",
    "nothing",
    "pending",
    "pending_counts",
    "prune_changes",
    "renew",
    "request_pause",
    "take_pause",
    "thread_record",
]


class _UnknownTarget(Exception):
    """A resolution names an interrupt the thread does not have (raised to roll back first)."""

    def __init__(self, interrupt_id: str) -> None:
        self.interrupt_id = interrupt_id


def nothing(conn: sqlite3.Connection) -> None:
    """Do nothing (opening the connection is the point)."""
    return None


@contextmanager
def _write(conn: sqlite3.Connection) -> Iterator[None]:
    """Run the body in a ``BEGIN IMMEDIATE`` transaction; roll back on any error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise


def append(
    conn: sqlite3.Connection,
    record: CheckpointRecord,
    expected_head: str | None,
    new_interrupts: Sequence[InterruptRecord],
    resolutions: Sequence[Resolution],
    fence: Fence | None,
    audit: Sequence[AuditEntry],
    now: float,
) -> int | None:
    """`Store.append_checkpoint` in one ``BEGIN IMMEDIATE`` transaction."""
    thread = record.thread
    try:
        with _write(conn):
            # 1. The lease, then the head (the write lock is held, so read-then-write is safe).
            row = conn.execute(sql.SELECT_HEAD_AND_LEASE, (thread,)).fetchone()
            head, current = None, None
            if row is not None:
                found = conv.thread_from_row(row[:6], thread)
                head, current = (
                    (found.head_id, found.head_seq),
                    conv.lease_from_row(row[6:], thread),
                )
            lease = lease_after(thread, current, fence, now)
            busy = head_mismatch(record, expected_head, head)
            if busy is not None:
                raise busy
            new = (
                record.id,
                record.seq,
                record.status,
                record.created_at,
                conv.thread_digest(thread, record.id, record.seq, record.status, record.created_at),
                *lease,
                conv.lease_digest(thread, *lease),
            )
            if row is None:
                conn.execute(sql.INSERT_THREAD, (thread, *new))
            else:
                conn.execute(sql.MOVE_HEAD, (*new, thread))
            # 2. Resolutions, each a compare-and-set out of pending.
            for res in resolutions:
                row = conn.execute(sql.SELECT_INTERRUPT_OF_THREAD, (res.id, thread)).fetchone()
                if row is None:
                    raise _UnknownTarget(res.id)
                target = conv.interrupt_from_row(row, id=res.id, thread=thread)
                if target.status != "pending":
                    raise InterruptAlreadyResolved(res.id, status=target.status)
                resolved = msgspec.structs.replace(
                    target,
                    status=res.status,
                    resolved_at=res.resolved_at,
                    resolution=res.resolution,
                )
                params = (res.status, res.resolved_at, res.resolution)
                conn.execute(
                    sql.RESOLVE,
                    (*params, conv.interrupt_digest(resolved), res.id, thread, row[13]),
                )
            # 3. The new rows.
            try:
                conn.execute(sql.INSERT_CHECKPOINT, conv.checkpoint_row(record))
                if new_interrupts:
                    conn.executemany(sql.INSERT_INTERRUPT, map(conv.interrupt_row, new_interrupts))
            except sqlite3.IntegrityError as exc:
                raise StoreError(
                    f"cannot append checkpoint {record.id!r} to thread {thread!r}: {exc}; "
                    "checkpoint and interrupt ids must be unique across the store"
                ) from exc
            # 4. The changes it makes, for the feed (most appends make none).
            changes = derive(record, new_interrupts, resolutions)
            if changes:
                conn.executemany(sql.INSERT_CHANGE, conv.change_rows(record, changes))
            _log(conn, thread, audit, now)
    except _UnknownTarget as unknown:
        # Rolled back by now, so this lists what is really pending.
        pending = [row[0] for row in conn.execute(sql.PENDING_IDS_OF_THREAD, (thread,))]
        if unknown.interrupt_id in pending:  # its id index lost it: the file is damaged
            raise conv.lost_interrupt(unknown.interrupt_id, thread) from None
        raise UnknownInterrupt(unknown.interrupt_id, pending, thread=thread) from None
    return None if fence is None else lease[1]


def _log(conn: sqlite3.Connection, thread: str, entries: Sequence[AuditEntry], now: float) -> None:
    """Append entries to the thread's audit chain (inside the caller's transaction)."""
    if entries:
        tail = conn.execute(sql.AUDIT_TAIL, (thread,)).fetchone()
        rows = chain(thread, None if tail is None else (tail[0], bytes(tail[1])), entries, now)
        conn.executemany(sql.INSERT_AUDIT, map(conv.audit_row, rows))


def _fenced(conn: sqlite3.Connection, thread: str, fence: Fence | None, now: float) -> None:
    """Check (and move) the thread's lease for a write that is not a checkpoint."""
    row = conn.execute(sql.SELECT_LEASE, (thread,)).fetchone()
    current = None if row is None else conv.lease_from_row(row, thread)
    lease = lease_after(thread, current, fence, now)
    if current is not None and current != lease:
        conn.execute(sql.SET_LEASE, (*lease, conv.lease_digest(thread, *lease), thread))


def renew(conn: sqlite3.Connection, thread: str, fence: Fence, now: float) -> None:
    """`Store.renew_lease`."""
    with _write(conn):
        _fenced(conn, thread, fence, now)


def begin_effect(
    conn: sqlite3.Connection,
    thread: str,
    key: str,
    name: str,
    fence: Fence | None,
    retry: bool,
    audit: Sequence[AuditEntry],
    now: float,
) -> tuple[bool, EffectRecord]:
    """`Store.begin_effect`."""
    with _write(conn):
        _fenced(conn, thread, fence, now)
        row = conn.execute(sql.SELECT_EFFECT, (thread, key)).fetchone()
        if row is not None:
            found = conv.checked_effect(row, thread, key)
            if not (retry and found.status == "started"):
                return False, found
            conn.execute(sql.RESTART_EFFECT, (now, thread, key))
        else:
            conn.execute(sql.INSERT_EFFECT, (thread, key, name, now))
        _log(conn, thread, audit, now)
        started = conn.execute(sql.SELECT_EFFECT, (thread, key)).fetchone()
    return True, conv.checked_effect(started, thread, key)


def finish_effect(
    conn: sqlite3.Connection,
    thread: str,
    key: str,
    result: bytes | None,
    fence: Fence | None,
    audit: Sequence[AuditEntry],
    now: float,
) -> None:
    """`Store.finish_effect`."""
    with _write(conn):
        _fenced(conn, thread, fence, now)
        if not _changed(conn, sql.FINISH_EFFECT, (now, result, thread, key)):
            row = conn.execute(sql.SELECT_EFFECT, (thread, key)).fetchone()
            refused = finish_refused(
                thread, key, None if row is None else conv.checked_effect(row, thread, key), result
            )
            if refused is None:
                return  # the same outcome recorded again (a retried call)
            raise refused
        _log(conn, thread, audit, now)


def audit_log(
    conn: sqlite3.Connection, thread: str | None, after: tuple[str, int] | None, limit: int
) -> list[AuditRecord]:
    """`Store.audit_log`."""
    if thread is not None:
        seq = after[1] if after is not None and after[0] == thread else 0
        rows = conn.execute(sql.AUDIT_OF_THREAD, (thread, seq, limit))
    else:
        rows = conn.execute(sql.AUDIT_ALL, (*(after or ("", 0)), limit))
    return [conv.audit_from_row(row) for row in rows]


def request_pause(conn: sqlite3.Connection, thread: str, kind: PauseKind, now: float) -> bool:
    """`Store.request_pause`."""
    with _write(conn):
        return _changed(conn, sql.REQUEST_PAUSE, {"thread": thread, "kind": kind, "at": now})


def take_pause(conn: sqlite3.Connection, thread: str) -> PauseKind | None:
    """`Store.take_pause_request`."""
    # Read first: the common answer is "none", and a read takes no write lock.
    if conn.execute(sql.PEEK_PAUSE, (thread,)).fetchone() is None:
        return None
    with _write(conn):
        row = conn.execute(sql.TAKE_PAUSE, (thread,)).fetchone()
    return None if row is None else row[0]


def expire(conn: sqlite3.Connection, older_than: float, limit: int, now: float) -> list[str]:
    """`Store.expire`."""
    with _write(conn):
        rows = conn.execute(sql.EXPIRED_THREADS, (older_than, limit)).fetchall()
        # A damaged row must not delete a thread that is not finished.
        gone = [conv.thread_from_row(row, row[0]).thread for row in rows]
        for thread in gone:
            _delete_rows(conn, thread, now)
    return gone


def delete(conn: sqlite3.Connection, thread: str, now: float) -> None:
    """`Store.delete_thread`."""
    with _write(conn):
        _delete_rows(conn, thread, now)


def _delete_rows(conn: sqlite3.Connection, thread: str, now: float) -> None:
    if conn.execute(sql.SELECT_LEASE, (thread,)).fetchone() is not None:
        _log(conn, thread, [thread_deleted()], now)
    for statement in sql.DELETE_THREAD:
        conn.execute(statement, (thread,))


def changes(conn: sqlite3.Connection, after: int, limit: int) -> list[ChangeRecord]:
    """`Store.changes`: the page after seq ``after``, each row checked."""
    rows = conn.execute(sql.CHANGES, (after, limit)).fetchall()
    last = rows[0][0]
    if after > last:
        raise cursor_ahead(str(after), str(last))
    out: list[ChangeRecord] = []
    for row in rows:
        seq = row[1]
        if seq is None:  # the page is empty
            break
        if not after < seq <= last:
            raise conv.misplaced_change(str(seq), str(after))
        after = seq
        out.append(conv.change_from_row(row[2:], str(seq)))
    return out


def change_cursor(conn: sqlite3.Connection) -> str:
    """`Store.change_cursor`: the last seq ever written."""
    return str(conn.execute(sql.CHANGE_CURSOR).fetchone()[0])


def prune_changes(conn: sqlite3.Connection, older_than: float, limit: int) -> int:
    """`Store.prune_changes`."""
    with _write(conn):
        before = conn.total_changes  # rowcount is -1 for a statement that starts with WITH
        conn.execute(sql.PRUNE_CHANGES, {"older_than": older_than, "limit": limit})
        return conn.total_changes - before


def _changed(
    conn: sqlite3.Connection, statement: str, params: tuple[object, ...] | dict[str, object]
) -> bool:
    return conn.execute(statement, params).rowcount > 0


@contextmanager
def _read(conn: sqlite3.Connection) -> Iterator[None]:
    """Run the body's reads in one transaction, so they see one version of the file."""
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")


def head_checkpoint(conn: sqlite3.Connection, thread: str) -> CheckpointRecord | None:
    """The thread's head checkpoint (`Store.get_checkpoint` without an id)."""
    # One statement reads the thread's row and its head checkpoint together (one snapshot).
    row = conn.execute(sql.SELECT_HEAD_CHECKPOINT, (thread,)).fetchone()
    if row is None:
        with _read(conn):  # the probe must see the file as the query above did
            row = conn.execute(sql.SELECT_HEAD_CHECKPOINT, (thread,)).fetchone()
            if row is None:
                _no_thread(conn, thread)
                return None
    return conv.head_checkpoint_from_row(row, thread)


def _no_thread(conn: sqlite3.Connection, thread: str) -> None:
    """Refuse to say a thread does not exist when its checkpoints are there (a lost head)."""
    if conn.execute(sql.HAS_CHECKPOINTS, (thread,)).fetchone() is not None:
        raise CheckpointCorrupt(
            f"thread {thread!r} has checkpoints but no head: the store's file is damaged. "
            "Restore it from a backup; the other threads can still be read",
            thread=thread,
        )


def thread_record(conn: sqlite3.Connection, thread: str) -> ThreadRecord | None:
    """`Store.get_thread`."""
    row = conn.execute(sql.SELECT_THREAD, (thread,)).fetchone()
    if row is None:
        with _read(conn):
            row = conn.execute(sql.SELECT_THREAD, (thread,)).fetchone()
            if row is None:
                _no_thread(conn, thread)
                return None
    return conv.thread_from_row(row, thread)


def _head_seq(conn: sqlite3.Connection, thread: str) -> int | None:
    row = conn.execute(sql.SELECT_THREAD, (thread,)).fetchone()
    return None if row is None else conv.thread_from_row(row, thread).head_seq


def _checkpoints(
    conn: sqlite3.Connection, query: str, params: dict[str, object], thread: str
) -> tuple[int | None, list[CheckpointRecord]]:
    """Checkpoints of ``thread`` and its head seq, read in one snapshot.

    The rows carry the head seq (a subquery); only an empty result needs a second read.
    """
    rows = conn.execute(query, params).fetchall()
    if not rows:
        with _read(conn):
            head_seq = _head_seq(conn, thread)
            rows = conn.execute(query, params).fetchall()
        if not rows:
            return head_seq, []
    head_seq = rows[0][0]
    return head_seq, conv.checkpoints_from_rows(rows, thread=thread, offset=1)


def checkpoint(conn: sqlite3.Connection, thread: str, id: str) -> CheckpointRecord | None:
    """One checkpoint by id (`Store.get_checkpoint`)."""
    row = conn.execute(sql.SELECT_CHECKPOINT, (id, thread)).fetchone()
    return None if row is None else conv.checkpoint_from_row(row, thread=thread, id=id)


def checkpoint_range(
    conn: sqlite3.Connection, thread: str, lo: int, hi: int
) -> list[CheckpointRecord]:
    """`Store.checkpoint_range`."""
    params: dict[str, object] = {"thread": thread, "lo": lo, "hi": hi}
    head_seq, records = _checkpoints(conn, sql.SELECT_RANGE, params, thread)
    return conv.checked_range(records, head_seq, thread, lo, hi)


def checkpoints_at(
    conn: sqlite3.Connection, thread: str, seqs: list[int]
) -> list[CheckpointRecord]:
    """`Store.checkpoints_at` (``seqs`` checked, sorted and unique)."""
    if not seqs:
        return []
    rows = conn.execute(sql.SELECT_AT, (thread, json.dumps(seqs))).fetchall()
    return conv.checkpoints_from_rows(rows, thread=thread)


def checkpoint_page(
    conn: sqlite3.Connection, thread: str, before_seq: int | None, limit: int
) -> list[CheckpointRecord]:
    """`Store.list_checkpoints`."""
    before = 2**63 - 1 if before_seq is None else before_seq
    params: dict[str, object] = {"thread": thread, "before": before, "limit": limit}
    head_seq, records = _checkpoints(conn, sql.SELECT_PAGE, params, thread)
    return conv.checked_page(records, head_seq, thread, before_seq, limit)


def effect(conn: sqlite3.Connection, thread: str, key: str) -> EffectRecord | None:
    """`Store.get_effect`."""
    row = conn.execute(sql.SELECT_EFFECT, (thread, key)).fetchone()
    return None if row is None else conv.checked_effect(row, thread, key)


def interrupt(conn: sqlite3.Connection, id: str) -> InterruptRecord | None:
    """`Store.get_interrupt`."""
    row = conn.execute(sql.SELECT_INTERRUPT, (id,)).fetchone()
    return None if row is None else conv.interrupt_from_row(row, id=id)


def pending(
    conn: sqlite3.Connection, where: PendingFilter, limit: int, after: str | None
) -> list[InterruptRecord]:
    """`Store.pending`, through the index that fits the filter."""
    query, params = sql.pending_query(where, limit, after)
    with collector_paused():
        return conv.pending_from_rows(conn.execute(query, params).fetchall(), where)


def pending_counts(conn: sqlite3.Connection, where: PendingFilter) -> dict[str | None, int]:
    """`Store.pending_counts`."""
    query, params = sql.pending_counts_query(where)
    return {tool: int(count) for tool, count in conn.execute(query, params).fetchall()}
