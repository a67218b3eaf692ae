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
  A call that cannot wait on the disk (a row read by its key, a commit without an fsync) runs
  on the caller's thread instead when the connection is free, without a busy wait or an
  automatic checkpoint (`SqliteStore._try_inline`): the hand-off would cost more than it.
* Group commit: appends that callers queue while a transaction is being written commit
  together, in one transaction and one fsync; each in a savepoint of its own, so that each is
  still all-or-nothing and checked on its own, and a failing one fails alone. Nobody is told
  an append committed before its transaction did (`SqliteStore._commit`).

The change feed (`SqliteStore.changes`) is a table that each append writes in its transaction,
under the write lock, so its seqs go up in commit order across all processes.

This module is the store's edge: the worker thread, retries while the file is busy, opening
the file, and the translation of driver errors. What each operation does inside the database
is in `_sqlite_ops`, the SQL it runs in `_sqlite_sql` and `_shared_sql`, the schema in
``sql/sqlite/`` (migrated by `_sqlite_schema`).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, TypeVar, cast

from .._errors import StoreClosed, StoreError
from .._lazy import lazy_callable, lazy_module
from . import _sqlite_identities
from . import _sqlite_ops as ops
from . import _sqlite_schema as schema
from ._base import (
    AuditEntry,
    AuditRecord,
    ChangeRecord,
    CheckpointRecord,
    CheckpointStatus,
    EffectRecord,
    Fence,
    InterruptRecord,
    PauseKind,
    PendingFilter,
    Resolution,
    ThreadRecord,
)
from ._changes import check_follow, check_prune, seq_cursor
from ._checks import (
    check_append_args,
    check_audit_append,
    check_pause_kind,
    check_pending_args,
    check_renewal,
    check_seqs,
    check_text,
    check_threads_args,
    check_write,
)
from ._lifecycle import StoreLifecycle
from ._sql_channels import ChannelSql, SqlChannelMessages
from ._sql_identities import SqlIdentities
from ._worker import ThreadWorker

if TYPE_CHECKING:
    import random
    from pathlib import Path

    import anyio
    import anyio.to_thread
else:  # imported by the first call that needs it, not by `import interlock`
    anyio = lazy_module("anyio", globals(), "anyio.to_thread")
    random = lazy_module("random", globals())
    Path = lazy_callable("pathlib", "Path", globals())

__all__ = ["SqliteStore"]

T = TypeVar("T")

_SYNCHRONOUS: Final = ("FULL", "NORMAL", "OFF")
_MAX_ATTEMPTS: Final = 12
_SMALLEST_PAGE: Final = 512
_MMAP_BYTES: Final = 256 * 1024 * 1024
# The start of a WAL index (the -shm file), in the host's byte order: iVersion, unused,
# iChange, isInit, bigEndCksum, szPage, mxFrame (https://sqlite.org/walformat.html).
_INDEX_HEADER: Final = struct.Struct("=12xB1xHI")
_WAL_HEADER_BYTES: Final = 32
_FRAME_HEADER_BYTES: Final = 24
"""How much of the file SQLite reads through a memory map instead of ``read()`` calls
(address space, not memory: the pages are the kernel's page cache). A long thread's snapshots
are large rows, which a map reads without a system call and a copy per page."""
_GROUP_MAX: Final = 256
"""The most appends committed in one transaction (`SqliteStore._commit`)."""
_INLINE_WRITES_MAX: Final = 64
"""The most commits in a row run on the caller's thread (`SqliteStore._try_inline`), which
never checkpoint the write-ahead log: the next commit goes to the worker thread, which does."""
_FIRST_BACKOFF: Final = 0.002
_MAX_BACKOFF: Final = 0.25
"""Seconds; the n-th retry sleeps a random time up to ``_FIRST_BACKOFF * 2**n``, at most this."""


class SqliteStore(SqlIdentities, SqlChannelMessages, StoreLifecycle):
    """A `Store` in one SQLite file; several processes may share the file.

    The file and its parent directory are created on first use; the schema is created or
    migrated then too. Use ``async with SqliteStore(path) as store:`` to open it eagerly (a bad
    file fails there) and close it on exit.

    Args:
        path: The database file.
        synchronous: ``FULL`` makes each append durable on power loss; ``NORMAL`` is faster and
            durable on a process crash; ``OFF`` is for tests.
        busy_timeout: Seconds an operation waits for another writer before `StoreError`.
        clock: The store's time in Unix seconds: when leases expire, and when audit entries,
            effects and pause requests are written. Every process sharing the file should
            agree on it. Tests pass a clock they move themselves (`interlock.testing.FakeClock`)
            rather than waiting for a lease to run out; it may be read on another thread.
    """

    verifies_checkpoints: ClassVar[bool] = True
    """Every checkpoint row read is checked against its digest, which covers the body."""

    _identity_ops = _sqlite_identities
    _channel_sql = ChannelSql.bound_to("?")

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Literal["FULL", "NORMAL", "OFF"] = "FULL",
        busy_timeout: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if synchronous not in _SYNCHRONOUS:
            raise ValueError(f"synchronous must be one of {_SYNCHRONOUS}, not {synchronous!r}")
        if busy_timeout < 0:
            raise ValueError(f"busy_timeout must be >= 0 seconds, not {busy_timeout!r}")
        self._path = os.fspath(path)
        self._synchronous = synchronous
        self._busy_timeout = busy_timeout
        self._clock = clock
        # Invariant: _conn is only touched by a thread holding _lock; None before first use
        # and after close.
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._worker = ThreadWorker(f"interlock-sqlite:{Path(self._path).name}")
        # The connection's current synchronous level (appends may lower it for one commit).
        self._sync_now: str = synchronous
        # Whether the connection is set for a call on the caller's thread (`_try_inline`): no
        # busy wait, no automatic checkpoint. Guarded by _lock like the connection.
        self._inline_now = False
        self._autocheckpoint = 1000  # the connection's own setting, read when it opens
        # Commits run on the caller's thread since the worker last committed (`_try_inline`).
        self._inline_writes = 0
        # The thread rows this connection wrote last (guarded by _lock like the connection).
        self._known = ops.KnownHeads()
        # Appends waiting to be committed together (`_commit`); appended on any thread,
        # taken under _lock.
        self._waiting: deque[ops.Pending[Any]] = deque()

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open" if self._conn is not None else "unopened"
        return f"<SqliteStore {self._path!r} {state}>"

    async def open(self) -> None:
        """Connect now rather than on first use: a bad location fails here."""
        await self._run(ops.nothing)

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
        commit's ``fsync`` of the write-ahead log covers it). Appends of concurrent callers
        may share the transaction (group commit), which then commits at the strongest level
        any of them asks for; each is still all-or-nothing, and its errors are its own.
        """
        check_append_args(record, new_interrupts, resolutions, expected_head, audit, fence)
        level = self._synchronous if durable or self._synchronous != "FULL" else "NORMAL"
        known = self._known
        clock = self._clock
        # The clock is read in the worker thread, when the write runs (each attempt).
        write: ops.Pending[int | None] = ops.Pending(
            lambda c: ops.append_in(
                c,
                record,
                expected_head,
                new_interrupts,
                resolutions,
                fence,
                audit,
                clock(),
                known,
            ),
            level,
        )
        self._waiting.append(write)
        try:
            return await self._run(
                lambda c: self._commit(c, write),
                synchronous=level,
                inline=None if level == "FULL" else "write",
            )
        finally:
            if not write.settled:  # never reached the connection (cancelled, closed)
                self._withdraw(write)

    def _withdraw(self, write: ops.Pending[Any]) -> None:
        """Take back a write whose caller is gone before it was committed: no later group
        may commit what its caller was told failed."""
        with self._lock:  # no group is being committed meanwhile
            if not write.settled:
                with contextlib.suppress(ValueError):
                    self._waiting.remove(write)

    def _commit(self, conn: sqlite3.Connection, write: ops.Pending[T]) -> T:
        """Commit ``write`` with every other write waiting by then, in one transaction.

        Group commit: the appends that callers queued while an earlier transaction was being
        written (and fsynced) wait in ``_waiting``; the first of them to reach the connection
        commits them all at once, one fsync for the lot, and the others find theirs settled.
        Each write is still all-or-nothing and checked on its own (`ops.commit_group`), and
        none is acknowledged before its transaction committed. Runs under the lock.
        """
        if write.delivered:  # its last transaction found the file busy: this is the retry
            write.again()
            self._waiting.append(write)
        waiting = self._waiting
        if len(waiting) == 1 and waiting[0] is write:  # alone: the common, uncontended case
            waiting.popleft()
            self._set_synchronous(conn, write.level)
            ops.commit_group(conn, (write,))
            return write.outcome()
        while not write.settled:
            group: list[ops.Pending[Any]] = []
            while waiting and len(group) < _GROUP_MAX:
                group.append(waiting.popleft())
            if not group:  # cannot happen: an unsettled write is in the queue
                raise StoreError("an append left the commit queue uncommitted; try it again")
            self._set_synchronous(conn, ops.group_level(group))
            ops.commit_group(conn, group)
        return write.outcome()

    def _set_synchronous(self, conn: sqlite3.Connection, level: str) -> None:
        """Set the connection's ``synchronous`` level for the next transaction(s)."""
        if self._sync_now != level:
            conn.execute(f"PRAGMA synchronous = {level}")
            self._sync_now = level

    async def renew_lease(self, thread: str, fence: Fence) -> None:
        """Extend or release a held lease (see `Store.renew_lease`)."""
        check_text("thread", thread)
        check_renewal(fence)
        await self._run(lambda c: ops.renew(c, thread, fence, self._clock(), self._known))

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
        return await self._run(
            lambda c: ops.begin_effect(
                c, thread, key, name, fence, retry, audit, self._clock(), self._known
            )
        )

    async def finish_effect(
        self,
        thread: str,
        key: str,
        *,
        result: bytes | None,
        fence: Fence | None,
        audit: Sequence[AuditEntry] = (),
        durable: bool = True,
    ) -> None:
        """Record an effect's outcome (see `Store.finish_effect`)."""
        check_text("thread", thread)
        check_text("key", key)
        check_write(fence, audit)
        level = self._synchronous if durable or self._synchronous != "FULL" else "NORMAL"
        await self._run(
            lambda c: ops.finish_effect(
                c, thread, key, result, fence, audit, self._clock(), self._known
            ),
            synchronous=level,
        )

    async def get_effect(self, thread: str, key: str) -> EffectRecord | None:
        """Return one effect record, or None."""
        check_text("thread", thread)
        check_text("key", key)
        return await self._run(lambda c: ops.effect(c, thread, key))

    async def audit_log(
        self, *, thread: str | None = None, after: tuple[str, int] | None = None, limit: int = 1000
    ) -> list[AuditRecord]:
        """Return audit records ordered by (thread, seq) after the cursor."""
        check_text("thread", thread, optional=True)
        if after is not None:
            check_text("after[0]", after[0])
        return await self._run(lambda c: ops.audit_log(c, thread, after, max(limit, 0)))

    async def append_audit(
        self, thread: str, entries: Sequence[AuditEntry], *, durable: bool = True
    ) -> None:
        """Append entries to an existing thread's audit log (see `Store.append_audit`).

        One ``BEGIN IMMEDIATE`` transaction, as an append's; ``durable=False`` commits at
        ``NORMAL`` as `append_checkpoint` does.
        """
        check_audit_append(thread, entries)
        level = self._synchronous if durable or self._synchronous != "FULL" else "NORMAL"
        await self._run(
            lambda c: ops.append_audit(c, thread, entries, self._clock()), synchronous=level
        )

    async def get_checkpoint(self, thread: str, id: str | None = None) -> CheckpointRecord | None:
        """Return one checkpoint (the head when ``id`` is None), or None if absent."""
        check_text("thread", thread)
        check_text("id", id, optional=True)
        if id is None:
            return await self._run(
                lambda c: ops.head_checkpoint(c, thread, self._known), inline="read"
            )
        return await self._run(lambda c: ops.checkpoint(c, thread, id), inline="read")

    async def checkpoint_range(self, thread: str, *, lo: int, hi: int) -> list[CheckpointRecord]:
        """Return the thread's checkpoints with ``lo <= seq <= hi``, ascending by seq."""
        check_text("thread", thread)
        return await self._run(lambda c: ops.checkpoint_range(c, thread, lo, hi))

    async def checkpoints_at(self, thread: str, seqs: Sequence[int]) -> list[CheckpointRecord]:
        """Return the thread's checkpoints whose seq is in ``seqs``, ascending by seq."""
        check_text("thread", thread)
        wanted = check_seqs(seqs)
        return await self._run(lambda c: ops.checkpoints_at(c, thread, wanted))

    async def list_checkpoints(
        self, thread: str, *, before_seq: int | None = None, limit: int = 50
    ) -> list[CheckpointRecord]:
        """Return up to ``limit`` checkpoints with ``seq < before_seq``, newest first."""
        check_text("thread", thread)
        return await self._run(lambda c: ops.checkpoint_page(c, thread, before_seq, max(limit, 0)))

    async def get_thread(self, thread: str) -> ThreadRecord | None:
        """Return the thread's head record, or None if the thread does not exist."""
        check_text("thread", thread)
        return await self._run(lambda c: ops.thread_record(c, thread), inline="read")

    async def threads(
        self,
        *,
        status: CheckpointStatus | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> list[ThreadRecord]:
        """Return threads' heads in thread id order (see `Store.threads`)."""
        check_threads_args(status, after)
        return await self._run(lambda c: ops.threads(c, status, max(limit, 0), after))

    async def get_interrupt(self, id: str) -> InterruptRecord | None:
        """Return one interrupt by id, or None."""
        check_text("id", id)
        return await self._run(lambda c: ops.interrupt(c, id), inline="read")

    async def pending(
        self, where: PendingFilter | None = None, /, *, limit: int = 100, after: str | None = None
    ) -> list[InterruptRecord]:
        """Return pending interrupts, oldest first (ties in insertion order), through an index."""
        checked = check_pending_args(where, after)
        return await self._run(lambda c: ops.pending(c, checked, max(limit, 0), after))

    async def pending_counts(self, where: PendingFilter | None = None, /) -> dict[str | None, int]:
        """Return how many pending interrupts match ``where``, per tool, through an index."""
        checked = check_pending_args(where, None)
        return await self._run(lambda c: ops.pending_counts(c, checked))

    async def request_pause(self, thread: str, *, kind: PauseKind = "planned") -> bool:
        """Ask whoever runs the thread to pause it (see `Store.request_pause`)."""
        check_text("thread", thread)
        check_pause_kind(kind)
        return await self._run(lambda c: ops.request_pause(c, thread, kind, self._clock()))

    async def take_pause_request(self, thread: str) -> PauseKind | None:
        """Return and remove the thread's pause request (see `Store.take_pause_request`)."""
        check_text("thread", thread)
        return await self._run(lambda c: ops.take_pause(c, thread))

    async def expire(self, *, older_than: float, limit: int = 1000) -> list[str]:
        """Delete finished threads last written before ``older_than`` (see `Store.expire`)."""
        return await self._run(
            lambda c: ops.expire(c, older_than, max(limit, 0), self._clock(), self._known)
        )

    async def delete_thread(self, thread: str) -> None:
        """Delete a thread, its checkpoints and its interrupts. No-op if absent."""
        check_text("thread", thread)
        await self._run(lambda c: ops.delete(c, thread, self._clock(), self._known))

    async def changes(self, *, after: str | None = None, limit: int = 1000) -> list[ChangeRecord]:
        """Return the changes committed after cursor ``after`` (see `Store.changes`).

        A cursor is the decimal seq of the last change seen (``"0"``: before the first). Every
        append holds the file's write lock, so seqs go up in commit order: a reader that sees
        seq n sees every change before it, whichever process wrote it.
        """
        check_follow(after, limit)
        position = seq_cursor(after)
        return await self._run(lambda c: ops.changes(c, position, limit))

    async def change_cursor(self) -> str:
        """Return the cursor of now (see `Store.change_cursor`): the last seq written."""
        return await self._run(ops.change_cursor)

    async def prune_changes(self, *, older_than: float, limit: int = 10000) -> int:
        """Delete changes committed before ``older_than`` (see `Store.prune_changes`)."""
        moment = check_prune(older_than, limit)
        return await self._run(lambda c: ops.prune_changes(c, moment, limit))

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
        self,
        fn: Callable[[sqlite3.Connection], T],
        *,
        synchronous: str | None = None,
        inline: Literal["read", "write"] | None = None,
    ) -> T:
        """Run ``fn`` on the connection in a worker thread, retrying while the file is busy.

        Writes commit at ``synchronous`` (default: the store's level). ``inline`` marks a call
        that never waits on the disk, so it may run right here instead (`_try_inline`): a
        read of one row by its key, or a write that commits without an fsync.
        """
        # On an idle loop the worker would run the call right here, as it is: do just that.
        here = inline is not None and self._worker.runs_here()
        if inline is not None and not here:
            ran, value = self._try_inline(fn, synchronous, inline == "write")
            if ran:
                return cast(T, value)
        deadline = time.monotonic() + self._busy_timeout
        attempt = 1
        while True:
            try:
                if here:
                    here = False  # a retry, after a sleep, asks the worker again
                    value = self._call(fn, synchronous)
                else:
                    value = await self._worker.run(lambda: self._call(fn, synchronous))
            except _Busy as busy:
                left = deadline - time.monotonic()
                if attempt >= _MAX_ATTEMPTS or left <= 0:
                    raise StoreError(
                        f"SQLite database {self._path!r} stayed locked by another connection for "
                        f"{self._busy_timeout:g}s ({attempt} attempts): {busy.__cause__}. Another "
                        "process holds a long write transaction; shorten it or raise "
                        "SqliteStore(busy_timeout=...)"
                    ) from busy.__cause__
            else:
                if synchronous is not None:  # a commit where the log is checkpointed again
                    self._inline_writes = 0
                return value
            backoff = min(_MAX_BACKOFF, _FIRST_BACKOFF * 2**attempt)
            await anyio.sleep(min(left, random.uniform(0, backoff)))
            attempt += 1

    def _try_inline(
        self, fn: Callable[[sqlite3.Connection], T], synchronous: str | None, write: bool
    ) -> tuple[bool, T | None]:
        """Run ``fn`` on the caller's thread if that cannot make it wait; ``(ran, result)``.

        Handing a call to the worker thread and waking the event loop afterwards costs more
        than a point read or an fsync-less commit takes (~100 µs against ~30–90 µs here), so
        such a call runs right here when nothing could hold it up:

        * the connection is free: the worker thread has nothing running or queued (so calls
          run here never keep overtaking queued ones), and the lock is taken without waiting,
          or not at all (another thread holds the connection: the call goes to the worker);
        * a write is the only one waiting to be committed (otherwise it joins the group);
        * the connection's busy timeout is 0 meanwhile: if another connection holds the
          file's write lock, SQLite answers "busy" at once instead of sleeping, nothing was
          written, and the call goes to the worker, which waits and retries as always;
        * the connection's automatic checkpoints are off meanwhile (a checkpoint fsyncs): at
          most `_INLINE_WRITES_MAX` commits in a row run here, then one goes to the worker,
          whose commits checkpoint the write-ahead log as before.

        What runs here is one complete transaction under the store's lock, as on the worker:
        no other call sees it half done, and a read sees only committed data. The worker
        waits for the lock at most one such call (a row by its key, or one commit's pages
        written to the log without an fsync).
        """
        if write and self._inline_writes >= _INLINE_WRITES_MAX:
            return False, None
        if self._worker.busy or not self._lock.acquire(blocking=False):
            return False, None
        try:
            conn = self._conn
            if conn is None or self._closed:  # opening may wait; the worker does it
                return False, None
            if write and len(self._waiting) != 1:  # others wait: commit them all, on the worker
                return False, None
            try:
                if not self._inline_now:
                    self._enter_inline()
                self._set_synchronous(conn, synchronous or self._synchronous)
                value = fn(conn)
            except _DRIVER_ERRORS as exc:
                error = self._error(exc)
                if isinstance(error, _Busy):
                    return False, None
                raise error from exc
            if write:
                self._inline_writes += 1
            return True, value
        finally:
            self._lock.release()

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
                    self._inline_now = False
                elif self._inline_now:
                    self._leave_inline()
                self._set_synchronous(conn, synchronous or self._synchronous)
                return fn(conn)
            except _DRIVER_ERRORS as exc:
                raise self._error(exc) from exc

    def _enter_inline(self) -> None:
        """Make the connection answer "busy" at once and never checkpoint (under the lock)."""
        conn = self._conn
        assert conn is not None
        conn.execute("PRAGMA busy_timeout = 0")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        self._inline_now = True

    def _leave_inline(self) -> None:
        """Give the connection its busy wait and automatic checkpoints back (under the lock)."""
        conn = self._conn
        assert conn is not None
        conn.execute(f"PRAGMA busy_timeout = {round(self._busy_timeout * 1000)}")
        conn.execute(f"PRAGMA wal_autocheckpoint = {self._autocheckpoint}")
        self._inline_now = False

    def _error(self, exc: BaseException) -> BaseException:
        """The store's error for one the driver raised (``raise self._error(exc) from exc``):
        `_Busy` for a locked file, which the caller retries."""
        if isinstance(exc, sqlite3.Error):
            return _Busy() if _is_busy(exc) else self._translate(exc)
        if isinstance(exc, schema.SchemaMismatch):
            return StoreError(f"cannot use {self._path!r} as an interlock store: {exc}")
        if isinstance(exc, UnicodeDecodeError):
            # sqlite3 decodes SQLite's own message; a damaged schema puts bytes in it.
            return StoreError(
                f"{self._path!r} is corrupted: SQLite reported an error whose text is not "
                "valid UTF-8, which a damaged schema causes; restore the file from a backup"
            )
        assert isinstance(exc, UnicodeEncodeError)
        # Arguments are checked before they get here; this is the last line.
        return ValueError(
            f"a text argument holds a lone surrogate at position {exc.start}, which "
            "UTF-8 cannot encode; pass valid Unicode strings"
        )

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
            conn.execute(f"PRAGMA mmap_size = {_MMAP_BYTES}")
            self._autocheckpoint = int(conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
            schema.migrate(conn)
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
        wal, index = f"{self._path}-wal", f"{self._path}-shm"
        if not _log_removed(wal, index):
            return StoreError(
                f"SQLite database {self._path!r} failed: {message}; check the disk (full, "
                "failing, or a network file system SQLite cannot lock)"
            )
        removed = repr(wal) if os.path.exists(index) else f"{wal!r}, with its index {index!r}"
        return StoreError(
            f"SQLite database {self._path!r} failed ({message}): its write-ahead log "
            f"({removed}) was removed while the store was open, so the latest commits may "
            "live only in the processes that still have it open. Never delete the -wal or "
            "-shm files of an open database: stop every process that uses it, then open it "
            "again (restore it from a backup if commits are missing)"
        )


def _log_removed(wal: str, index: str) -> bool:
    """Whether the write-ahead log ``wal`` is gone, or shorter than its ``index`` records.

    A process that opens the database after the log was deleted makes a new, empty one, so
    the file is there again; but the index (the ``-shm`` file, kept by the processes that
    still have the old log open) counts the frames the old log held. A missing index means it
    was deleted with the log.
    """
    try:
        size = os.stat(wal).st_size
        with open(index, "rb") as file:
            header = file.read(_INDEX_HEADER.size)
    except OSError:
        return True
    if len(header) < _INDEX_HEADER.size:
        return False
    initialised, page_size, frames = _INDEX_HEADER.unpack(header)
    if not initialised or frames == 0:
        return False
    page_bytes = 65536 if page_size == 1 else int(page_size)  # 65536 does not fit in 16 bits
    expected = _WAL_HEADER_BYTES + int(frames) * (_FRAME_HEADER_BYTES + page_bytes)
    return size < expected


class _Busy(Exception):
    """The database was locked; the operation may be retried (the sqlite3 error is the cause)."""


_DRIVER_ERRORS: Final = (
    sqlite3.Error,
    schema.SchemaMismatch,
    UnicodeDecodeError,
    UnicodeEncodeError,
)
"""What a call on the connection may raise that `SqliteStore._error` turns into the store's."""


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)
