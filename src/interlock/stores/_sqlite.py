"""`SqliteStore`: the embedded default store, one SQLite file shared by any number of processes.

How it stays fast and never reports "database is locked" under normal load:

* WAL journal: readers never block the writer nor each other; ``synchronous=FULL`` (default)
  makes every committed append survive power loss, ``NORMAL`` survives a process crash only.
* Every write is one short ``BEGIN IMMEDIATE`` transaction, so a writer takes the lock before it
  reads and can never deadlock upgrading a read lock. SQLite's busy handler waits for the lock
  up to ``busy_timeout``; a ``SQLITE_BUSY`` that escapes anyway is retried as a whole
  transaction with jittered backoff until the same deadline.
* One connection per store, used from one dedicated worker thread (see `ThreadWorker`) under
  a lock: an append is a single trip to that thread, and the event loop never blocks on disk.
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Final, Literal, TypeVar

import anyio.to_thread
import msgspec

from .._errors import (
    CheckpointCorrupt,
    InterruptAlreadyResolved,
    StoreClosed,
    StoreError,
    UnknownInterrupt,
)
from . import _rows as conv
from . import _sqlite_schema as sql
from ._audit import chain, thread_deleted
from ._base import (
    AuditEntry,
    AuditRecord,
    CheckpointRecord,
    EffectRecord,
    Fence,
    InterruptRecord,
    PauseKind,
    Resolution,
    ThreadRecord,
)
from ._checks import (
    check_append_args,
    check_pending_args,
    check_renewal,
    check_text,
    check_write,
    finish_refused,
    head_mismatch,
    lease_after,
)
from ._lifecycle import StoreLifecycle
from ._worker import ThreadWorker

__all__ = ["SqliteStore"]

T = TypeVar("T")

_SYNCHRONOUS: Final = ("FULL", "NORMAL", "OFF")
_MAX_ATTEMPTS: Final = 12
_SMALLEST_PAGE: Final = 512
_FIRST_BACKOFF: Final = 0.002
_MAX_BACKOFF: Final = 0.25
"""Seconds; the n-th retry sleeps a random time up to ``_FIRST_BACKOFF * 2**n``, at most this."""


class SqliteStore(StoreLifecycle):
    """A `Store` in one SQLite file; several processes may share the file.

    The file and its parent directory are created on first use; the schema is created or
    migrated then too. Use ``async with SqliteStore(path) as store:`` to open it eagerly (a bad
    file fails there) and close it on exit.

    Args:
        path: The database file.
        synchronous: ``FULL`` makes each append durable on power loss; ``NORMAL`` is faster and
            durable on a process crash; ``OFF`` is for tests.
        busy_timeout: Seconds an operation waits for another writer before `StoreError`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Literal["FULL", "NORMAL", "OFF"] = "FULL",
        busy_timeout: float = 5.0,
    ) -> None:
        if synchronous not in _SYNCHRONOUS:
            raise ValueError(f"synchronous must be one of {_SYNCHRONOUS}, not {synchronous!r}")
        if busy_timeout < 0:
            raise ValueError(f"busy_timeout must be >= 0 seconds, not {busy_timeout!r}")
        self._path = os.fspath(path)
        self._synchronous = synchronous
        self._busy_timeout = busy_timeout
        # Invariant: _conn is only touched by a thread holding _lock; None before first use
        # and after close.
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._worker = ThreadWorker(f"interlock-sqlite:{Path(self._path).name}")
        # The connection's current synchronous level (appends may lower it for one commit).
        self._sync_now: str = synchronous

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open" if self._conn is not None else "unopened"
        return f"<SqliteStore {self._path!r} {state}>"

    async def open(self) -> None:
        """Connect now rather than on first use: a bad location fails here."""
        await self._run(_nothing)

    async def append_checkpoint(
        self,
        record: CheckpointRecord,
        *,
        expected_head: str | None,
        new_interrupts: Sequence[InterruptRecord] = (),
        resolutions: Sequence[Resolution] = (),
        fence: Fence | None = None,
        audit: Sequence[AuditEntry] = (),
        durable: bool = True,
    ) -> int | None:
        """Commit a checkpoint, its new interrupts, resolutions and audit entries at once.

        One ``BEGIN IMMEDIATE`` transaction: check the lease and the head, resolve, insert. See
        `Store.append_checkpoint` for the rules and errors. With ``durable=False`` and
        ``synchronous="FULL"`` the commit runs at ``NORMAL`` (no ``fsync``; the next ``FULL``
        commit's ``fsync`` of the write-ahead log covers it).
        """
        check_append_args(record, new_interrupts, resolutions, expected_head, audit, fence)
        level = self._synchronous if durable or self._synchronous != "FULL" else "NORMAL"

        return await self._run(
            lambda c: _append(c, record, expected_head, new_interrupts, resolutions, fence, audit),
            synchronous=level,
        )

    def _set_synchronous(self, conn: sqlite3.Connection, level: str) -> None:
        """Set the connection's ``synchronous`` level for the next transaction(s)."""
        if self._sync_now != level:
            conn.execute(f"PRAGMA synchronous = {level}")
            self._sync_now = level

    async def renew_lease(self, thread: str, fence: Fence) -> None:
        """Extend or release a held lease (see `Store.renew_lease`)."""
        check_text("thread", thread)
        check_renewal(fence)
        await self._run(lambda c: _renew(c, thread, fence))

    async def begin_effect(
        self,
        thread: str,
        key: str,
        *,
        name: str,
        fence: Fence | None,
        retry: bool = False,
        audit: Sequence[AuditEntry] = (),
    ) -> tuple[bool, EffectRecord]:
        """Record that an effect is about to be called, unless it was (see `Store`)."""
        check_text("thread", thread)
        check_text("key", key)
        check_text("name", name)
        check_write(fence, audit)
        return await self._run(lambda c: _begin_effect(c, thread, key, name, fence, retry, audit))

    async def finish_effect(
        self,
        thread: str,
        key: str,
        *,
        result: bytes | None,
        fence: Fence | None,
        audit: Sequence[AuditEntry] = (),
    ) -> None:
        """Record an effect's outcome (see `Store.finish_effect`)."""
        check_text("thread", thread)
        check_text("key", key)
        check_write(fence, audit)
        await self._run(lambda c: _finish_effect(c, thread, key, result, fence, audit))

    async def get_effect(self, thread: str, key: str) -> EffectRecord | None:
        """Return one effect record, or None."""
        check_text("thread", thread)
        check_text("key", key)
        row = await self._run(lambda c: c.execute(sql.SELECT_EFFECT, (thread, key)).fetchone())
        return None if row is None else conv.checked_effect(row, thread, key)

    async def audit_log(
        self, *, thread: str | None = None, after: tuple[str, int] | None = None, limit: int = 1000
    ) -> list[AuditRecord]:
        """Return audit records ordered by (thread, seq) after the cursor."""
        check_text("thread", thread, optional=True)
        if after is not None:
            check_text("after[0]", after[0])
        return await self._run(lambda c: _audit_log(c, thread, after, max(limit, 0)))

    async def get_checkpoint(self, thread: str, id: str | None = None) -> CheckpointRecord | None:
        """Return one checkpoint (the head when ``id`` is None), or None if absent."""
        check_text("thread", thread)
        check_text("id", id, optional=True)
        if id is None:
            return await self._run(lambda c: _head(c, thread))
        return await self._run(lambda c: _one(c, thread, id))

    async def checkpoint_range(self, thread: str, *, lo: int, hi: int) -> list[CheckpointRecord]:
        """Return the thread's checkpoints with ``lo <= seq <= hi``, ascending by seq."""
        check_text("thread", thread)
        return await self._run(lambda c: _range(c, thread, lo, hi))

    async def list_checkpoints(
        self, thread: str, *, before_seq: int | None = None, limit: int = 50
    ) -> list[CheckpointRecord]:
        """Return up to ``limit`` checkpoints with ``seq < before_seq``, newest first."""
        check_text("thread", thread)
        return await self._run(lambda c: _page(c, thread, before_seq, max(limit, 0)))

    async def get_thread(self, thread: str) -> ThreadRecord | None:
        """Return the thread's head record, or None if the thread does not exist."""
        check_text("thread", thread)
        return await self._run(lambda c: _thread(c, thread))

    async def get_interrupt(self, id: str) -> InterruptRecord | None:
        """Return one interrupt by id, or None."""
        check_text("id", id)
        row = await self._run(lambda c: c.execute(sql.SELECT_INTERRUPT, (id,)).fetchone())
        return None if row is None else conv.interrupt_from_row(row, id=id)

    async def pending(
        self,
        *,
        thread: str | None = None,
        key: str | None = None,
        tool: str | None = None,
        older_than: float | None = None,
        limit: int = 100,
        after: str | None = None,
        deadline_before: float | None = None,
    ) -> list[InterruptRecord]:
        """Return pending interrupts, oldest first (ties in insertion order), through an index."""
        check_pending_args(thread=thread, key=key, tool=tool, after=after)
        query, params = sql.pending_query(
            thread, key, max(limit, 0), after, deadline_before, tool, older_than
        )
        rows = await self._run(lambda c: c.execute(query, params).fetchall())
        return conv.pending_from_rows(
            rows,
            thread=thread,
            key=key,
            tool=tool,
            older_than=older_than,
            deadline_before=deadline_before,
        )

    async def request_pause(self, thread: str, *, forced: bool = False) -> bool:
        """Ask whoever runs the thread to pause it (see `Store.request_pause`)."""
        check_text("thread", thread)
        kind = "forced" if forced else "planned"
        return await self._run(lambda c: _request_pause(c, thread, kind))

    async def take_pause_request(self, thread: str) -> PauseKind | None:
        """Return and remove the thread's pause request (see `Store.take_pause_request`)."""
        check_text("thread", thread)
        return await self._run(lambda c: _take_pause(c, thread))

    async def expire(self, *, older_than: float, limit: int = 1000) -> list[str]:
        """Delete finished threads last written before ``older_than`` (see `Store.expire`)."""
        return await self._run(lambda c: _expire(c, older_than, max(limit, 0)))

    async def delete_thread(self, thread: str) -> None:
        """Delete a thread, its checkpoints and its interrupts. No-op if absent."""
        check_text("thread", thread)
        await self._run(lambda c: _delete(c, thread))

    async def close(self) -> None:
        """Close the connection; SQLite then folds the WAL into the file. Idempotent."""
        with anyio.CancelScope(shield=True):  # a cancelled caller still releases the file
            await anyio.to_thread.run_sync(self._close)
            await anyio.to_thread.run_sync(self._worker.stop)

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
            if conn is None:
                return
            try:
                conn.close()
            except sqlite3.Error as exc:
                raise StoreError(f"closing SQLite database {self._path!r} failed: {exc}") from exc

    async def _run(
        self, fn: Callable[[sqlite3.Connection], T], *, synchronous: str | None = None
    ) -> T:
        """Run ``fn`` on the connection in a worker thread, retrying while the file is busy.

        Writes commit at ``synchronous`` (default: the store's level).
        """
        deadline = time.monotonic() + self._busy_timeout
        attempt = 1
        while True:
            try:
                return await self._worker.run(lambda: self._call(fn, synchronous))
            except _Busy as busy:
                left = deadline - time.monotonic()
                if attempt >= _MAX_ATTEMPTS or left <= 0:
                    raise StoreError(
                        f"SQLite database {self._path!r} stayed locked by another connection for "
                        f"{self._busy_timeout:g}s ({attempt} attempts): {busy.__cause__}. Another "
                        "process holds a long write transaction; shorten it or raise "
                        "SqliteStore(busy_timeout=...)"
                    ) from busy.__cause__
            backoff = min(_MAX_BACKOFF, _FIRST_BACKOFF * 2**attempt)
            await anyio.sleep(min(left, random.uniform(0, backoff)))
            attempt += 1

    def _call(self, fn: Callable[[sqlite3.Connection], T], synchronous: str | None = None) -> T:
        """Run ``fn`` under the lock, opening the database first if needed (worker thread)."""
        with self._lock:
            if self._closed:
                raise StoreClosed(f"SqliteStore {self._path!r} was closed; create a new one")
            try:
                conn = self._conn
                if conn is None:
                    conn = self._conn = self._open()
                    self._sync_now = self._synchronous
                self._set_synchronous(conn, synchronous or self._synchronous)
                return fn(conn)
            except sqlite3.Error as exc:
                if _is_busy(exc):
                    raise _Busy from exc
                raise self._translate(exc) from exc
            except sql.SchemaMismatch as exc:
                raise StoreError(f"cannot use {self._path!r} as an interlock store: {exc}") from exc
            except UnicodeDecodeError as exc:
                # sqlite3 decodes SQLite's own message; a damaged schema puts bytes in it.
                raise StoreError(
                    f"{self._path!r} is corrupted: SQLite reported an error whose text is not "
                    "valid UTF-8, which a damaged schema causes; restore the file from a backup"
                ) from exc
            except UnicodeEncodeError as exc:
                # Arguments are checked before they get here; this is the last line.
                raise ValueError(
                    f"a text argument holds a lone surrogate at position {exc.start}, which "
                    "UTF-8 cannot encode; pass valid Unicode strings"
                ) from exc

    def _open(self) -> sqlite3.Connection:
        if self._path != ":memory:":
            try:
                Path(self._path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the directory of SQLite database {self._path!r}: {exc}"
                ) from exc
        self._check_file()
        conn = sqlite3.connect(
            self._path,
            timeout=self._busy_timeout,
            isolation_level=None,  # we issue BEGIN IMMEDIATE / COMMIT ourselves
            check_same_thread=False,  # guarded by self._lock instead
        )
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            sql.migrate(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _check_file(self) -> None:
        """Refuse a file too short to be a database, which SQLite would start over as empty.

        An empty file is a new database (what ``touch`` or ``mkstemp`` leave); anything from
        one byte to less than the smallest page is what is left of a damaged one.
        """
        try:
            size = os.stat(self._path).st_size
        except OSError:
            return  # absent (SQLite creates it) or unreadable (connecting says why)
        if 0 < size < _SMALLEST_PAGE:
            raise StoreError(
                f"{self._path!r} holds {size} bytes, which is not a SQLite database (the "
                f"smallest is {_SMALLEST_PAGE}): it was truncated or is something else. "
                "Restore it from a backup, or point SqliteStore at a new file"
            )

    def _translate(self, exc: sqlite3.Error) -> StoreError:
        message = str(exc)
        if "not a database" in message or "malformed" in message:
            return StoreError(
                f"{self._path!r} is not a SQLite database or is corrupted ({message}); "
                "point SqliteStore at a new file, or restore this one from a backup"
            )
        if isinstance(exc, sqlite3.OperationalError) and "unable to open" in message:
            return StoreError(
                f"cannot open SQLite database {self._path!r} ({message}); check that the "
                "directory exists and is writable"
            )
        if "disk I/O error" in message:
            return self._io_error(message)
        return StoreError(f"SQLite database {self._path!r} failed: {type(exc).__name__}: {message}")

    def _io_error(self, message: str) -> StoreError:
        """Say what an I/O error means when the write-ahead log was removed under the store."""
        gone = [
            f"{self._path}{suffix}"
            for suffix in ("-wal", "-shm")
            if not os.path.exists(f"{self._path}{suffix}")
        ]
        if not gone:
            return StoreError(
                f"SQLite database {self._path!r} failed: {message}; check the disk (full, "
                "failing, or a network file system SQLite cannot lock)"
            )
        return StoreError(
            f"SQLite database {self._path!r} failed ({message}): its write-ahead log "
            f"({', '.join(repr(g) for g in gone)}) was removed while the database was in use, "
            "so the latest commits may live only in the processes that still have it open. "
            "Never delete the -wal or -shm files of an open database: stop every process "
            "that uses it, then open it again (restore it from a backup if commits are missing)"
        )


class _Busy(Exception):
    """The database was locked; the operation may be retried (the sqlite3 error is the cause)."""


class _UnknownTarget(Exception):
    def __init__(self, interrupt_id: str) -> None:
        self.interrupt_id = interrupt_id


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def _nothing(conn: sqlite3.Connection) -> None:
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


def _append(
    conn: sqlite3.Connection,
    record: CheckpointRecord,
    expected_head: str | None,
    new_interrupts: Sequence[InterruptRecord],
    resolutions: Sequence[Resolution],
    fence: Fence | None,
    audit: Sequence[AuditEntry],
) -> int | None:
    thread = record.thread
    now = time.time()
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


def _renew(conn: sqlite3.Connection, thread: str, fence: Fence) -> None:
    with _write(conn):
        _fenced(conn, thread, fence, time.time())


def _begin_effect(
    conn: sqlite3.Connection,
    thread: str,
    key: str,
    name: str,
    fence: Fence | None,
    retry: bool,
    audit: Sequence[AuditEntry],
) -> tuple[bool, EffectRecord]:
    now = time.time()
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


def _finish_effect(
    conn: sqlite3.Connection,
    thread: str,
    key: str,
    result: bytes | None,
    fence: Fence | None,
    audit: Sequence[AuditEntry],
) -> None:
    now = time.time()
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


def _audit_log(
    conn: sqlite3.Connection, thread: str | None, after: tuple[str, int] | None, limit: int
) -> list[AuditRecord]:
    if thread is not None:
        seq = after[1] if after is not None and after[0] == thread else 0
        rows = conn.execute(sql.AUDIT_OF_THREAD, (thread, seq, limit))
    else:
        rows = conn.execute(sql.AUDIT_ALL, (*(after or ("", 0)), limit))
    return [conv.audit_from_row(row) for row in rows]


def _request_pause(conn: sqlite3.Connection, thread: str, kind: str) -> bool:
    with _write(conn):
        return _changed(
            conn, sql.REQUEST_PAUSE, {"thread": thread, "kind": kind, "at": time.time()}
        )


def _take_pause(conn: sqlite3.Connection, thread: str) -> PauseKind | None:
    # Read first: the common answer is "none", and a read takes no write lock.
    if conn.execute(sql.PEEK_PAUSE, (thread,)).fetchone() is None:
        return None
    with _write(conn):
        row = conn.execute(sql.TAKE_PAUSE, (thread,)).fetchone()
    return None if row is None else row[0]


def _expire(conn: sqlite3.Connection, older_than: float, limit: int) -> list[str]:
    with _write(conn):
        rows = conn.execute(sql.EXPIRED_THREADS, (older_than, limit)).fetchall()
        # A damaged row must not delete a thread that is not finished.
        gone = [conv.thread_from_row(row, row[0]).thread for row in rows]
        for thread in gone:
            _delete_rows(conn, thread)
    return gone


def _delete(conn: sqlite3.Connection, thread: str) -> None:
    with _write(conn):
        _delete_rows(conn, thread)


def _delete_rows(conn: sqlite3.Connection, thread: str) -> None:
    if conn.execute(sql.SELECT_LEASE, (thread,)).fetchone() is not None:
        _log(conn, thread, [thread_deleted()], time.time())
    for statement in sql.DELETE_THREAD:
        conn.execute(statement, (thread,))


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


def _head(conn: sqlite3.Connection, thread: str) -> CheckpointRecord | None:
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


def _thread(conn: sqlite3.Connection, thread: str) -> ThreadRecord | None:
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
    return head_seq, [conv.checkpoint_from_row(row[1:], thread=thread) for row in rows]


def _one(conn: sqlite3.Connection, thread: str, id: str) -> CheckpointRecord | None:
    row = conn.execute(sql.SELECT_CHECKPOINT, (id, thread)).fetchone()
    return None if row is None else conv.checkpoint_from_row(row, thread=thread, id=id)


def _range(conn: sqlite3.Connection, thread: str, lo: int, hi: int) -> list[CheckpointRecord]:
    params: dict[str, object] = {"thread": thread, "lo": lo, "hi": hi}
    head_seq, records = _checkpoints(conn, sql.SELECT_RANGE, params, thread)
    return conv.checked_range(records, head_seq, thread, lo, hi)


def _page(
    conn: sqlite3.Connection, thread: str, before_seq: int | None, limit: int
) -> list[CheckpointRecord]:
    before = 2**63 - 1 if before_seq is None else before_seq
    params: dict[str, object] = {"thread": thread, "before": before, "limit": limit}
    head_seq, records = _checkpoints(conn, sql.SELECT_PAGE, params, thread)
    return conv.checked_page(records, head_seq, thread, before_seq, limit)
