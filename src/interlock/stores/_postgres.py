"""`PostgresStore`: a store in a PostgreSQL database, shared by any number of processes and hosts.

How it keeps the `Store` invariants:

* Every write is one short READ COMMITTED transaction that locks the thread's ``threads`` row
  first and checks the head under that lock, so exactly one writer wins per head. An append is
  a single call of the ``interlock_append`` function (schema version 4), one round trip: it
  checks the lease and the head, moves both, resolves, inserts and chains the audit entries,
  and refuses with SQLSTATE IL001 (rolling everything back) where a typed error is due.
* Every transaction locks the thread's ``threads`` row before any other row of the thread
  (``delete_thread`` deletes it first), so writers of one thread cannot deadlock.
* Nothing needs session state: migrations use a transaction-scoped advisory lock, and prepared
  statements (on by default) can be turned off with ``prepare=False``, so the store works
  behind a transaction-pooling proxy.
* The driver is psycopg's blocking API with a thread-safe pool: a call runs on the event
  loop's thread when the calling task is alone on its loop (nothing else could run meanwhile,
  and it saves the loop's costly wake-up), in a worker thread otherwise.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread
import msgspec
import psycopg
import psycopg.errors
from psycopg import Connection, IsolationLevel
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from .._errors import (
    CheckpointCorrupt,
    FencedOut,
    InterruptAlreadyResolved,
    StoreClosed,
    StoreError,
    ThreadBusy,
    UnknownInterrupt,
)
from . import _postgres_schema as sql
from . import _rows as conv
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
from ._worker import _alone

__all__ = ["PostgresStore"]

T = TypeVar("T")
Conn = Connection[Any]

_CONNECT_TIMEOUT: Final = 10.0
"""Seconds to wait for a new connection, or for a free one from the pool."""
_CONNECTION_OPTIONS: Final[dict[str, Any]] = {
    "autocommit": True,  # transactions are explicit (conn.transaction())
    "connect_timeout": int(_CONNECT_TIMEOUT),
}
_PREPARE_AFTER: Final = 5
"""Executions of a statement on a connection before it is prepared (psycopg's default)."""


class PostgresStore(StoreLifecycle):
    """A `Store` in a PostgreSQL database; any number of processes may share it.

    The connection pool is opened, and the schema created or migrated, on first use. Use
    ``async with PostgresStore(dsn) as store:`` to open it eagerly (a bad DSN fails there) and
    close it on exit. To keep several stores in one database, give each a schema of its own
    with ``options=-csearch_path=...`` in the DSN.

    Args:
        dsn: A libpq connection string or ``postgresql://`` URL.
        min_size: Connections the pool keeps open.
        max_size: Most connections the pool opens at once.
        prepare: Prepare statements used often on a connection (psycopg's default; saves
            parsing and planning each time). Behind a transaction-pooling proxy that does not
            track prepared statements (PgBouncer before 1.21), pass False: the store then keeps
            no session state at all.
    """

    def __init__(
        self, dsn: str, *, min_size: int = 1, max_size: int = 10, prepare: bool = True
    ) -> None:
        if min_size < 0 or max_size < max(min_size, 1):
            raise ValueError(
                f"need 0 <= min_size <= max_size and max_size >= 1, got min_size={min_size!r} "
                f"and max_size={max_size!r}"
            )
        self._dsn = dsn
        self._options = {
            **_CONNECTION_OPTIONS,
            "prepare_threshold": _PREPARE_AFTER if prepare else None,
        }
        self._where = _describe(dsn)
        self._min_size = min_size
        self._max_size = max_size
        # Invariant: _pool is None before first use and after close; it is set, and the schema
        # migrated, only under _opening.
        self._opening = anyio.Lock()
        self._pool: ConnectionPool[Conn] | None = None
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open" if self._pool is not None else "unopened"
        return f"<PostgresStore {self._where} {state}>"

    async def open(self) -> None:
        """Connect now rather than on first use: a bad location fails here."""
        await self._run(_nothing)

    async def migrate(self) -> list[int]:
        """Create or migrate the schema now; return the versions this call applied.

        Safe to run from several processes at once. The store also does this on first use.
        """
        self._check_open()
        return await self._migrate()

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

        Check the lease and the head under the thread's row lock, resolve, insert; see
        `Store.append_checkpoint` for the rules and errors. ``durable=False`` commits with
        ``synchronous_commit = off`` for this transaction only.
        """
        check_append_args(record, new_interrupts, resolutions, expected_head, audit, fence)
        attempts = 0

        def append(c: Conn) -> int | None:
            nonlocal attempts
            attempts += 1
            retried = attempts > 1
            return _append(
                c,
                record,
                expected_head,
                new_interrupts,
                resolutions,
                fence,
                audit,
                retried,
                durable,
            )

        return await self._run(append)

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
        row = await self._run(lambda c: _fetchone(c, sql.SELECT_EFFECT, (thread, key)))
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
        rows = await self._run(lambda c: _fetchall(c, sql.SELECT_RANGE, (lo, hi, thread)))
        head_seq, records = _with_head(rows, thread)
        return conv.checked_range(records, head_seq, thread, lo, hi)

    async def list_checkpoints(
        self, thread: str, *, before_seq: int | None = None, limit: int = 50
    ) -> list[CheckpointRecord]:
        """Return up to ``limit`` checkpoints with ``seq < before_seq``, newest first."""
        check_text("thread", thread)
        before = 2**63 - 1 if before_seq is None else before_seq
        params = (before, max(limit, 0), thread)
        rows = await self._run(lambda c: _fetchall(c, sql.SELECT_PAGE, params))
        head_seq, records = _with_head(rows, thread)
        return conv.checked_page(records, head_seq, thread, before_seq, max(limit, 0))

    async def get_thread(self, thread: str) -> ThreadRecord | None:
        """Return the thread's head record, or None if the thread does not exist."""
        check_text("thread", thread)
        return await self._run(lambda c: _thread(c, thread))

    async def get_interrupt(self, id: str) -> InterruptRecord | None:
        """Return one interrupt by id, or None."""
        check_text("id", id)
        row = await self._run(lambda c: _fetchone(c, sql.SELECT_INTERRUPT, (id,)))
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
        rows = await self._run(lambda c: _fetchall(c, query, params))
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
        params = {"thread": thread, "kind": "forced" if forced else "planned", "at": time.time()}
        return await self._run(lambda c: _changed(c, sql.REQUEST_PAUSE, params))

    async def take_pause_request(self, thread: str) -> PauseKind | None:
        """Return and remove the thread's pause request (see `Store.take_pause_request`)."""
        check_text("thread", thread)
        row = await self._run(lambda c: _fetchone(c, sql.TAKE_PAUSE, (thread,)))
        return None if row is None else row[0]

    async def expire(self, *, older_than: float, limit: int = 1000) -> list[str]:
        """Delete finished threads last written before ``older_than`` (see `Store.expire`)."""
        return await self._run(lambda c: _expire(c, older_than, max(limit, 0)))

    async def delete_thread(self, thread: str) -> None:
        """Delete a thread, its checkpoints, its interrupts and its pause request."""
        check_text("thread", thread)
        await self._run(lambda c: _delete(c, thread))

    async def close(self) -> None:
        """Close the pool and its connections. Idempotent; later calls raise `StoreClosed`."""
        self._closed = True
        with anyio.CancelScope(shield=True):  # a cancelled caller still releases connections
            async with self._opening:
                pool, self._pool = self._pool, None
                if pool is not None:
                    await anyio.to_thread.run_sync(pool.close)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed(f"PostgresStore {self._where} was closed; create a new one")

    async def _run(self, fn: Callable[[Conn], T]) -> T:
        """Run ``fn`` on a pooled connection, opening the pool first if needed.

        The driver calls block. When the calling task is the only thing its event loop has to
        do (see `_alone`), they run right here: nothing else could run while they wait, and
        this saves the thread hop and the loop's wake-up (together more than a local query
        takes). Otherwise they run in a worker thread, so other tasks go on meanwhile.
        """
        self._check_open()
        pool = self._pool or await self._open()

        def call() -> T:
            return self._guard(lambda: _attempt(pool, fn))

        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None and _alone(loop):
            return call()
        # Shielded: psycopg cannot abandon a query half-way and keep the connection, so a
        # cancelled caller's operation finishes (committed or rolled back as a whole) first.
        with anyio.CancelScope(shield=True):
            result = await anyio.to_thread.run_sync(call)
        await anyio.lowlevel.checkpoint_if_cancelled()
        return result

    def _guard(self, fn: Callable[[], T]) -> T:
        """Call ``fn``, translating driver errors into `StoreError` at this edge."""
        try:
            return fn()
        except PoolTimeout as exc:
            self._check_open()
            raise StoreError(
                f"no connection to PostgreSQL {self._where} within {_CONNECT_TIMEOUT:g}s "
                f"({exc}); check that the server is up and reachable, or raise max_size if "
                "every connection is busy"
            ) from exc
        except psycopg.OperationalError as exc:
            self._check_open()
            raise StoreError(
                f"PostgreSQL {self._where} failed: {exc}; check that the server is up and "
                "reachable and that the DSN's credentials are right"
            ) from exc
        except psycopg.Error as exc:
            raise StoreError(
                f"PostgreSQL {self._where} failed: {type(exc).__name__}: {exc}"
            ) from exc
        except sql.SchemaMismatch as exc:
            raise StoreError(f"cannot use {self._where} as an interlock store: {exc}") from exc
        except UnicodeEncodeError as exc:
            # Arguments are checked before they get here; this is the last line.
            raise ValueError(
                f"a text argument holds a lone surrogate at position {exc.start}, which UTF-8 "
                "cannot encode; pass valid Unicode strings"
            ) from exc

    async def _open(self) -> ConnectionPool[Conn]:
        async with self._opening:
            self._check_open()
            if self._pool is None:
                with anyio.CancelScope(shield=True):
                    fresh = await anyio.to_thread.run_sync(lambda: self._guard(self._new_pool))
                self._pool = fresh
                return fresh
            return self._pool

    def _new_pool(self) -> ConnectionPool[Conn]:
        # Migrate on a connection of our own first: a bad DSN or a down server fails here with
        # libpq's own error rather than a pool timeout.
        self._migrate_now()
        pool: ConnectionPool[Conn] = ConnectionPool(
            self._dsn,
            min_size=self._min_size,
            max_size=self._max_size,
            kwargs=dict(self._options),
            configure=_configure,
            open=False,
            name=f"interlock {self._where}",
        )
        try:
            pool.open(wait=True, timeout=_CONNECT_TIMEOUT)
        except BaseException:
            pool.close()
            raise
        return pool

    async def _migrate(self) -> list[int]:
        return await anyio.to_thread.run_sync(lambda: self._guard(self._migrate_now))

    def _migrate_now(self) -> list[int]:
        with Connection.connect(self._dsn, **self._options) as conn:
            _configure(conn)
            return sql.migrate(conn)


def _attempt(pool: ConnectionPool[Conn], fn: Callable[[Conn], T]) -> T:
    """Run ``fn`` on a connection of the pool; once more on another if the first was lost.

    No health check per checkout (a round trip each time): a connection that broke while idle
    (a server restart) fails its first statement; the pool drops it, the other idle ones are
    checked, and the operation runs once more. That is safe for appends too: a retried append
    that had committed finds its own checkpoint at the head (see `_append`).
    """
    for attempt in (1, 2):
        with pool.connection(timeout=_CONNECT_TIMEOUT) as conn:
            try:
                return fn(conn)
            except psycopg.OperationalError as exc:
                lost = conn.broken or isinstance(exc, psycopg.errors.AdminShutdown)
                if attempt == 2 or not lost:
                    raise
        # The others idle in the pool likely broke too (a restart): weed them out.
        pool.check()
    raise AssertionError("unreachable")


def _describe(dsn: str) -> str:
    """Render the DSN as ``postgresql://user@host:port/dbname``, never with the password."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "<unparseable DSN>"
    user = f"{parts['user']}@" if parts.get("user") else ""
    host = parts.get("host") or parts.get("hostaddr") or "localhost"
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{user}{host}{port}/{parts.get('dbname') or ''}"


def _configure(conn: Conn) -> None:
    # Client side: psycopg writes it into each BEGIN, so no session setting is needed.
    conn.isolation_level = IsolationLevel.READ_COMMITTED


def _nothing(conn: Conn) -> None:
    return None


def _append(
    conn: Conn,
    record: CheckpointRecord,
    expected_head: str | None,
    new_interrupts: Sequence[InterruptRecord],
    resolutions: Sequence[Resolution],
    fence: Fence | None,
    audit: Sequence[AuditEntry],
    retried: bool = False,
    durable: bool = True,
) -> int | None:
    """One statement, one round trip: ``interlock_append`` does the whole append server-side."""
    thread = record.thread
    now = time.time()
    new = new_interrupts
    # Empty lists go as NULL (the function treats both alike): adapting a list costs more.
    res = (
        [
            [r.id for r in resolutions],
            [r.status for r in resolutions],
            [r.resolved_at for r in resolutions],
            [r.resolution for r in resolutions],
        ]
        if resolutions
        else [None] * 4
    )
    rows = (
        [
            [i.id for i in new],
            [i.key for i in new],
            [i.address for i in new],
            [i.kind for i in new],
            [i.status for i in new],
            [i.created_at for i in new],
            [i.deadline for i in new],
            [i.body for i in new],
            [i.resolved_at for i in new],
            [i.resolution for i in new],
            [i.tool for i in new],
            [conv.interrupt_digest(i) for i in new],
        ]
        if new
        else [None] * 12
    )
    params = (
        *conv.checkpoint_row(record),
        conv.thread_digest(thread, record.id, record.seq, record.status, record.created_at),
        expected_head,
        fence is not None,
        None if fence is None else fence.owner,
        None if fence is None else fence.token,
        None if fence is None else fence.ttl,
        fence is not None and fence.release,
        now,
        retried,
        *res,
        *rows,
        *_audit_params(thread, audit, now),
    )
    try:
        row = _fetchone(conn, sql.APPEND if durable else sql.APPEND_LAZILY, params)
    except psycopg.errors.UniqueViolation as exc:
        raise StoreError(
            f"cannot append checkpoint {record.id!r} to thread {thread!r}: "
            f"{exc.diag.message_detail or exc}; checkpoint and interrupt ids must be "
            "unique across the store"
        ) from exc
    except psycopg.DatabaseError as exc:
        if exc.diag.sqlstate != sql.APPEND_REFUSED:
            raise
        raise _refusal(record, expected_head, fence, now, exc.diag.message_primary) from None
    return None if fence is None else int(row[0])


def _audit_params(
    thread: str, entries: Sequence[AuditEntry], at: float
) -> tuple[
    bytes | None, list[str] | None, list[str | None] | None, list[bytes] | None, list[bytes] | None
]:
    """The audit entries for ``interlock_append``, their content encoded around ``seq``.

    An entry's content is ``msgpack([thread, seq, at, kind, actor, data])``: a fixarray header,
    then each element's own encoding. All but ``seq`` is known here; the server encodes ``seq``.
    """
    if not entries:
        return None, None, None, None, None
    encode = msgspec.msgpack.encode
    prefix = b"\x96" + encode(thread)
    suffixes = [encode(at) + encode(e.kind) + encode(e.actor) + encode(e.data) for e in entries]
    return (
        prefix,
        [e.kind for e in entries],
        [e.actor for e in entries],
        [e.data for e in entries],
        suffixes,
    )


def _refusal(
    record: CheckpointRecord,
    expected_head: str | None,
    fence: Fence | None,
    now: float,
    message: str | None,
) -> Exception:
    """The typed error for a refusal of ``interlock_append`` (its JSON message)."""
    thread = record.thread
    details = json.loads(message or "{}")
    error = details.get("error")
    if error == "lease":
        expires = float(details["expires"])
        return ThreadBusy(
            thread, f"its lease runs {expires - now:.1f}s more", holder=details["owner"]
        )
    if error == "fenced" and fence is not None and fence.token is not None:
        return FencedOut(thread, token=fence.token, current=int(details["current"]))
    if error == "head":
        head_id = details["head_id"]
        head = None if head_id is None else (head_id, int(details["head_seq"]))
        busy = head_mismatch(record, expected_head, head)
        if busy is not None:
            return busy
    if error == "created":
        return ThreadBusy(thread, "another executor created it at the same time")
    if error == "resolved":
        return InterruptAlreadyResolved(details["id"], status=details["status"])
    if error == "corrupt":
        return CheckpointCorrupt(
            f"{details.get('what')} of thread {thread!r} does not match its digest: the "
            "database was damaged. Restore it from a backup",
            thread=thread,
        )
    if error == "unknown":
        if details["id"] in details["pending"]:  # its id index lost it: the data is damaged
            return conv.lost_interrupt(details["id"], thread)
        return UnknownInterrupt(details["id"], list(details["pending"]), thread=thread)
    return StoreError(f"cannot append checkpoint {record.id!r} to thread {thread!r}: {message}")


def _log(conn: Conn, thread: str, entries: Sequence[AuditEntry], now: float) -> None:
    """Append entries to the thread's audit chain (the caller holds the thread's row lock)."""
    if entries:
        tail = _fetchone(conn, sql.AUDIT_TAIL, (thread,))
        rows = chain(thread, None if tail is None else (tail[0], bytes(tail[1])), entries, now)
        with conn.cursor() as cur:
            cur.executemany(sql.INSERT_AUDIT, [conv.audit_row(r) for r in rows])


def _fenced(conn: Conn, thread: str, fence: Fence | None, now: float) -> None:
    """Lock the thread's row and check (and move) its lease for a write that is no checkpoint."""
    row = _fetchone(conn, sql.SELECT_LEASE, (thread,))
    current = None if row is None else conv.lease_from_row(row, thread)
    lease = lease_after(thread, current, fence, now)
    if current is not None and current != lease:
        conn.execute(sql.SET_LEASE, (*lease, conv.lease_digest(thread, *lease), thread))


def _renew(conn: Conn, thread: str, fence: Fence) -> None:
    with conn.transaction():
        _fenced(conn, thread, fence, time.time())


def _begin_effect(
    conn: Conn,
    thread: str,
    key: str,
    name: str,
    fence: Fence | None,
    retry: bool,
    audit: Sequence[AuditEntry],
) -> tuple[bool, EffectRecord]:
    now = time.time()
    with conn.transaction():
        _fenced(conn, thread, fence, now)
        row = _fetchone(conn, sql.INSERT_EFFECT, (thread, key, name, now))
        if row is None:
            found = conv.checked_effect(
                _fetchone(conn, sql.SELECT_EFFECT, (thread, key)), thread, key
            )
            if not (retry and found.status == "started"):
                return False, found
            row = _fetchone(conn, sql.RESTART_EFFECT, (now, thread, key))
        _log(conn, thread, audit, now)
    return True, conv.checked_effect(row, thread, key)


def _finish_effect(
    conn: Conn,
    thread: str,
    key: str,
    result: bytes | None,
    fence: Fence | None,
    audit: Sequence[AuditEntry],
) -> None:
    now = time.time()
    with conn.transaction():
        _fenced(conn, thread, fence, now)
        if not _changed(conn, sql.FINISH_EFFECT, (now, result, thread, key)):
            row = _fetchone(conn, sql.SELECT_EFFECT, (thread, key))
            refused = finish_refused(
                thread, key, None if row is None else conv.checked_effect(row, thread, key), result
            )
            if refused is None:
                return  # the same outcome recorded again (a retried call)
            raise refused
        _log(conn, thread, audit, now)


def _audit_log(
    conn: Conn, thread: str | None, after: tuple[str, int] | None, limit: int
) -> list[AuditRecord]:
    if thread is not None:
        seq = after[1] if after is not None and after[0] == thread else 0
        rows = _fetchall(conn, sql.AUDIT_OF_THREAD, (thread, seq, limit))
    else:
        rows = _fetchall(conn, sql.AUDIT_ALL, (*(after or ("", 0)), limit))
    return [conv.audit_from_row(row) for row in rows]


def _expire(conn: Conn, older_than: float, limit: int) -> list[str]:
    with conn.transaction():
        rows = _fetchall(conn, sql.EXPIRED_THREADS, (older_than, limit))
        # A damaged row must not delete a thread that is not finished.
        gone = [conv.thread_from_row(row, row[0]).thread for row in rows]
        for thread in gone:
            _delete_rows(conn, thread)
    return gone


def _delete(conn: Conn, thread: str) -> None:
    with conn.transaction():
        _delete_rows(conn, thread)


def _delete_rows(conn: Conn, thread: str) -> None:
    first, *rest = sql.DELETE_THREAD  # the threads row: it locks the thread
    if _changed(conn, first, (thread,)):
        _log(conn, thread, [thread_deleted()], time.time())
    for statement in rest:
        conn.execute(statement, (thread,))


def _changed(conn: Conn, statement: str, params: Any) -> bool:
    with conn.cursor() as cur:
        cur.execute(statement, params)
        return cur.rowcount > 0


def _fetchone(conn: Conn, query: str, params: Any) -> Any:
    with conn.cursor() as cur:
        cur.execute(query, params)
        return cur.fetchone()


def _fetchall(conn: Conn, query: str, params: Any) -> list[Any]:
    with conn.cursor() as cur:
        cur.execute(query, params)
        return cur.fetchall()


def _head(conn: Conn, thread: str) -> CheckpointRecord | None:
    row = _fetchone(conn, sql.SELECT_HEAD_CHECKPOINT, (thread,))
    if row is None:
        _no_thread(conn, thread)
        return None
    return conv.head_checkpoint_from_row(row, thread)


def _no_thread(conn: Conn, thread: str) -> None:
    """Refuse to say a thread does not exist when its checkpoints are there (a lost head)."""
    if _fetchone(conn, sql.HAS_CHECKPOINTS, (thread,)) is not None:
        # Under READ COMMITTED each statement sees its own snapshot: a thread whose first
        # append committed between the two reads is new, not damaged.
        if _fetchone(conn, sql.SELECT_THREAD, (thread,)) is not None:
            return
        raise CheckpointCorrupt(
            f"thread {thread!r} has checkpoints but no head: the database was damaged. "
            "Restore it from a backup; the other threads can still be read",
            thread=thread,
        )


def _thread(conn: Conn, thread: str) -> ThreadRecord | None:
    row = _fetchone(conn, sql.SELECT_THREAD, (thread,))
    if row is None:
        _no_thread(conn, thread)
        return None
    return conv.thread_from_row(row, thread)


def _one(conn: Conn, thread: str, id: str) -> CheckpointRecord | None:
    row = _fetchone(conn, sql.SELECT_CHECKPOINT, (id, thread))
    return None if row is None else conv.checkpoint_from_row(row, thread=thread, id=id)


def _with_head(rows: list[Any], thread: str) -> tuple[int | None, list[CheckpointRecord]]:
    """Split rows of ``head_seq`` + checkpoint columns (all NULL when there are none)."""
    if not rows:
        return None, []
    records = [
        conv.checkpoint_from_row(row[1:], thread=thread) for row in rows if row[1] is not None
    ]
    return int(rows[0][0]), records
