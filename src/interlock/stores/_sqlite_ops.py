"""What each `SqliteStore` operation does on its connection: one transaction per write.

Every function here runs with the store's lock held on the one connection (on its worker
thread, or on the caller's when the event loop has nothing else to do), and takes the store's
clock reading (``now``) from the caller. Errors of the driver are left to
`SqliteStore`, which translates them at its edge. Appends are the exception to "one
transaction per write": concurrent ones may share one, each in its own savepoint
(`commit_group`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, cast

import msgspec

from .._collector import collector_paused
from .._errors import (
    CheckpointCorrupt,
    CheckpointNotFound,
    InterruptAlreadyResolved,
    StoreError,
    ThreadBusy,
    UnknownInterrupt,
)
from .._lazy import lazy_module
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
from ._checks import Lease, finish_refused, head_mismatch, lease_after

if TYPE_CHECKING:
    import json
else:  # imported by the first call that needs it, not by `import interlock`
    json = lazy_module("json", globals())

__all__ = [
    "KnownHeads",
    "Pending",
    "append_audit",
    "append_in",
    "audit_log",
    "begin_effect",
    "change_cursor",
    "changes",
    "checkpoint",
    "checkpoint_page",
    "checkpoint_range",
    "checkpoints_at",
    "commit_group",
    "delete",
    "effect",
    "expire",
    "finish_effect",
    "group_level",
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


T = TypeVar("T")


class _UnknownTarget(Exception):
    """A resolution names an interrupt the thread does not have (raised to roll back first)."""

    def __init__(self, interrupt_id: str, thread: str) -> None:
        self.interrupt_id = interrupt_id
        self.thread = thread


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


def _blob(value: bytes) -> bytes | bytearray:
    """``value`` as a parameter that sqlite3 binds without looking for an adapter.

    sqlite3 binds int, float, str and bytearray parameters directly, but looks every other
    type (bytes and None included) up in its adapter registry first, which costs more than
    copying a small blob into a bytearray (about 1 µs against 0.15 µs). SQLite stores both
    as the same BLOB. Large blobs are not worth the copy.
    """
    return bytearray(value) if len(value) <= _COPY_BLOB_MAX else value


_COPY_BLOB_MAX: Final = 8192

KNOWN_HEADS_MAX: Final = 1024
"""Threads whose row `KnownHeads` keeps (the latest appended to)."""

_HeadRow = tuple[str, int, str, float, bytearray, "str | None", int, float, bytearray]
"""A thread row after its key, as bound: head id, seq, status, updated_at, digest, then the
lease's owner, token, expiry and digest."""


class KnownHeads:
    """The rows of the threads this connection wrote or read last, as it wrote or read them.

    An append to such a thread does not read its row first: it checks the lease and the head
    against the known row, then moves the head with an ``UPDATE`` whose ``WHERE`` requires
    every column, digests included, to still be exactly that. The row is then what a read
    would have found and checked (a known row's digests are those of its values: this store
    computed them, or checked them when it read the row), so the outcome is the same. When
    anything differs (another process wrote the thread, a write of this connection was rolled
    back, the file was damaged) nothing is updated and the append reads the row as before,
    which raises whatever that row calls for. Used only under the store's lock.
    """

    __slots__ = ("_rows",)

    def __init__(self) -> None:
        self._rows: dict[str, _HeadRow] = {}

    def get(self, thread: str) -> _HeadRow | None:
        return self._rows.get(thread)

    def keep(self, thread: str, row: _HeadRow) -> None:
        rows = self._rows
        rows.pop(thread, None)  # re-inserted last: the oldest is evicted first
        rows[thread] = row
        if len(rows) > KNOWN_HEADS_MAX:
            del rows[next(iter(rows))]

    def forget(self, thread: str) -> None:
        self._rows.pop(thread, None)

    def clear(self) -> None:
        self._rows.clear()


def append_in(
    conn: sqlite3.Connection,
    record: CheckpointRecord,
    expected_head: str | None,
    new_interrupts: Sequence[InterruptRecord],
    resolutions: Sequence[Resolution],
    fence: Fence | None,
    audit: Sequence[AuditEntry],
    now: float,
    known: KnownHeads,
) -> tuple[int | None, Callable[[], None]]:
    """The writes of `Store.append_checkpoint`, inside the caller's write transaction.

    Returns the lease's token (None without a fence) and what to do once the transaction has
    committed (remember the thread's new row). Raises `_UnknownTarget` for a resolution of an
    interrupt the thread does not have: `commit_group` rolls this write back, then says
    which are pending.
    """
    thread = record.thread
    known_row = known.get(thread)
    known.forget(thread)  # kept again only once this append has committed
    # One cursor for the whole write (Connection.execute makes one per statement).
    db = conn.cursor()
    # 1. The lease, then the head (the write lock is held, so read-then-write is safe).
    moved = (
        None
        if known_row is None
        else _move_known_head(db, record, expected_head, fence, now, known_row)
    )
    if moved is None:
        moved = _move_head(db, record, expected_head, fence, now)
    new, token = moved
    # 2. Resolutions, each a compare-and-set out of pending.
    for res in resolutions:
        row = db.execute(sql.SELECT_INTERRUPT_OF_THREAD, (res.id, thread)).fetchone()
        if row is None:
            raise _UnknownTarget(res.id, thread)
        target = conv.interrupt_from_row(row, id=res.id, thread=thread)
        if target.status != "pending":
            raise InterruptAlreadyResolved(res.id, status=target.status)
        resolved = msgspec.structs.replace(
            target,
            status=res.status,
            resolved_at=res.resolved_at,
            resolution=res.resolution,
        )
        resolution = None if res.resolution is None else _blob(res.resolution)
        db.execute(
            sql.RESOLVE,
            (
                res.status,
                res.resolved_at,
                resolution,
                bytearray(conv.interrupt_digest(resolved)),
                res.id,
                thread,
                row[13],
            ),
        )
    # 3. The new rows.
    try:
        db.execute(sql.INSERT_CHECKPOINT, _checkpoint_params(record))
        if new_interrupts:
            db.executemany(sql.INSERT_INTERRUPT, map(_interrupt_params, new_interrupts))
    except sqlite3.IntegrityError as exc:
        raise StoreError(
            f"cannot append checkpoint {record.id!r} to thread {thread!r}: {exc}; "
            "checkpoint and interrupt ids must be unique across the store"
        ) from exc
    # 4. The changes it makes, for the feed (most appends make none).
    changes = derive(record, new_interrupts, resolutions)
    if changes:
        db.executemany(sql.INSERT_CHANGE, map(_change_params, conv.change_rows(record, changes)))
    _log(db, thread, audit, now)
    return None if fence is None else token, partial(known.keep, thread, new)


_STRENGTH: Final[dict[str, int]] = {"OFF": 0, "NORMAL": 1, "FULL": 2}


class Pending(Generic[T]):
    """One caller's write, waiting to be committed, alone or with others (`commit_group`).

    ``write`` does the write's statements inside an open transaction and returns its result
    and what to do once that transaction has committed; ``level`` is the ``synchronous``
    level it asks for. `outcome` returns the result or raises the write's error, once settled.
    """

    __slots__ = ("_error", "_value", "delivered", "level", "settled", "write")

    def __init__(
        self,
        write: Callable[[sqlite3.Connection], tuple[T, Callable[[], None] | None]],
        level: str,
    ) -> None:
        self.write = write
        self.level = level
        self.settled = False
        self.delivered = False
        self._value: T | None = None
        self._error: BaseException | None = None

    def succeed(self, value: T) -> None:
        self._value, self._error, self.settled = value, None, True

    def fail(self, error: BaseException) -> None:
        self._value, self._error, self.settled = None, error, True

    def again(self) -> None:
        """Make it unsettled, to be committed again (its last attempt found the file busy)."""
        self._value, self._error, self.settled, self.delivered = None, None, False, False

    def outcome(self) -> T:
        """The write's result, or its error raised (it must be settled)."""
        assert self.settled, "outcome() of a write that was not committed yet"
        self.delivered = True
        if self._error is not None:
            raise self._error
        return cast(T, self._value)


def group_level(group: Sequence[Pending[Any]]) -> str:
    """The ``synchronous`` level a group commits at: the strongest any of its writes asks for."""
    if len(group) == 1:
        return group[0].level
    return max((p.level for p in group), key=_STRENGTH.__getitem__)


def commit_group(conn: sqlite3.Connection, group: Sequence[Pending[Any]]) -> None:
    """Commit the writes of ``group`` in one ``BEGIN IMMEDIATE`` transaction: one fsync.

    Each write is all-or-nothing on its own: it runs inside a savepoint, and one that raises
    is rolled back to it and settled with its error while the others go on (each sees the
    writes before it, as if they had committed one by one in this order, so every check of
    a head or a lease holds per write). The writes that went through are settled only after
    the ``COMMIT`` returned. If SQLite itself rolls the whole transaction back (a full disk,
    an I/O error), the failing write is settled with its error and the others are written
    again in a new transaction. An error of ``BEGIN`` or ``COMMIT`` settles every write not
    committed with it (a busy ``BEGIN`` is retried by each caller). Every write is settled on
    return.
    """
    if len(group) == 1:
        _commit_alone(conn, group[0])
        return
    todo = list(group)
    try:
        while todo:
            todo = _commit_once(conn, todo)
    except BaseException as exc:  # BEGIN or COMMIT failed: nothing of the rest was committed
        for p in group:
            if not p.settled:
                p.fail(exc)
    finally:
        for p in group:  # cannot happen; a caller must never wait for nothing
            if not p.settled:
                p.fail(StoreError("a write was not committed; try it again"))


def _commit_alone(conn: sqlite3.Connection, p: Pending[Any]) -> None:
    """`commit_group` of one write: its own transaction, no savepoint."""
    db = conn.cursor()
    try:
        db.execute("BEGIN IMMEDIATE")
        value, on_commit = p.write(conn)
        db.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:
            conn.rollback()
        p.fail(_after_rollback(conn, exc))
        return
    if on_commit is not None:
        on_commit()
    p.succeed(value)


def _commit_once(conn: sqlite3.Connection, todo: list[Pending[Any]]) -> list[Pending[Any]]:
    """One transaction of `commit_group`; returns the writes to run again in a new one."""
    alone = len(todo) == 1  # no savepoint needed: the transaction is the write's own
    db = conn.cursor()
    db.execute("BEGIN IMMEDIATE")
    done: list[tuple[Pending[Any], Any, Callable[[], None] | None]] = []
    try:
        for i, p in enumerate(todo):
            if not alone:
                db.execute("SAVEPOINT interlock_write")
            try:
                value, on_commit = p.write(conn)
            except BaseException as exc:
                if not conn.in_transaction:  # SQLite rolled everything back
                    p.fail(_after_rollback(conn, exc))
                    return [q for q, _, _ in done] + todo[i + 1 :]
                if alone:
                    conn.rollback()
                else:
                    db.execute("ROLLBACK TO interlock_write")
                    db.execute("RELEASE interlock_write")
                p.fail(_after_rollback(conn, exc))
                continue
            if not alone:
                db.execute("RELEASE interlock_write")
            done.append((p, value, on_commit))
        if conn.in_transaction:
            if done:
                db.execute("COMMIT")
            else:
                conn.rollback()
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise
    for p, value, on_commit in done:
        if on_commit is not None:
            on_commit()
        p.succeed(value)
    return []


def _after_rollback(conn: sqlite3.Connection, exc: BaseException) -> BaseException:
    """The error a rolled-back write raises: for an unknown interrupt, the pending ones."""
    if not isinstance(exc, _UnknownTarget):
        return exc
    # Rolled back by now, so this lists what is really pending.
    pending = [row[0] for row in conn.execute(sql.PENDING_IDS_OF_THREAD, (exc.thread,))]
    if exc.interrupt_id in pending:  # its id index lost it: the file is damaged
        return conv.lost_interrupt(exc.interrupt_id, exc.thread)
    return UnknownInterrupt(exc.interrupt_id, pending, thread=exc.thread)


def _head_row(record: CheckpointRecord, lease: Lease) -> _HeadRow:
    """The thread row an append of ``record`` writes, leaving the thread's lease at ``lease``."""
    thread, seq, at = record.thread, int(record.seq), float(record.created_at)
    owner, token, expires = lease
    return (
        record.id,
        seq,
        record.status,
        at,
        bytearray(conv.thread_digest(thread, record.id, seq, record.status, at)),
        owner,
        token,
        expires,
        bytearray(conv.lease_digest(thread, owner, token, expires)),
    )


def _move_known_head(
    db: sqlite3.Cursor,
    record: CheckpointRecord,
    expected_head: str | None,
    fence: Fence | None,
    now: float,
    known: _HeadRow,
) -> tuple[_HeadRow, int] | None:
    """Move the head of a thread whose row is known (`KnownHeads`); None if the row differs.

    Whatever the known row would refuse is left to `_move_head`, which reads the row as it
    is and raises what that one calls for.
    """
    head_id, head_seq, _, _, _, owner, token, expires, _ = known
    try:
        lease = lease_after(record.thread, (owner, token, expires), fence, now)
    except ThreadBusy:  # FencedOut included
        return None
    if head_mismatch(record, expected_head, (head_id, head_seq)) is not None:
        return None
    new = _head_row(record, lease)
    if db.execute(sql.MOVE_KNOWN_HEAD, (*new, record.thread, *known)).rowcount != 1:
        return None
    return new, lease[1]


def _move_head(
    db: sqlite3.Cursor,
    record: CheckpointRecord,
    expected_head: str | None,
    fence: Fence | None,
    now: float,
) -> tuple[_HeadRow, int]:
    """Read and check the thread's row (lease, head), then move its head to ``record``."""
    thread = record.thread
    row = db.execute(sql.SELECT_HEAD_AND_LEASE, (thread,)).fetchone()
    head, current = None, None
    if row is not None:
        found = conv.thread_from_row(row[:6], thread)
        head, current = (found.head_id, found.head_seq), conv.lease_from_row(row[6:], thread)
    lease = lease_after(thread, current, fence, now)
    busy = head_mismatch(record, expected_head, head)
    if busy is not None:
        raise busy
    new = _head_row(record, lease)
    if row is None:
        db.execute(sql.INSERT_THREAD, (thread, *new))
    else:
        db.execute(sql.MOVE_HEAD, (*new, thread))
    return new, lease[1]


def _checkpoint_params(r: CheckpointRecord) -> tuple[object, ...]:
    """`conv.checkpoint_row` with its blobs bound as `_blob` binds them."""
    values = conv.checkpoint_values(r)
    return (*values[:9], _blob(r.body), bytearray(conv.checkpoint_digest(values)))


def _interrupt_params(r: InterruptRecord) -> tuple[object, ...]:
    """`conv.interrupt_row` with its blobs bound as `_blob` binds them."""
    row = conv.interrupt_row(r)
    resolution = None if r.resolution is None else _blob(r.resolution)
    return (*row[:9], _blob(r.body), row[10], resolution, row[12], bytearray(cast(bytes, row[13])))


def _change_params(row: tuple[object, ...]) -> tuple[object, ...]:
    """A row of `conv.change_rows` with its digest bound as `_blob` binds it."""
    return (*row[:6], bytearray(cast(bytes, row[6])))


def _audit_params(r: AuditRecord) -> tuple[object, ...]:
    """`conv.audit_row` with its blobs bound as `_blob` binds them."""
    return (
        r.thread,
        r.seq,
        r.at,
        r.kind,
        r.actor,
        _blob(r.data),
        bytearray(r.prev),
        bytearray(r.hash),
    )


def _log(
    conn: sqlite3.Connection | sqlite3.Cursor,
    thread: str,
    entries: Sequence[AuditEntry],
    now: float,
) -> None:
    """Append entries to the thread's audit chain (inside the caller's transaction)."""
    if entries:
        tail = conn.execute(sql.SHARED.audit_tail, (thread,)).fetchone()
        rows = chain(thread, None if tail is None else (tail[0], bytes(tail[1])), entries, now)
        conn.executemany(sql.SHARED.insert_audit, map(_audit_params, rows))


def _fenced(
    conn: sqlite3.Connection, thread: str, fence: Fence | None, now: float, known: KnownHeads
) -> None:
    """Check (and move) the thread's lease for a write that is not a checkpoint."""
    row = conn.execute(sql.SELECT_LEASE, (thread,)).fetchone()
    current = None if row is None else conv.lease_from_row(row, thread)
    lease = lease_after(thread, current, fence, now)
    if current is not None and current != lease:
        lease_digest = bytearray(conv.lease_digest(thread, *lease))
        conn.execute(sql.SHARED.set_lease, (*lease, lease_digest, thread))
        head = known.get(thread)
        if head is not None:  # the rest of the row as known (the next append checks it all)
            known.keep(thread, (*head[:5], *lease, lease_digest))


def renew(
    conn: sqlite3.Connection, thread: str, fence: Fence, now: float, known: KnownHeads
) -> None:
    """`Store.renew_lease`."""
    with _write(conn):
        _fenced(conn, thread, fence, now, known)


def begin_effect(
    conn: sqlite3.Connection,
    thread: str,
    key: str,
    name: str,
    fence: Fence | None,
    retry: bool,
    audit: Sequence[AuditEntry],
    now: float,
    known: KnownHeads,
) -> tuple[bool, EffectRecord]:
    """`Store.begin_effect`."""
    with _write(conn):
        _fenced(conn, thread, fence, now, known)
        row = conn.execute(sql.SHARED.select_effect, (thread, key)).fetchone()
        if row is not None:
            found = conv.checked_effect(row, thread, key)
            if not (retry and found.status == "started"):
                return False, found
            conn.execute(sql.RESTART_EFFECT, (now, thread, key))
        else:
            conn.execute(sql.INSERT_EFFECT, (thread, key, name, now))
        _log(conn, thread, audit, now)
        started = conn.execute(sql.SHARED.select_effect, (thread, key)).fetchone()
    return True, conv.checked_effect(started, thread, key)


def finish_effect(
    conn: sqlite3.Connection,
    thread: str,
    key: str,
    result: bytes | None,
    fence: Fence | None,
    audit: Sequence[AuditEntry],
    now: float,
    known: KnownHeads,
) -> None:
    """`Store.finish_effect`."""
    with _write(conn):
        _fenced(conn, thread, fence, now, known)
        if not _changed(conn, sql.SHARED.finish_effect, (now, result, thread, key)):
            row = conn.execute(sql.SHARED.select_effect, (thread, key)).fetchone()
            refused = finish_refused(
                thread, key, None if row is None else conv.checked_effect(row, thread, key), result
            )
            if refused is None:
                return  # the same outcome recorded again (a retried call)
            raise refused
        _log(conn, thread, audit, now)


def append_audit(
    conn: sqlite3.Connection, thread: str, entries: Sequence[AuditEntry], now: float
) -> None:
    """`Store.append_audit`: the write lock serialises it with every other write to the log."""
    with _write(conn):
        if conn.execute(sql.SELECT_LEASE, (thread,)).fetchone() is None:
            _no_thread(conn, thread)
            raise CheckpointNotFound(thread)
        _log(conn, thread, entries, now)


def audit_log(
    conn: sqlite3.Connection, thread: str | None, after: tuple[str, int] | None, limit: int
) -> list[AuditRecord]:
    """`Store.audit_log`."""
    query, params = sql.SHARED.audit_query(thread, after, limit)
    return [conv.audit_from_row(row) for row in conn.execute(query, params)]


def request_pause(conn: sqlite3.Connection, thread: str, kind: PauseKind, now: float) -> bool:
    """`Store.request_pause`."""
    with _write(conn):
        return _changed(conn, sql.SHARED.request_pause, (thread, kind, now, thread))


def take_pause(conn: sqlite3.Connection, thread: str) -> PauseKind | None:
    """`Store.take_pause_request`."""
    # Read first: the common answer is "none", and a read takes no write lock.
    if conn.execute(sql.PEEK_PAUSE, (thread,)).fetchone() is None:
        return None
    with _write(conn):
        row = conn.execute(sql.SHARED.take_pause, (thread,)).fetchone()
    return None if row is None else row[0]


def expire(
    conn: sqlite3.Connection, older_than: float, limit: int, now: float, known: KnownHeads
) -> list[str]:
    """`Store.expire`."""
    known.clear()
    with _write(conn):
        rows = conn.execute(sql.EXPIRED_THREADS, (older_than, limit)).fetchall()
        # A damaged row must not delete a thread that is not finished.
        gone = [conv.thread_from_row(row, row[0]).thread for row in rows]
        for thread in gone:
            _delete_rows(conn, thread, now)
    return gone


def delete(conn: sqlite3.Connection, thread: str, now: float, known: KnownHeads) -> None:
    """`Store.delete_thread`."""
    known.forget(thread)
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


def head_checkpoint(
    conn: sqlite3.Connection, thread: str, known: KnownHeads
) -> CheckpointRecord | None:
    """The thread's head checkpoint (`Store.get_checkpoint` without an id).

    The thread's row, read with it, becomes known (`KnownHeads`) when its lease is sound: a
    call that reads the head usually appends next.
    """
    # One statement reads the thread's row and its head checkpoint together (one snapshot).
    row = conn.execute(sql.SELECT_HEAD_CHECKPOINT, (thread,)).fetchone()
    if row is None:
        with _read(conn):  # the probe must see the file as the query above did
            row = conn.execute(sql.SELECT_HEAD_CHECKPOINT, (thread,)).fetchone()
            if row is None:
                _no_thread(conn, thread)
                return None
    head = row[:-4]  # the lease columns come last
    record = conv.head_checkpoint_from_row(head, thread)
    try:
        owner, token, expires = conv.lease_from_row(row[-4:], thread)
    except CheckpointCorrupt:  # not this read's business: the next append reads and refuses it
        known.forget(thread)
        return record
    # The thread columns as read (and checked against their digest just now).
    _, head_id, head_seq, status, updated_at, digest = head[-6:]
    known.keep(
        thread,
        (
            head_id,
            head_seq,
            status,
            updated_at,
            bytearray(digest),
            owner,
            token,
            expires,
            bytearray(row[-1]),
        ),
    )
    return record


def _no_thread(conn: sqlite3.Connection, thread: str) -> None:
    """Refuse to say a thread does not exist when its checkpoints are there (a lost head)."""
    if conn.execute(sql.SHARED.has_checkpoints, (thread,)).fetchone() is not None:
        raise CheckpointCorrupt(
            f"thread {thread!r} has checkpoints but no head: the store's file is damaged. "
            "Restore it from a backup; the other threads can still be read",
            thread=thread,
        )


def threads(
    conn: sqlite3.Connection, status: str | None, limit: int, after: str | None
) -> list[ThreadRecord]:
    """`Store.threads`."""
    query, params = sql.SHARED.threads_query(status, limit, after)
    return [conv.thread_from_row(row, row[0]) for row in conn.execute(query, params)]


def thread_record(conn: sqlite3.Connection, thread: str) -> ThreadRecord | None:
    """`Store.get_thread`."""
    row = conn.execute(sql.SHARED.select_thread, (thread,)).fetchone()
    if row is None:
        with _read(conn):
            row = conn.execute(sql.SHARED.select_thread, (thread,)).fetchone()
            if row is None:
                _no_thread(conn, thread)
                return None
    return conv.thread_from_row(row, thread)


def _head_seq(conn: sqlite3.Connection, thread: str) -> int | None:
    row = conn.execute(sql.SHARED.select_thread, (thread,)).fetchone()
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
    row = conn.execute(sql.SHARED.select_checkpoint, (id, thread)).fetchone()
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
    row = conn.execute(sql.SHARED.select_effect, (thread, key)).fetchone()
    return None if row is None else conv.checked_effect(row, thread, key)


def interrupt(conn: sqlite3.Connection, id: str) -> InterruptRecord | None:
    """`Store.get_interrupt`."""
    row = conn.execute(sql.SHARED.select_interrupt, (id,)).fetchone()
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
