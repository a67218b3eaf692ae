"""`PostgresStore`: a store in a PostgreSQL database, shared by any number of processes and hosts.

How it keeps the `Store` invariants:

* Every write is one short READ COMMITTED transaction that locks the thread's ``threads`` row
  first and checks the head under that lock, so exactly one writer wins per head. An append is
  a single call of the ``interlock_append`` function (``sql/postgres/0005_row_digests.sql``),
  one round trip: it checks the lease and the head, moves both, resolves, inserts and chains
  the audit entries, and refuses with SQLSTATE IL001 (rolling everything back) where a typed
  error is due.
* Every transaction locks the thread's ``threads`` row before any other row of the thread
  (``delete_thread`` deletes it first), so writers of one thread cannot deadlock.
* The change feed (`PostgresStore.changes`) is written by triggers in the append's transaction
  and read only up to the oldest transaction still running, so that a change that commits
  late is never skipped by a follower who has moved past a younger one.
* Nothing needs session state: migrations use a transaction-scoped advisory lock, and prepared
  statements (on by default) can be turned off with ``prepare=False``, so the store works
  behind a transaction-pooling proxy.
* An append's ``interlock_append`` call, the one statement every step makes, goes to libpq
  directly with its parameters in binary (`_postgres_wire`); every other statement goes
  through psycopg.
* The driver is psycopg's blocking API with a thread-safe pool: a call runs on the event
  loop's thread when the calling task is alone on its loop (nothing else could run meanwhile,
  and it saves the loop's costly wake-up), in a worker thread otherwise.
* Grouped appends: under asyncio, appends of concurrent callers go to a few committer threads
  through a queue; each takes every append waiting by then and commits them in one
  transaction on one pooled connection (one thread hop, one checkout, one WAL flush for the
  lot), each in a savepoint of its own, so that each is still all-or-nothing and checked on
  its own, and a refused one fails alone. Nobody is told an append committed before its
  transaction did (`PostgresStore._commit_group`).

This module is the store's edge: the pool, migrating on first use, where a call runs, and the
translation of driver errors. What each operation does in the database is in `_postgres_ops`,
the SQL it runs in `_postgres_sql` and `_shared_sql`, the schema in ``sql/postgres/`` (migrated
by `_postgres_schema`).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import queue
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Final, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread
import psycopg
import psycopg.errors
from psycopg import Connection, IsolationLevel
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from .._daemon import start_thread
from .._errors import StoreClosed, StoreError, StoreUnavailable
from . import _postgres_identities
from . import _postgres_ops as ops
from . import _postgres_schema as schema
from . import _postgres_sql as sql
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
from ._changes import check_follow, check_prune, xid_cursor
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
from ._idle import loop_is_idle
from ._lifecycle import StoreLifecycle
from ._postgres_ops import Conn
from ._sql_channels import ChannelSql, SqlChannelMessages
from ._sql_identities import SqlIdentities
from ._worker import settle

__all__ = ["PostgresStore"]

T = TypeVar("T")

_CONNECT_TIMEOUT: Final = 10.0
"""Seconds to wait for a new connection, or for a free one from the pool."""
_CONNECTION_OPTIONS: Final[dict[str, Any]] = {
    "autocommit": True,  # transactions are explicit (conn.transaction())
    "connect_timeout": int(_CONNECT_TIMEOUT),
}
_PREPARE_AFTER: Final = 5
"""Executions of a statement on a connection before it is prepared (psycopg's default)."""


_COMMITTERS: Final = 10
"""Most committer threads of grouped appends (and so most groups in flight) per store; never
more than the pool's ``max_size``. Each group's appends run one after the other on the
server, so several smaller groups in parallel beat one large one (measured on S6pg)."""
_GROUP_MAX: Final = 8
"""Most appends one transaction commits together: a caller waits for the whole group, and a
larger group saves few WAL flushes (the server already shares one flush among concurrent
commits) while it makes its last append wait for all the others."""


_IDLE_EXIT: Final = 10.0
"""Seconds a committer thread waits for an append before it ends (a later one starts anew)."""


class _Append:
    """One caller's append, queued for a committer thread (`PostgresStore._commit_group`).

    ``write(conn, retried, durable)`` runs the append on a connection (``retried``: written
    again after a connection was lost; ``durable=False``: its own transaction need not wait
    for the WAL flush; inside a group's transaction always True, the group sets the level).
    The committer settles ``future`` on the caller's loop once the group's transaction has
    committed or failed.
    """

    __slots__ = ("durable", "future", "loop", "thread", "write")

    def __init__(
        self,
        write: Callable[[Conn, bool, bool], int | None],
        thread: str,
        durable: bool,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[int | None],
    ) -> None:
        self.write = write
        self.thread = thread
        self.durable = durable
        self.loop = loop
        self.future = future


_OPEN_POOLS: weakref.WeakSet[ConnectionPool[Any]] = weakref.WeakSet()
"""The pools of stores not closed yet (a script or command may end without closing its store)."""


@atexit.register
def _close_pools_at_exit() -> None:
    """Close the pools a program left open, while their threads can still stop.

    Left to the garbage collector at the interpreter's exit, a pool waits 5 s for each of its
    threads, in vain on Python 3.13: a command on a PostgreSQL app's store took 20 s to exit.
    """
    for pool in list(_OPEN_POOLS):
        pool.close(timeout=1.0)


class PostgresStore(SqlIdentities, SqlChannelMessages, StoreLifecycle):
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
        clock: The store's time in Unix seconds: when leases expire (the server stores
            what the client computes from it), and when audit entries, effects and pause
            requests are written. Every process sharing the database should agree on it.
            Tests pass a clock they move themselves (`interlock.testing.FakeClock`) rather
            than waiting for a lease to run out; it may be read on a worker thread.
    """

    verifies_checkpoints: ClassVar[bool] = True
    """Every checkpoint row read is checked against its digest, which covers the body."""

    _identity_ops = _postgres_identities
    _channel_sql = ChannelSql.bound_to("%s")

    PAUSE_CHANNEL: Final = sql.PAUSE_CHANNEL
    """The ``LISTEN``/``NOTIFY`` channel of pause requests, ``interlock_pause``.

    `request_pause` notifies it when the request commits, with the thread's id as payload
    (``""`` when the id is longer than a notification may be), so whoever runs the thread
    can listen there and pause at once instead of at its next look at the store.
    """

    CONTINUATION_TRIGGER: Final = sql.CONTINUATION_TRIGGER
    """The name of the trigger the workers install, ``interlock_continue_after_decision``.

    `interlock.workers.Workers.install` puts it on the interrupts table: it queues a thread's
    continuation for the workers in the transaction of each decision. `workers_continue`
    reports whether it is there (and enabled).
    """

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        prepare: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if min_size < 0 or max_size < max(min_size, 1):
            raise ValueError(
                f"need 0 <= min_size <= max_size and max_size >= 1, got min_size={min_size!r} "
                f"and max_size={max_size!r}"
            )
        self._dsn = dsn
        self._clock = clock
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
        # Grouped appends: the queue the committer threads take them from, and the threads.
        self._appends: queue.SimpleQueue[_Append | None] = queue.SimpleQueue()
        self._committers: list[threading.Thread] = []
        self._committers_lock = threading.Lock()

    @property
    def dsn(self) -> str:
        """The connection string the store was given (for tools that share its database)."""
        return self._dsn

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open" if self._pool is not None else "unopened"
        return f"<PostgresStore {self._where} {state}>"

    async def open(self) -> None:
        """Connect now rather than on first use: a bad location fails here."""
        await self._run(ops.nothing)

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
        ``synchronous_commit = off`` for this transaction only. Under asyncio, the appends of
        concurrent callers may share a transaction (each in a savepoint: all-or-nothing and
        checked on its own, its errors its own), which commits durably if any of them asks.
        """
        check_append_args(record, new_interrupts, resolutions, expected_head, audit, fence)
        clock = self._clock

        def grouped(c: Conn, retried: bool, durable: bool) -> int | None:
            return ops.append(
                c,
                record,
                expected_head,
                new_interrupts,
                resolutions,
                fence,
                audit,
                clock(),
                retried=retried,
                durable=durable,
            )

        self._check_open()
        pool = self._pool or await self._open()
        loop = _asyncio_loop()
        if loop is not None and not loop_is_idle(loop):
            fut: asyncio.Future[int | None] = loop.create_future()
            self._submit(pool, _Append(grouped, record.thread, durable, loop, fut))
            # Shielded: a cancelled caller's append is committed or refused as a whole first.
            with anyio.CancelScope(shield=True):
                result = await fut
            await anyio.lowlevel.checkpoint_if_cancelled()
            return result
        attempts = 0

        def append(c: Conn) -> int | None:
            nonlocal attempts
            attempts += 1
            return grouped(c, attempts > 1, durable)

        if loop is not None:  # alone on its loop: right here, as `_run` would (checked once)
            return self._guard(lambda: _attempt(pool, append))
        return await self._run(append)  # not asyncio (trio): one by one, on a worker thread

    async def renew_lease(self, thread: str, fence: Fence) -> None:
        """Extend or release a held lease (see `Store.renew_lease`)."""
        check_text("thread", thread)
        check_renewal(fence)
        await self._run(lambda c: ops.renew(c, thread, fence, self._clock()))

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
            lambda c: ops.begin_effect(c, thread, key, name, fence, retry, audit, self._clock())
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
        await self._run(
            lambda c: ops.finish_effect(
                c, thread, key, result, fence, audit, self._clock(), durable=durable
            )
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
        """Append entries to an existing thread's audit log (see `Store.append_audit`)."""
        check_audit_append(thread, entries)
        await self._run(
            lambda c: ops.append_audit(c, thread, entries, self._clock(), durable=durable)
        )

    async def get_checkpoint(self, thread: str, id: str | None = None) -> CheckpointRecord | None:
        """Return one checkpoint (the head when ``id`` is None), or None if absent."""
        check_text("thread", thread)
        check_text("id", id, optional=True)
        if id is None:
            return await self._run(lambda c: ops.head_checkpoint(c, thread))
        return await self._run(lambda c: ops.checkpoint(c, thread, id))

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
        return await self._run(lambda c: ops.thread_record(c, thread))

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
        return await self._run(lambda c: ops.interrupt(c, id))

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

    async def workers_continue(self) -> bool:
        """Whether workers continue this database's threads after decisions.

        True once `interlock.workers.Workers.install` has put its trigger on the interrupts
        table: each decision then queues its thread's continuation for the workers, in its
        own transaction. The approval server asks, and leaves continuing to them.
        """
        return await self._run(ops.workers_continue)

    async def take_pause_request(self, thread: str) -> PauseKind | None:
        """Return and remove the thread's pause request (see `Store.take_pause_request`)."""
        check_text("thread", thread)
        return await self._run(lambda c: ops.take_pause(c, thread))

    async def expire(self, *, older_than: float, limit: int = 1000) -> list[str]:
        """Delete finished threads last written before ``older_than`` (see `Store.expire`)."""
        return await self._run(lambda c: ops.expire(c, older_than, max(limit, 0), self._clock()))

    async def delete_thread(self, thread: str) -> None:
        """Delete a thread, its checkpoints, its interrupts and its pause request."""
        check_text("thread", thread)
        await self._run(lambda c: ops.delete(c, thread, self._clock()))

    async def changes(self, *, after: str | None = None, limit: int = 1000) -> list[ChangeRecord]:
        """Return the changes committed after cursor ``after`` (see `Store.changes`).

        A cursor is ``<txid>-<seq>``: the id of the transaction that wrote the change, and its
        place in the feed. Changes are ordered by transaction id, which keeps each thread's in
        commit order: an append that follows another on a thread names that one's checkpoint
        as its expected head, so it began, and got its id, after that one committed.

        A change is returned only once every transaction older than its own has ended
        (committed or rolled back), since until then an older one could still commit changes
        that belong before it. So a transaction that stays open on the server once it has
        written anything (in any database of the cluster: a psql session left in a transaction
        after an ``UPDATE``, a long batch job) holds the feed back until it ends: the changes
        committed meanwhile come late, in order, and none is lost.
        """
        check_follow(after, limit)
        position = xid_cursor(after)
        return await self._run(lambda c: ops.changes(c, position, limit))

    async def change_cursor(self) -> str:
        """Return the cursor of now (see `Store.change_cursor`): the changes of transactions
        still running or not yet begun come after it."""
        return await self._run(ops.change_cursor)

    async def prune_changes(self, *, older_than: float, limit: int = 10000) -> int:
        """Delete changes committed before ``older_than`` (see `Store.prune_changes`)."""
        moment = check_prune(older_than, limit)
        return await self._run(lambda c: ops.prune_changes(c, moment, limit))

    async def close(self) -> None:
        """Close the pool and its connections. Idempotent; later calls raise `StoreClosed`."""
        self._closed = True
        with anyio.CancelScope(shield=True):  # a cancelled caller still releases connections
            async with self._opening:
                pool, self._pool = self._pool, None
                await anyio.to_thread.run_sync(self._stop_committers)
                if pool is not None:
                    _OPEN_POOLS.discard(pool)
                    await anyio.to_thread.run_sync(pool.close)

    def _submit(self, pool: ConnectionPool[Conn], item: _Append) -> None:
        """Queue an append for the committer threads, starting one if all are busy."""
        self._appends.put(item)
        committers = self._committers
        if len(committers) < min(_COMMITTERS, self._max_size):
            with self._committers_lock:
                if len(committers) < min(_COMMITTERS, self._max_size):
                    name = f"interlock-postgres-commit-{len(committers)}"
                    committers.append(start_thread(lambda: self._serve(pool), name))

    def _serve(self, pool: ConnectionPool[Conn]) -> None:
        """A committer thread: take the appends waiting, commit them as one group, again."""
        appends = self._appends
        while True:
            try:
                first = appends.get(timeout=_IDLE_EXIT)
            except queue.Empty:
                with self._committers_lock:  # `_submit` starts another if one comes now
                    if appends.empty():
                        with contextlib.suppress(ValueError):  # `_stop_committers` took it
                            self._committers.remove(threading.current_thread())
                        return
                continue
            if first is None:  # stopping: so are the other committers
                appends.put(None)
                return
            group = [first]
            while len(group) < _GROUP_MAX:
                try:
                    item = appends.get_nowait()
                except queue.Empty:
                    break
                if item is None:  # stopping: leave it to the next committer, after this group
                    appends.put(None)
                    break
                group.append(item)
            outcomes = self._commit_group(pool, group)
            for item, (value, error) in zip(group, outcomes, strict=True):
                with contextlib.suppress(RuntimeError):  # the loop was closed meanwhile
                    item.loop.call_soon_threadsafe(settle, item.future, value, error)

    def _commit_group(
        self, pool: ConnectionPool[Conn], group: list[_Append]
    ) -> list[tuple[int | None, BaseException | None]]:
        """Commit ``group`` in one transaction on one pooled connection; each append's outcome.

        Each append is all-or-nothing and checked on its own (`ops.append_group`: a savepoint
        each); the outcomes are known, and handed out, only once the ``COMMIT`` returned. The
        group goes in the order of its threads' ids (appends of one thread keep their order),
        so two groups that lock rows of the same threads lock them in the same order and
        cannot deadlock. A connection lost midway is replaced and the group written once more,
        each append as a retry (one that had committed finds itself at its thread's head). The
        transaction commits durably unless no append of the group asked for it.
        """
        if len(group) == 1:  # alone: its own statement, no transaction around it
            only = group[0]
            attempts = 0

            def alone(c: Conn) -> int | None:
                nonlocal attempts
                attempts += 1
                return only.write(c, attempts > 1, only.durable)

            try:
                return [(self._guard(lambda: _attempt(pool, alone)), None)]
            except BaseException as exc:
                return [(None, exc)]
        order = sorted(range(len(group)), key=lambda i: group[i].thread)
        durable = any(item.durable for item in group)
        attempts = 0

        def together(c: Conn) -> list[tuple[Any, BaseException | None]]:
            nonlocal attempts
            attempts += 1
            retried = attempts > 1
            writes = [_in_group(group[i].write, retried) for i in order]
            return ops.append_group(c, writes, durable=durable)

        outcomes: list[tuple[int | None, BaseException | None]] = [(None, None)] * len(group)
        try:
            done = self._guard(lambda: _attempt(pool, together))
        except BaseException as exc:  # nothing was committed
            return [(None, exc)] * len(group)
        for i, (value, error) in zip(order, done, strict=True):
            outcomes[i] = (value, None if error is None else self._translated(error))
        return outcomes

    def _translated(self, error: BaseException) -> BaseException:
        """``error`` as `_guard` would raise it."""

        def fail() -> None:
            raise error

        try:
            self._guard(fail)
        except BaseException as exc:
            return exc
        return error

    def _stop_committers(self) -> None:
        """Let the committer threads finish the queued appends and stop (blocking)."""
        with self._committers_lock:
            committers, self._committers = self._committers, []
        if committers:
            self._appends.put(None)
            for thread in committers:
                thread.join()
            with contextlib.suppress(queue.Empty):
                self._appends.get_nowait()  # the last committer's stop signal

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed(f"PostgresStore {self._where} was closed; create a new one")

    async def _run(self, fn: Callable[[Conn], T]) -> T:
        """Run ``fn`` on a pooled connection, opening the pool first if needed.

        The driver calls block. When the calling task is the only thing its event loop has to
        do (see `loop_is_idle`), they run right here: nothing else could run while they wait, and
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
        if loop is not None and loop_is_idle(loop):
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
            raise StoreUnavailable(
                f"no connection to PostgreSQL {self._where} within {_CONNECT_TIMEOUT:g}s "
                f"({exc}); check that the server is up and reachable, or raise max_size if "
                "every connection is busy"
            ) from exc
        except psycopg.OperationalError as exc:
            self._check_open()
            raise StoreUnavailable(
                f"PostgreSQL {self._where} failed: {exc}; check that the server is up and "
                "reachable and that the DSN's credentials are right"
            ) from exc
        except psycopg.Error as exc:
            raise StoreError(
                f"PostgreSQL {self._where} failed: {type(exc).__name__}: {exc}"
            ) from exc
        except schema.SchemaMismatch as exc:
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
        _OPEN_POOLS.add(pool)
        return pool

    async def _migrate(self) -> list[int]:
        return await anyio.to_thread.run_sync(lambda: self._guard(self._migrate_now))

    def _migrate_now(self) -> list[int]:
        with Connection.connect(self._dsn, **self._options) as conn:
            _configure(conn)
            return schema.migrate(conn)


def _in_group(
    write: Callable[[Conn, bool, bool], int | None], retried: bool
) -> Callable[[Conn], int | None]:
    """``write`` as one append of a group's transaction (whose level the group sets)."""
    return lambda c: write(c, retried, True)


def _asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop, or None under another one (trio): appends are grouped under
    asyncio only, when the loop has other tasks to run (alone on its loop, a caller runs its
    append right away, on its own thread)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _attempt(pool: ConnectionPool[Conn], fn: Callable[[Conn], T]) -> T:
    """Run ``fn`` on a connection of the pool; once more on another if the first was lost.

    No health check per checkout (a round trip each time): a connection that broke while idle
    (a server restart) fails its first statement; the pool drops it, the other idle ones are
    checked, and the operation runs once more. That is safe for appends too: a retried append
    that had committed finds its own checkpoint at the head (see `_append`).
    """
    for attempt in (1, 2):
        # Not `pool.connection()`: its `with conn` commits or rolls back on the way out, which
        # an autocommit connection whose work is done (every operation commits or rolls back
        # its own transaction) never needs; the pool itself rolls back one that is not idle.
        conn = pool.getconn(timeout=_CONNECT_TIMEOUT)
        try:
            return fn(conn)
        except psycopg.OperationalError as exc:
            lost = conn.broken or isinstance(exc, psycopg.errors.AdminShutdown)
            if attempt == 2 or not lost:
                raise
        finally:
            pool.putconn(conn)
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
