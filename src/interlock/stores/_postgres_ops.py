"""What each `PostgresStore` operation does on a pooled connection.

Every write is one short transaction that locks the thread's ``threads`` row first; an append
is a single call of the server-side ``interlock_append``. Each function takes the store's
clock reading (``now``) from the caller. Driver errors are left to `PostgresStore`, which
translates them at its edge; only the refusals of ``interlock_append`` become typed errors here.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import psycopg
import psycopg.errors
from psycopg import Connection

from .._errors import (
    CheckpointCorrupt,
    CheckpointNotFound,
    FencedOut,
    InterruptAlreadyResolved,
    StoreError,
    ThreadBusy,
    UnknownInterrupt,
)
from . import _postgres_sql as sql
from . import _postgres_wire as wire
from . import _rows as conv
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
from ._changes import cursor_ahead
from ._checks import finish_refused, head_mismatch, lease_after

__all__ = [
    "Conn",
    "append",
    "append_audit",
    "append_group",
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

Conn = Connection[Any]


def nothing(conn: Conn) -> None:
    """Do nothing (opening the pool is the point)."""
    return None


def append(
    conn: Conn,
    record: CheckpointRecord,
    expected_head: str | None,
    new_interrupts: Sequence[InterruptRecord],
    resolutions: Sequence[Resolution],
    fence: Fence | None,
    audit: Sequence[AuditEntry],
    now: float,
    *,
    retried: bool = False,
    durable: bool = True,
) -> int | None:
    """`Store.append_checkpoint` in one statement, one round trip: ``interlock_append`` does
    the whole append server-side (the lease expires at ``now`` + ttl, as the client says).

    The call goes to libpq directly (`_postgres_wire`), its parameters in binary; psycopg's
    path remains for a connection whose client encoding is not UTF-8, and for a value the
    binary encoding does not take (an int out of ``bigint``'s range: the server refuses it).
    """
    try:
        try:
            params = _binary_params(record, expected_head, new_interrupts, resolutions, fence,
                                    audit, now, retried)  # fmt: skip
        except (struct.error, TypeError, AttributeError):
            raise wire.PsycopgNeeded() from None
        result = wire.call(
            conn,
            b"interlock_append" if durable else b"interlock_append_lazily",
            sql.APPEND_BINARY if durable else sql.APPEND_BINARY_LAZILY,
            params,
            prepare=conn.prepare_threshold is not None,
        )
        token = result.get_value(0, 0)
    except wire.PsycopgNeeded:
        args = _params(record, expected_head, new_interrupts, resolutions, fence, audit, now,
                       retried)  # fmt: skip
        try:
            token = _fetchone(conn, sql.APPEND if durable else sql.APPEND_LAZILY, args)[0]
        except psycopg.Error as exc:
            _raise_append_error(record, expected_head, fence, now, exc)
            raise
    except psycopg.Error as exc:
        _raise_append_error(record, expected_head, fence, now, exc)
        raise
    return None if fence is None or token is None else int(token)


def _raise_append_error(
    record: CheckpointRecord,
    expected_head: str | None,
    fence: Fence | None,
    now: float,
    exc: psycopg.Error,
) -> None:
    """Raise the typed error for ``interlock_append``'s failure ``exc``, if it has one."""
    if isinstance(exc, psycopg.errors.UniqueViolation):
        raise StoreError(
            f"cannot append checkpoint {record.id!r} to thread {record.thread!r}: "
            f"{exc.diag.message_detail or exc}; checkpoint and interrupt ids must be "
            "unique across the store"
        ) from exc
    if isinstance(exc, psycopg.DatabaseError) and exc.diag.sqlstate == sql.APPEND_REFUSED:
        raise _refusal(record, expected_head, fence, now, exc.diag.message_primary) from None


def _binary_params(
    record: CheckpointRecord,
    expected_head: str | None,
    new: Sequence[InterruptRecord],
    resolutions: Sequence[Resolution],
    fence: Fence | None,
    audit: Sequence[AuditEntry],
    now: float,
    retried: bool,
) -> list[bytes | None]:
    """``interlock_append``'s parameters in PostgreSQL's binary format (see `sql.APPEND`)."""
    values: tuple[Any, ...] = conv.checkpoint_values(record)
    thread, seq, id, parent, step, base_seq, created_at, source, status, body = values
    int8, float8, texts, byteas = wire.int8, wire.float8, wire.texts, wire.byteas
    params: list[bytes | None] = [
        thread.encode(),
        int8(seq),
        id.encode(),
        None if parent is None else parent.encode(),
        int8(step),
        int8(base_seq),
        float8(created_at),
        None if source is None else source.encode(),
        status.encode(),
        body,
        conv.checkpoint_digest(values),
        conv.thread_digest(thread, id, seq, status, created_at),
        None if expected_head is None else expected_head.encode(),
    ]
    if fence is None:
        params += (b"\x00", None, None, None, b"\x00")
    else:
        owner, token = fence.owner, fence.token
        params += (
            b"\x01",
            None if owner is None else owner.encode(),
            None if token is None else int8(token),
            None if fence.ttl is None else float8(fence.ttl),
            b"\x01" if fence.release else b"\x00",
        )
    params += (float8(now), b"\x01" if retried else b"\x00")
    if resolutions:
        params += map(_apply, _RESOLUTION_ENCODERS, _resolution_columns(resolutions))
    else:
        params += (None,) * 4
    if new:
        params += map(_apply, _INTERRUPT_ENCODERS, _interrupt_columns(new))
    else:
        params += (None,) * 12
    prefix, kinds, actors, data, suffixes = _audit_params(thread, audit, now)
    if prefix is None:
        params += (None,) * 5
    else:
        assert kinds is not None and actors is not None and data is not None
        assert suffixes is not None
        params += (prefix, texts(kinds), texts(actors), byteas(data), byteas(suffixes))
    return params


def _resolution_columns(resolutions: Sequence[Resolution]) -> list[list[Any]]:
    """``interlock_append``'s resolution arrays: a list per column, a value per resolution."""
    return [
        [r.id for r in resolutions],
        [r.status for r in resolutions],
        [r.resolved_at for r in resolutions],
        [r.resolution for r in resolutions],
    ]


def _interrupt_columns(new: Sequence[InterruptRecord]) -> list[list[Any]]:
    """``interlock_append``'s arrays of new interrupts: a list per column, a value each."""
    return [
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


def _apply(encode: Callable[[Any], bytes], column: Any) -> bytes:
    return encode(column)


# The binary encoding of each column of `_resolution_columns` / `_interrupt_columns`.
_RESOLUTION_ENCODERS: tuple[Callable[[Any], bytes], ...] = (
    wire.texts, wire.texts, wire.float8s, wire.byteas
)  # fmt: skip
_INTERRUPT_ENCODERS: tuple[Callable[[Any], bytes], ...] = (
    wire.texts, wire.texts, wire.texts, wire.texts, wire.texts, wire.float8s, wire.float8s,
    wire.byteas, wire.float8s, wire.byteas, wire.texts, wire.byteas,
)  # fmt: skip


def _params(
    record: CheckpointRecord,
    expected_head: str | None,
    new: Sequence[InterruptRecord],
    resolutions: Sequence[Resolution],
    fence: Fence | None,
    audit: Sequence[AuditEntry],
    now: float,
    retried: bool,
) -> tuple[Any, ...]:
    """``interlock_append``'s parameters for psycopg (see `sql.APPEND`)."""
    thread = record.thread
    # Empty lists go as NULL (the function treats both alike): adapting a list costs more.
    res = _resolution_columns(resolutions) if resolutions else [None] * 4
    rows = _interrupt_columns(new) if new else [None] * 12
    return (
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


def append_group(
    conn: Conn, writes: Sequence[Callable[[Conn], Any]], *, durable: bool
) -> list[tuple[Any, BaseException | None]]:
    """Run ``writes`` (appends, `append` bound to their arguments) in one transaction.

    Each runs in a savepoint of its own: one that raises is rolled back to it alone, its error
    kept as its outcome, and the others go on, each seeing the writes before it as if they had
    committed one by one in this order (so every check of a head or a lease holds per write).
    The transaction commits durably unless ``durable`` is False (none of them asked). Returns
    each write's ``(value, error)`` once the ``COMMIT`` returned; raises (nothing committed)
    if the connection failed or the transaction could not begin or commit.
    """
    outcomes: list[tuple[Any, BaseException | None]] = []
    with conn.transaction():
        conn.execute(sql.GROUP_START if durable else sql.GROUP_START_LAZILY)
        for write in writes:
            try:
                value = write(conn)
            except Exception as exc:
                if conn.broken:  # the whole transaction is lost
                    raise
                conn.execute(sql.GROUP_UNDO)
                outcomes.append((None, exc))
            else:
                conn.execute(sql.GROUP_NEXT)
                outcomes.append((value, None))
    return outcomes


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
        tail = _fetchone(conn, sql.SHARED.audit_tail, (thread,))
        rows = chain(thread, None if tail is None else (tail[0], bytes(tail[1])), entries, now)
        with conn.cursor() as cur:
            cur.executemany(sql.SHARED.insert_audit, [conv.audit_row(r) for r in rows])


def _fenced(conn: Conn, thread: str, fence: Fence | None, now: float) -> None:
    """Lock the thread's row and check (and move) its lease for a write that is no checkpoint."""
    row = _fetchone(conn, sql.SELECT_LEASE, (thread,))
    current = None if row is None else conv.lease_from_row(row, thread)
    lease = lease_after(thread, current, fence, now)
    if current is not None and current != lease:
        conn.execute(sql.SHARED.set_lease, (*lease, conv.lease_digest(thread, *lease), thread))


def renew(conn: Conn, thread: str, fence: Fence, now: float) -> None:
    """`Store.renew_lease`."""
    with conn.transaction():
        _fenced(conn, thread, fence, now)


def begin_effect(
    conn: Conn,
    thread: str,
    key: str,
    name: str,
    fence: Fence | None,
    retry: bool,
    audit: Sequence[AuditEntry],
    now: float,
) -> tuple[bool, EffectRecord]:
    """`Store.begin_effect`."""
    with conn.transaction():
        _fenced(conn, thread, fence, now)
        row = _fetchone(conn, sql.INSERT_EFFECT, (thread, key, name, now))
        if row is None:
            found = conv.checked_effect(
                _fetchone(conn, sql.SHARED.select_effect, (thread, key)), thread, key
            )
            if not (retry and found.status == "started"):
                return False, found
            row = _fetchone(conn, sql.RESTART_EFFECT, (now, thread, key))
        _log(conn, thread, audit, now)
    return True, conv.checked_effect(row, thread, key)


def finish_effect(
    conn: Conn,
    thread: str,
    key: str,
    result: bytes | None,
    fence: Fence | None,
    audit: Sequence[AuditEntry],
    now: float,
    *,
    durable: bool = True,
) -> None:
    """`Store.finish_effect`."""
    with conn.transaction():
        if not durable:  # this transaction only: safe behind a transaction-pooling proxy
            conn.execute(sql.COMMIT_LAZILY)
        _fenced(conn, thread, fence, now)
        if not _changed(conn, sql.SHARED.finish_effect, (now, result, thread, key)):
            row = _fetchone(conn, sql.SHARED.select_effect, (thread, key))
            refused = finish_refused(
                thread, key, None if row is None else conv.checked_effect(row, thread, key), result
            )
            if refused is None:
                return  # the same outcome recorded again (a retried call)
            raise refused
        _log(conn, thread, audit, now)


def append_audit(
    conn: Conn, thread: str, entries: Sequence[AuditEntry], now: float, *, durable: bool = True
) -> None:
    """`Store.append_audit`: the thread's row lock serialises it with every other write to
    the log (``interlock_append`` takes the same lock)."""
    with conn.transaction():
        if not durable:  # this transaction only: safe behind a transaction-pooling proxy
            conn.execute(sql.COMMIT_LAZILY)
        if _fetchone(conn, sql.SELECT_LEASE, (thread,)) is None:
            raise CheckpointNotFound(thread)
        _log(conn, thread, entries, now)


def audit_log(
    conn: Conn, thread: str | None, after: tuple[str, int] | None, limit: int
) -> list[AuditRecord]:
    """`Store.audit_log`."""
    query, params = sql.SHARED.audit_query(thread, after, limit)
    return [conv.audit_from_row(row) for row in _fetchall(conn, query, params)]


def expire(conn: Conn, older_than: float, limit: int, now: float) -> list[str]:
    """`Store.expire`."""
    with conn.transaction():
        rows = _fetchall(conn, sql.EXPIRED_THREADS, (older_than, limit))
        # A damaged row must not delete a thread that is not finished.
        gone = [conv.thread_from_row(row, row[0]).thread for row in rows]
        for thread in gone:
            _delete_rows(conn, thread, now)
    return gone


def delete(conn: Conn, thread: str, now: float) -> None:
    """`Store.delete_thread`."""
    with conn.transaction():
        _delete_rows(conn, thread, now)


def _delete_rows(conn: Conn, thread: str, now: float) -> None:
    first, *rest = sql.DELETE_THREAD  # the threads row: it locks the thread
    if _changed(conn, first, (thread,)):
        _log(conn, thread, [thread_deleted()], now)
    for statement in rest:
        conn.execute(statement, (thread,))


def changes(conn: Conn, after: tuple[int, int], limit: int) -> list[ChangeRecord]:
    """`Store.changes`: the page after ``(txid, seq)``, each row checked."""
    rows = _fetchall(conn, sql.CHANGES, (str(after[0]), after[1], limit))
    xmax = int(rows[0][0])
    if after[0] > xmax:
        raise cursor_ahead(f"{after[0]}-{after[1]}", f"{xmax}-0")
    out: list[ChangeRecord] = []
    for row in rows:
        if row[1] is None:  # the page is empty
            break
        position = (int(row[1]), int(row[2]))
        cursor = f"{position[0]}-{position[1]}"
        if not after < position:
            raise conv.misplaced_change(cursor, f"{after[0]}-{after[1]}")
        after = position
        out.append(conv.change_from_row(row[3:], cursor))
    return out


def change_cursor(conn: Conn) -> str:
    """`Store.change_cursor`: before the oldest transaction still running."""
    return f"{_fetchone(conn, sql.CHANGE_CURSOR, ())[0]}-0"


def prune_changes(conn: Conn, older_than: float, limit: int) -> int:
    """`Store.prune_changes`."""
    with conn.cursor() as cur:
        cur.execute(sql.PRUNE_CHANGES, {"older_than": older_than, "limit": limit})
        return cur.rowcount


def _changed(conn: Conn, statement: str, params: Any) -> bool:
    """Run a write; whether it changed any row."""
    with conn.cursor() as cur:
        cur.execute(statement, params)
        return cur.rowcount > 0


def _fetchone(conn: Conn, query: str, params: Any) -> Any:
    """Run a query; its first row (None if none)."""
    with conn.cursor() as cur:
        cur.execute(query, params)
        return cur.fetchone()


def _fetchall(conn: Conn, query: str, params: Any) -> list[Any]:
    """Run a query; all its rows."""
    with conn.cursor() as cur:
        cur.execute(query, params)
        return cur.fetchall()


def head_checkpoint(conn: Conn, thread: str) -> CheckpointRecord | None:
    """The thread's head checkpoint (`Store.get_checkpoint` without an id)."""
    row = _fetchone(conn, sql.SELECT_HEAD_CHECKPOINT, (thread,))
    if row is None:
        _no_thread(conn, thread)
        return None
    return conv.head_checkpoint_from_row(row, thread)


def _no_thread(conn: Conn, thread: str) -> None:
    """Refuse to say a thread does not exist when its checkpoints are there (a lost head)."""
    if _fetchone(conn, sql.SHARED.has_checkpoints, (thread,)) is not None:
        # Under READ COMMITTED each statement sees its own snapshot: a thread whose first
        # append committed between the two reads is new, not damaged.
        if _fetchone(conn, sql.SHARED.select_thread, (thread,)) is not None:
            return
        raise CheckpointCorrupt(
            f"thread {thread!r} has checkpoints but no head: the database was damaged. "
            "Restore it from a backup; the other threads can still be read",
            thread=thread,
        )


def thread_record(conn: Conn, thread: str) -> ThreadRecord | None:
    """`Store.get_thread`."""
    row = _fetchone(conn, sql.SHARED.select_thread, (thread,))
    if row is None:
        _no_thread(conn, thread)
        return None
    return conv.thread_from_row(row, thread)


def threads(conn: Conn, status: str | None, limit: int, after: str | None) -> list[ThreadRecord]:
    """`Store.threads`."""
    query, params = sql.SHARED.threads_query(status, limit, after)
    return [conv.thread_from_row(row, row[0]) for row in _fetchall(conn, query, params)]


def workers_continue(conn: Conn) -> bool:
    """`PostgresStore.workers_continue`."""
    row = _fetchone(conn, sql.SELECT_CONTINUATION_TRIGGER, (sql.CONTINUATION_TRIGGER,))
    return bool(row and row[0])


def checkpoint(conn: Conn, thread: str, id: str) -> CheckpointRecord | None:
    """One checkpoint by id (`Store.get_checkpoint`)."""
    row = _fetchone(conn, sql.SHARED.select_checkpoint, (id, thread))
    return None if row is None else conv.checkpoint_from_row(row, thread=thread, id=id)


def _with_head(rows: list[Any], thread: str) -> tuple[int | None, list[CheckpointRecord]]:
    """Split rows of ``head_seq`` + checkpoint columns (all NULL when there are none)."""
    if not rows:
        return None, []
    records = conv.checkpoints_from_rows(
        [row for row in rows if row[1] is not None], thread=thread, offset=1
    )
    return int(rows[0][0]), records


def checkpoint_range(conn: Conn, thread: str, lo: int, hi: int) -> list[CheckpointRecord]:
    """`Store.checkpoint_range`."""
    head_seq, records = _with_head(_fetchall(conn, sql.SELECT_RANGE, (lo, hi, thread)), thread)
    return conv.checked_range(records, head_seq, thread, lo, hi)


def checkpoints_at(conn: Conn, thread: str, seqs: list[int]) -> list[CheckpointRecord]:
    """`Store.checkpoints_at` (``seqs`` checked, sorted and unique)."""
    wanted = [s for s in seqs if -(2**63) <= s < 2**63]  # what a bigint can hold
    if not wanted:
        return []
    rows = _fetchall(conn, sql.SELECT_AT, (thread, wanted))
    return conv.checkpoints_from_rows(rows, thread=thread)


def checkpoint_page(
    conn: Conn, thread: str, before_seq: int | None, limit: int
) -> list[CheckpointRecord]:
    """`Store.list_checkpoints`."""
    before = 2**63 - 1 if before_seq is None else before_seq
    rows = _fetchall(conn, sql.SELECT_PAGE, (before, limit, thread))
    head_seq, records = _with_head(rows, thread)
    return conv.checked_page(records, head_seq, thread, before_seq, limit)


def effect(conn: Conn, thread: str, key: str) -> EffectRecord | None:
    """`Store.get_effect`."""
    row = _fetchone(conn, sql.SHARED.select_effect, (thread, key))
    return None if row is None else conv.checked_effect(row, thread, key)


def interrupt(conn: Conn, id: str) -> InterruptRecord | None:
    """`Store.get_interrupt`."""
    row = _fetchone(conn, sql.SHARED.select_interrupt, (id,))
    return None if row is None else conv.interrupt_from_row(row, id=id)


def pending(
    conn: Conn, where: PendingFilter, limit: int, after: str | None
) -> list[InterruptRecord]:
    """`Store.pending`."""
    query, params = sql.pending_query(where, limit, after)
    return conv.pending_from_rows(_fetchall(conn, query, params), where)


def pending_counts(conn: Conn, where: PendingFilter) -> dict[str | None, int]:
    """`Store.pending_counts`."""
    query, params = sql.pending_counts_query(where)
    return {tool: int(count) for tool, count in _fetchall(conn, query, params)}


def request_pause(conn: Conn, thread: str, kind: PauseKind, now: float) -> bool:
    """`Store.request_pause`, announced on `sql.PAUSE_CHANNEL` when it commits.

    A worker running the thread listens there and looks at once, instead of at its next poll.
    """
    with conn.transaction():
        if not _changed(conn, sql.SHARED.request_pause, (thread, kind, now, thread)):
            return False
        payload = thread if len(thread.encode()) <= sql.PAUSE_PAYLOAD_MAX else ""
        conn.execute(sql.NOTIFY_PAUSE, (sql.PAUSE_CHANNEL, payload))
    return True


def take_pause(conn: Conn, thread: str) -> PauseKind | None:
    """`Store.take_pause_request`."""
    row = _fetchone(conn, sql.SHARED.take_pause, (thread,))
    return None if row is None else row[0]
