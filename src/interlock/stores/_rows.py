"""Records to table rows and back, shared by the SQL backends (same columns, same order).

Every checkpoint, interrupt and thread row carries digests of its own columns, written by the
store with every insert and update and checked on every read, and every row read is checked
against what was asked for. A damaged file can then fail a read but never answer it with
another thread's state, a made-up status or a stale head (see `CheckpointCorrupt`).

A digest is the first 8 bytes of SHA-256 over the columns as one msgpack array (msgspec's
encoding: the smallest integer form, float64 for reals, str and bin for text and blobs).
Numbers are coerced to the column's type before they are stored, so what is read back
digests as what was written. PostgreSQL computes the same encoding in SQL where the server
decides a value (the lease an append takes) and when it migrates older rows.

A checkpoint's body stands in its digest as its length and its CRC-32 (`checkpoint_digest`):
a state of hundreds of kilobytes is summed at memory speed instead of hashed, and a damaged
body still fails the check. Rows written before digested the body itself, and are checked
that way when the summed digest does not match.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any, Final, get_args

import msgspec

from .._errors import CheckpointCorrupt
from .._lazy import lazy_module
from ._base import (
    AUDIT_KINDS,
    CHANGE_KINDS,
    INTERRUPT_KINDS,
    INTERRUPT_STATUSES,
    AuditRecord,
    ChangeRecord,
    CheckpointRecord,
    EffectRecord,
    InterruptKind,
    InterruptRecord,
    PendingFilter,
    ThreadRecord,
)
from ._changes import Change

if TYPE_CHECKING:
    import hashlib
    import zlib
else:  # imported by the first call that needs it, not by `import interlock`
    hashlib = lazy_module("hashlib", globals())
    zlib = lazy_module("zlib", globals())

__all__ = [
    "AUDIT_COLUMNS",
    "CHANGE_COLUMNS",
    "CHECKPOINT_COLUMNS",
    "EFFECT_COLUMNS",
    "INTERRUPT_COLUMNS",
    "THREAD_COLUMNS",
    "audit_from_row",
    "audit_row",
    "change_from_row",
    "change_rows",
    "checked_effect",
    "checked_page",
    "checked_range",
    "checkpoint_digest",
    "checkpoint_from_row",
    "checkpoint_row",
    "checkpoint_values",
    "checkpoints_from_rows",
    "digest",
    "effect_from_row",
    "head_checkpoint_from_row",
    "interrupt_digest",
    "interrupt_from_row",
    "interrupt_row",
    "lease_digest",
    "lease_from_row",
    "lost_interrupt",
    "misplaced_change",
    "pending_from_rows",
    "sql_digest",
    "thread_digest",
    "thread_from_row",
]

CHECKPOINT_COLUMNS: Final = (
    "thread, seq, id, parent_id, step, base_seq, created_at, source, status, body, digest"
)
INTERRUPT_COLUMNS: Final = (
    "id, thread, checkpoint_id, key, address, kind, status, created_at, deadline, body, "
    "resolved_at, resolution, tool, digest"
)
THREAD_COLUMNS: Final = "thread, head_id, head_seq, status, updated_at, digest"
EFFECT_COLUMNS: Final = "thread, key, name, status, attempt, started_at, finished_at, result"
AUDIT_COLUMNS: Final = "thread, seq, at, kind, actor, data, prev, hash"
CHANGE_COLUMNS: Final = "at, kind, thread, checkpoint_id, interrupt_id, actor, digest"
"""The columns of a change row after its position (which each backend keeps its own way)."""


_encode = msgspec.msgpack.Encoder().encode
_hash_digest: Final = operator.methodcaller("digest")
_first8: Final = operator.itemgetter(slice(8))


def digest(*values: object) -> bytes:
    """The digest of column values (see the module docstring)."""
    return hashlib.sha256(_encode(values)).digest()[:8]


def sql_digest(*values: object) -> bytes:
    """`digest` for a SQL function (a damaged column digests to nothing that matches)."""
    try:
        return digest(*values)
    except (TypeError, ValueError, OverflowError):
        return b""


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


def thread_digest(thread: str, head_id: str, head_seq: int, status: str, at: float) -> bytes:
    """The digest of a thread row's head columns."""
    return digest(thread, head_id, int(head_seq), status, float(at))


def lease_digest(thread: str, owner: str | None, token: int, expires: float) -> bytes:
    """The digest of a thread row's lease columns."""
    return digest(thread, owner, int(token), float(expires))


def _corrupt(what: str, thread: str | None, checkpoint_id: str | None = None) -> CheckpointCorrupt:
    return CheckpointCorrupt(
        f"{what}: the store's file is damaged. Restore it from a backup; the other threads "
        "can still be read",
        thread=thread,
        checkpoint_id=checkpoint_id,
    )


def lost_interrupt(id: str, thread: str) -> CheckpointCorrupt:
    """The error for a pending interrupt that its thread lists but a lookup by id missed."""
    return _corrupt(
        f"interrupt {id} of thread {thread!r} is pending but its row cannot be found by id",
        thread,
    )


# Records to rows and back; the column order is CHECKPOINT_COLUMNS / INTERRUPT_COLUMNS.


def checkpoint_values(r: CheckpointRecord) -> tuple[object, ...]:
    """The columns of a checkpoint row that its digest covers (all but the digest)."""
    return (
        r.thread,
        int(r.seq),
        r.id,
        r.parent_id,
        int(r.step),
        int(r.base_seq),
        float(r.created_at),
        r.source,
        r.status,
        r.body,
    )


def _summed(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """A checkpoint's columns as its digest covers them: the body as its length and CRC-32."""
    body = values[9]
    return (*values[:9], len(body), zlib.crc32(body))


def checkpoint_digest(values: tuple[object, ...]) -> bytes:
    """The digest of a checkpoint row's columns (`checkpoint_values`)."""
    return digest(*_summed(values))


def checkpoint_row(r: CheckpointRecord) -> tuple[object, ...]:
    values = checkpoint_values(r)
    return (*values, checkpoint_digest(values))


def _interrupt_values(r: InterruptRecord) -> tuple[object, ...]:
    return (
        r.id,
        r.thread,
        r.checkpoint_id,
        r.key,
        r.address,
        r.kind,
        r.status,
        float(r.created_at),
        _float(r.deadline),
        r.body,
        _float(r.resolved_at),
        r.resolution,
        r.tool,
    )


def interrupt_row(r: InterruptRecord) -> tuple[object, ...]:
    values = _interrupt_values(r)
    return (*values, digest(*values))


def interrupt_digest(r: InterruptRecord) -> bytes:
    """The digest of an interrupt row's columns (its state included: rewritten on resolving)."""
    return digest(*_interrupt_values(r))


def checkpoint_from_row(row: Any, *, thread: str, id: str | None = None) -> CheckpointRecord:
    """The checkpoint in ``row``, checked against its digest and against what was asked.

    Raises:
        CheckpointCorrupt: The row is damaged, or is not of ``thread`` (or not ``id``).
    """
    r_thread, seq, r_id, parent_id, step, base_seq, created_at, source, status, body = (
        _CHECKPOINT_VALUES(row)
    )
    asked = f"checkpoint {id} of thread {thread!r}" if id else f"a checkpoint of thread {thread!r}"
    if not _checkpoint_matches(
        row[10], (r_thread, seq, r_id, parent_id, step, base_seq, created_at, source, status, body)
    ):
        raise _corrupt(f"{asked} does not match its digest", thread, id or str(r_id))
    if r_thread != thread or (id is not None and r_id != id):
        raise _corrupt(f"reading {asked} found checkpoint {r_id} of {r_thread!r}", thread, id)
    return CheckpointRecord(
        thread=r_thread,
        id=r_id,
        parent_id=parent_id,
        seq=seq,
        step=step,
        base_seq=base_seq,
        created_at=created_at,
        source=source,
        status=status,
        body=bytes(body),
    )


def checkpoints_from_rows(
    rows: Sequence[Any], *, thread: str, offset: int = 0
) -> list[CheckpointRecord]:
    """``[checkpoint_from_row(row[offset:], thread=thread) for row in rows]``, checked faster.

    A delta chain is hundreds of rows: their digests and threads are checked in C-level passes
    over all of them; when one fails, the rows are checked again one by one, so the error
    names the first bad row.
    """
    values, stored, threads = _row_getters(offset)
    try:
        summed = map(_summed, map(values, rows))
        digests = map(_first8, map(_hash_digest, map(hashlib.sha256, map(_encode, summed))))
        sound = list(digests) == list(map(bytes, map(stored, rows))) and set(
            map(threads, rows)
        ) <= {thread}
    except (TypeError, ValueError, OverflowError):
        sound = False  # a damaged column of a type that does not even encode
    if not sound:  # a damaged row, or rows digested before bodies were summed
        return [checkpoint_from_row(row[offset:], thread=thread) for row in rows]
    o = offset
    return [
        CheckpointRecord(
            thread=thread,
            id=row[o + 2],
            parent_id=row[o + 3],
            seq=row[o + 1],
            step=row[o + 4],
            base_seq=row[o + 5],
            created_at=row[o + 6],
            source=row[o + 7],
            status=row[o + 8],
            body=bytes(row[o + 9]),
        )
        for row in rows
    ]


@functools.cache
def _row_getters(
    offset: int,
) -> tuple[operator.itemgetter[Any], operator.itemgetter[Any], operator.itemgetter[Any]]:
    """The columns a digest covers, the stored digest, and the thread, at ``offset``."""
    return (
        operator.itemgetter(*range(offset, offset + 10)),
        operator.itemgetter(offset + 10),
        operator.itemgetter(offset),
    )


def head_checkpoint_from_row(row: Any, thread: str) -> CheckpointRecord:
    """The head checkpoint from a row of checkpoint columns then thread columns, cross-checked.

    Raises:
        CheckpointCorrupt: Either part is damaged, or the checkpoint is not the thread's head.
    """
    n = len(CHECKPOINT_COLUMNS.split(","))
    head = thread_from_row(row[n:], thread)
    if row[0] is None:
        raise _corrupt(f"thread {thread!r} has no checkpoint at its head {head.head_id}", thread)
    record = checkpoint_from_row(row[:n], thread=thread, id=head.head_id)
    if (record.seq, record.status, record.created_at) != (
        head.head_seq,
        head.status,
        head.updated_at,
    ):
        raise _corrupt(
            f"the head of thread {thread!r} does not match its checkpoint {record.id}",
            thread,
            record.id,
        )
    return record


def checked_range(
    rows: Sequence[CheckpointRecord], head_seq: int | None, thread: str, lo: int, hi: int
) -> list[CheckpointRecord]:
    """Refuse a range read that is not exactly the seqs ``lo..hi`` the thread has."""
    top = min(hi, head_seq or 0)
    expected = list(range(max(lo, 1), top + 1))
    if [r.seq for r in rows] != expected:
        raise _corrupt(
            f"reading checkpoints {lo}..{hi} of thread {thread!r} found seqs "
            f"{[r.seq for r in rows][:20]}, expected {expected[:20]}",
            thread,
        )
    return list(rows)


def checked_page(
    rows: Sequence[CheckpointRecord],
    head_seq: int | None,
    thread: str,
    before_seq: int | None,
    limit: int,
) -> list[CheckpointRecord]:
    """Refuse a page of history that is not exactly the newest ``limit`` seqs below the bound."""
    top = (head_seq or 0) if before_seq is None else min(before_seq - 1, head_seq or 0)
    expected = list(range(top, max(top - limit, 0), -1))
    if [r.seq for r in rows] != expected:
        raise _corrupt(
            f"reading the history of thread {thread!r} found seqs {[r.seq for r in rows][:20]}, "
            f"expected {expected[:20]}",
            thread,
        )
    return list(rows)


# The columns each digest covers, by position in INTERRUPT_COLUMNS / CHECKPOINT_COLUMNS.
_INTERRUPT_VALUES: Final = operator.itemgetter(*range(13))
_STORED_DIGEST: Final = operator.itemgetter(13)
_KIND: Final = operator.itemgetter(5)
_STATUS: Final = operator.itemgetter(6)
_ORDER: Final = operator.itemgetter(7, 14)  # created_at, then the tiebreak after the columns
_RESOLUTION: Final = operator.itemgetter(10, 11)
_PENDING_ONLY: Final = frozenset({"pending"})
_UNRESOLVED: Final = frozenset({(None, None)})
_KINDS: Final[dict[str, InterruptKind]] = {kind: kind for kind in get_args(InterruptKind)}
_EVERYTHING: Final = PendingFilter()
_CHECKPOINT_VALUES: Final = operator.itemgetter(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)


def _matches(stored: Any, values: tuple[Any, ...]) -> bool:
    """Whether ``stored`` is the digest of ``values`` as read (their types as the column's)."""
    try:
        return stored is not None and bytes(stored) == hashlib.sha256(_encode(values)).digest()[:8]
    except (TypeError, ValueError, OverflowError):
        return False  # a damaged column of a type that does not even encode


def _checkpoint_matches(stored: Any, values: tuple[Any, ...]) -> bool:
    """`_matches` for a checkpoint row: its body summed, or (a row written before) itself."""
    try:
        summed = _summed(values)
    except (TypeError, ValueError, OverflowError):
        return False  # a body that is not bytes
    return _matches(stored, summed) or _matches(stored, values)


def _known(value: Any, vocabulary: frozenset[str]) -> bool:
    """Whether a column read back holds a word of its closed set."""
    return isinstance(value, str) and value in vocabulary


def interrupt_from_row(
    row: Any, *, id: str | None = None, thread: str | None = None
) -> InterruptRecord:
    """The interrupt in ``row``, checked against its digests and against what was asked.

    Raises:
        CheckpointCorrupt: The row is damaged (its digest, status or kind), or is not ``id``
            (or not of ``thread``).
    """
    r_id, r_thread, kind, status = row[0], row[1], row[5], row[6]
    if not _matches(row[13], _INTERRUPT_VALUES(row)):
        raise _corrupt(
            f"interrupt {id or r_id} of thread {r_thread!r} does not match its digest", thread
        )
    if not _known(status, INTERRUPT_STATUSES) or not _known(kind, INTERRUPT_KINDS):
        raise _corrupt(
            f"interrupt {id or r_id} of thread {r_thread!r} has status {status!r:.40} and kind "
            f"{kind!r:.40}, which interlock never writes",
            thread,
        )
    if (id is not None and r_id != id) or (thread is not None and r_thread != thread):
        raise _corrupt(
            f"reading interrupt {id or r_id} found interrupt {r_id} of {r_thread!r}", thread
        )
    resolution = row[11]
    return InterruptRecord(
        id=r_id,
        thread=r_thread,
        checkpoint_id=row[2],
        key=row[3],
        address=row[4],
        kind=kind,
        status=status,
        created_at=row[7],
        deadline=row[8],
        body=bytes(row[9]),
        resolved_at=row[10],
        resolution=None if resolution is None else bytes(resolution),
        tool=row[12],
    )


def pending_from_rows(rows: Sequence[Any], where: PendingFilter) -> list[InterruptRecord]:
    """An inbox page from rows of INTERRUPT_COLUMNS plus the tiebreak, each one checked.

    Every row must match its digest, be pending, match ``where`` and come after the one before
    it: an index that a damaged file mixed up cannot slip in a decided interrupt or another
    thread's. The checks run over the whole page in C-level passes; when one fails, the rows
    are checked again one by one, so the error names the first bad row.
    """
    if not _page_is_sound(rows):
        return _pending_one_by_one(rows, where)
    # The kinds are the vocabulary's own strings, one object each however many rows.
    out = [
        InterruptRecord(
            id=row[0],
            thread=row[1],
            checkpoint_id=row[2],
            key=row[3],
            address=row[4],
            kind=_KINDS[row[5]],
            status="pending",
            created_at=row[7],
            deadline=row[8],
            body=bytes(row[9]),
            tool=row[12],
        )
        for row in rows
    ]
    if where != _EVERYTHING and not all(map(where.matches, out)):
        return _pending_one_by_one(rows, where)
    return out


def _page_is_sound(rows: Sequence[Any]) -> bool:
    """Whether every row passes `interrupt_from_row`'s checks and comes after the one before it.

    The checks are C-level passes over the whole page. A pending row with a resolution (which
    interlock never writes) is left to the row-by-row path, which keeps the resolution.
    """
    try:
        encoded = map(_encode, map(_INTERRUPT_VALUES, rows))
        digests = map(_first8, map(_hash_digest, map(hashlib.sha256, encoded)))
        orders = list(map(_ORDER, rows))
        return (
            list(digests) == list(map(_STORED_DIGEST, rows))
            and set(map(_STATUS, rows)) <= _PENDING_ONLY
            and set(map(_KIND, rows)) <= INTERRUPT_KINDS
            and set(map(_RESOLUTION, rows)) <= _UNRESOLVED
            and all(map(operator.lt, orders, islice(orders, 1, None)))
        )
    except (TypeError, ValueError, OverflowError):
        return False  # a damaged column of a type that does not even encode or compare


def _pending_one_by_one(rows: Sequence[Any], where: PendingFilter) -> list[InterruptRecord]:
    """`pending_from_rows`, a row at a time: raises for the first row that is not sound."""
    out = [interrupt_from_row(row, thread=where.thread) for row in rows]
    last: tuple[float, int] | None = None
    for record, row in zip(out, rows, strict=True):
        order = (record.created_at, row[14])
        if (
            record.status != "pending"
            or (last is not None and not last < order)
            or not where.matches(record)
        ):
            raise _corrupt(
                f"the inbox index returned interrupt {record.id}, which does not belong there",
                record.thread,
            )
        last = order
    return out


def checked_effect(row: Any, thread: str, key: str) -> EffectRecord:
    """An effect row as a record, refused unless it is effect ``key`` of ``thread``.

    Raises:
        CheckpointCorrupt: The row is another effect's.
    """
    found = effect_from_row(row)
    if (found.thread, found.key) != (thread, key):
        raise _corrupt(
            f"reading effect {key!r} of thread {thread!r} found effect {found.key!r} of "
            f"{found.thread!r}",
            thread,
        )
    return found


def effect_from_row(row: Any) -> EffectRecord:
    thread, key, name, status, attempt, started_at, finished_at, result = row
    return EffectRecord(
        thread=thread,
        key=key,
        name=name,
        status=status,
        attempt=attempt,
        started_at=started_at,
        finished_at=finished_at,
        result=None if result is None else bytes(result),
    )


def audit_row(r: AuditRecord) -> tuple[object, ...]:
    return (r.thread, r.seq, r.at, r.kind, r.actor, r.data, r.prev, r.hash)


def audit_from_row(row: Any) -> AuditRecord:
    # The log is read to check it for tampering: take whatever types an edit left behind.
    thread, seq, at, kind, actor, data, prev, digest = row
    if not _known(kind, AUDIT_KINDS):
        raise _corrupt(
            f"audit entry {seq!r} of thread {thread!r} has kind {kind!r:.40}, which interlock "
            "never writes",
            str(thread),
        )
    try:
        return AuditRecord(
            thread=str(thread),
            seq=int(seq),
            at=float(at),
            kind=kind,
            actor=None if actor is None else str(actor),
            data=_blob(data),
            prev=_blob(prev),
            hash=_blob(digest),
        )
    except (TypeError, ValueError, OverflowError):
        raise _corrupt(
            f"audit entry {seq!r} of thread {thread!r} has a column of the wrong type",
            str(thread),
        ) from None


def _blob(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode()
    return b"" if value is None else bytes(value)


def change_rows(record: CheckpointRecord, changes: Sequence[Change]) -> list[tuple[object, ...]]:
    """The rows (CHANGE_COLUMNS) of the changes an append of ``record`` makes."""
    at, thread, checkpoint_id = float(record.created_at), record.thread, record.id
    rows: list[tuple[object, ...]] = []
    for kind, interrupt_id in changes:
        values = (at, kind, thread, checkpoint_id, interrupt_id, None)
        rows.append((*values, digest(*values)))
    return rows


def change_from_row(row: Any, cursor: str) -> ChangeRecord:
    """The change in ``row`` (CHANGE_COLUMNS), checked against its digest and its kind.

    Raises:
        CheckpointCorrupt: The row is damaged.
    """
    at, kind, thread, checkpoint_id, interrupt_id, actor, stored = row
    of = thread if isinstance(thread, str) else None
    if not _matches(stored, (at, kind, thread, checkpoint_id, interrupt_id, actor)):
        raise _corrupt(f"change {cursor} of the change feed does not match its digest", of)
    if not _known(kind, CHANGE_KINDS):
        raise _corrupt(
            f"change {cursor} of the change feed has kind {kind!r:.40}, which interlock never "
            "writes",
            of,
        )
    return ChangeRecord(
        cursor=cursor,
        at=at,
        kind=kind,
        thread=thread,
        checkpoint_id=checkpoint_id,
        interrupt_id=interrupt_id,
        actor=actor,
    )


def misplaced_change(cursor: str, after: str) -> CheckpointCorrupt:
    """The error for a change the feed's index returned out of order (after ``after``)."""
    return _corrupt(f"the change feed returned change {cursor} after {after}, out of order", None)


def thread_from_row(row: Any, thread: str) -> ThreadRecord:
    """The head of ``thread`` from a row of THREAD_COLUMNS, checked against its digest.

    Raises:
        CheckpointCorrupt: The row is damaged or is another thread's.
    """
    r_thread, head_id, head_seq, status, updated_at, stored = row
    try:
        found = thread_digest(r_thread, head_id, head_seq, status, updated_at)
    except (TypeError, ValueError, OverflowError):
        raise _corrupt(
            f"the head of thread {thread!r} has a column of the wrong type", thread
        ) from None
    if stored is None or bytes(stored) != found:
        raise _corrupt(f"the head of thread {thread!r} does not match its digest", thread)
    if r_thread != thread:
        raise _corrupt(f"reading the head of thread {thread!r} found {r_thread!r}'s", thread)
    return ThreadRecord(
        thread=r_thread, head_id=head_id, head_seq=head_seq, status=status, updated_at=updated_at
    )


def lease_from_row(row: Any, thread: str) -> tuple[str | None, int, float]:
    """A thread's lease from ``(owner, token, expires, lease_digest)``, checked.

    Raises:
        CheckpointCorrupt: The columns do not match their digest.
    """
    owner, token, expires, stored = row
    try:
        found = lease_digest(thread, owner, token, expires)
    except (TypeError, ValueError, OverflowError):
        found = b""
    if stored is None or bytes(stored) != found:
        raise _corrupt(f"the lease of thread {thread!r} does not match its digest", thread)
    return owner, int(token), float(expires)
