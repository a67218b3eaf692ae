"""Records to table rows and back, shared by the SQL backends (same columns, same order).

Every checkpoint, interrupt and thread row carries digests of its own columns, written by the
store with every insert and update and checked on every read, and every row read is checked
against what was asked for. A damaged file can then fail a read but never answer it with
another thread's state, a made-up status or a stale head (see `CheckpointCorrupt`).

A digest is the first 8 bytes of SHA-256 over the columns, each encoded with a type tag:
``0x00`` for NULL; ``0x01``, a big-endian uint32 length and UTF-8 for text; ``0x02`` and a
big-endian int64 for an integer; ``0x03`` and a big-endian IEEE double for a real; ``0x04``, a
uint32 length and the bytes for a blob. PostgreSQL computes the same encoding in SQL where the
server decides a value (the lease an append takes).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from typing import Any, Final

from .._errors import CheckpointCorrupt
from ._base import (
    AuditRecord,
    CheckpointRecord,
    EffectRecord,
    InterruptRecord,
    Resolution,
    ThreadRecord,
)

__all__ = [
    "AUDIT_COLUMNS",
    "CHECKPOINT_COLUMNS",
    "CHECKPOINT_KINDS",
    "EFFECT_COLUMNS",
    "INTERRUPT_COLUMNS",
    "INTERRUPT_KINDS",
    "LEASE_KINDS",
    "STATE_KINDS",
    "THREAD_COLUMNS",
    "THREAD_KINDS",
    "audit_from_row",
    "audit_row",
    "checked_page",
    "checked_range",
    "checkpoint_from_row",
    "checkpoint_row",
    "digest",
    "effect_from_row",
    "head_checkpoint_from_row",
    "interrupt_from_row",
    "interrupt_row",
    "lease_digest",
    "lease_from_row",
    "lost_interrupt",
    "pending_filters",
    "pending_from_rows",
    "resolution_digests",
    "sql_digest",
    "thread_digest",
    "thread_from_row",
]

CHECKPOINT_COLUMNS: Final = (
    "thread, seq, id, parent_id, step, base_seq, created_at, source, status, body, digest"
)
INTERRUPT_COLUMNS: Final = (
    "id, thread, checkpoint_id, key, address, kind, status, created_at, deadline, body, "
    "resolved_at, resolution, tool, digest, state_digest"
)
THREAD_COLUMNS: Final = "thread, head_id, head_seq, status, updated_at, digest"
EFFECT_COLUMNS: Final = "thread, key, name, status, attempt, started_at, finished_at, result"
AUDIT_COLUMNS: Final = "thread, seq, at, kind, actor, data, prev, hash"


# Digests: the kinds of the columns each covers, in order (t text, i integer, f real, b blob).

CHECKPOINT_KINDS: Final = "tittiifttb"
INTERRUPT_KINDS: Final = "ttttttffbt"  # id, thread, checkpoint_id, key, address, kind, ...
STATE_KINDS: Final = "ttfb"  # id, status, resolved_at, resolution
THREAD_KINDS: Final = "ttitf"  # thread, head_id, head_seq, status, updated_at
LEASE_KINDS: Final = "ttif"  # thread, owner, token, expires
_INT: Final = struct.Struct(">q")
_REAL: Final = struct.Struct(">d")
_LEN: Final = struct.Struct(">I")


def digest(kinds: str, *values: object) -> bytes:
    """The digest of column values of the given kinds (see the module docstring)."""
    parts: list[bytes] = []
    for kind, value in zip(kinds, values, strict=True):
        if value is None:
            parts.append(b"\x00")
        elif kind == "t":
            raw = str(value).encode()
            parts += (b"\x01", _LEN.pack(len(raw)), raw)
        elif kind == "i":
            parts += (b"\x02", _INT.pack(int(value)))  # type: ignore[call-overload]
        elif kind == "f":
            parts += (b"\x03", _REAL.pack(float(value)))  # type: ignore[arg-type]
        else:
            raw = bytes(value)  # type: ignore[call-overload]
            parts += (b"\x04", _LEN.pack(len(raw)), raw)
    return hashlib.sha256(b"".join(parts)).digest()[:8]


def sql_digest(kinds: str, *values: object) -> bytes:
    """`digest` for a SQL function: a damaged column of the wrong type digests to garbage."""
    try:
        return digest(kinds, *values)
    except (TypeError, ValueError, OverflowError, struct.error):
        return b""


def thread_digest(thread: str, head_id: str, head_seq: int, status: str, at: float) -> bytes:
    """The digest of a thread row's head columns."""
    return digest(THREAD_KINDS, thread, head_id, head_seq, status, at)


def lease_digest(thread: str, owner: str | None, token: int, expires: float) -> bytes:
    """The digest of a thread row's lease columns."""
    return digest(LEASE_KINDS, thread, owner, token, expires)


def resolution_digests(res: Resolution) -> tuple[bytes, bytes]:
    """The state digest a pending interrupt must have, and the one ``res`` gives it."""
    return (
        digest(STATE_KINDS, res.id, "pending", None, None),
        digest(STATE_KINDS, res.id, res.status, res.resolved_at, res.resolution),
    )


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


def checkpoint_row(r: CheckpointRecord) -> tuple[object, ...]:
    values = (
        r.thread,
        r.seq,
        r.id,
        r.parent_id,
        r.step,
        r.base_seq,
        r.created_at,
        r.source,
        r.status,
        r.body,
    )
    return (*values, digest(CHECKPOINT_KINDS, *values))


def interrupt_row(r: InterruptRecord) -> tuple[object, ...]:
    return (
        r.id,
        r.thread,
        r.checkpoint_id,
        r.key,
        r.address,
        r.kind,
        r.status,
        r.created_at,
        r.deadline,
        r.body,
        r.resolved_at,
        r.resolution,
        r.tool,
        *interrupt_digests(r),
    )


def interrupt_digests(r: InterruptRecord) -> tuple[bytes, bytes]:
    """An interrupt row's digests: of its fixed columns, and of its state."""
    return (
        digest(
            INTERRUPT_KINDS,
            r.id,
            r.thread,
            r.checkpoint_id,
            r.key,
            r.address,
            r.kind,
            r.created_at,
            r.deadline,
            r.body,
            r.tool,
        ),
        digest(STATE_KINDS, r.id, r.status, r.resolved_at, r.resolution),
    )


def checkpoint_from_row(row: Any, *, thread: str, id: str | None = None) -> CheckpointRecord:
    """The checkpoint in ``row``, checked against its digest and against what was asked.

    Raises:
        CheckpointCorrupt: The row is damaged, or is not of ``thread`` (or not ``id``).
    """
    *values, stored = row
    asked = f"checkpoint {id} of thread {thread!r}" if id else f"a checkpoint of thread {thread!r}"
    try:
        found = digest(CHECKPOINT_KINDS, *values)
        r_thread, seq, r_id, parent_id, step, base_seq, created_at, source, status, body = values
    except (TypeError, ValueError, OverflowError, struct.error):
        raise _corrupt(f"{asked} has a column of the wrong type", thread, id) from None
    if stored is None or bytes(stored) != found:
        raise _corrupt(f"{asked} does not match its digest", thread, id or r_id)
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


def interrupt_from_row(
    row: Any, *, id: str | None = None, thread: str | None = None
) -> InterruptRecord:
    """The interrupt in ``row``, checked against its digests and against what was asked.

    Raises:
        CheckpointCorrupt: The row is damaged, or is not ``id`` (or not of ``thread``).
    """
    (
        r_id,
        r_thread,
        checkpoint_id,
        key,
        address,
        kind,
        status,
        created_at,
        deadline,
        body,
        resolved_at,
        resolution,
        tool,
        stored,
        stored_state,
    ) = row[:15]
    where = f"interrupt {id or r_id}"
    try:
        record = InterruptRecord(
            id=r_id,
            thread=r_thread,
            checkpoint_id=checkpoint_id,
            key=key,
            address=address,
            kind=kind,
            status=status,
            created_at=created_at,
            deadline=deadline,
            body=bytes(body),
            resolved_at=resolved_at,
            resolution=None if resolution is None else bytes(resolution),
            tool=tool,
        )
        found = interrupt_digests(record)
    except (TypeError, ValueError, OverflowError, struct.error):
        raise _corrupt(f"{where} has a column of the wrong type", thread) from None
    if (
        stored is None
        or stored_state is None
        or (bytes(stored), bytes(stored_state)) != found
        or status not in _STATUSES
    ):
        raise _corrupt(f"{where} of thread {r_thread!r} does not match its digest", thread)
    if (id is not None and r_id != id) or (thread is not None and r_thread != thread):
        raise _corrupt(f"reading {where} found interrupt {r_id} of {r_thread!r}", thread)
    return record


_STATUSES: Final = frozenset(("pending", "resolved", "expired", "cancelled"))


def pending_from_rows(
    rows: Sequence[Any],
    *,
    thread: str | None,
    key: str | None,
    tool: str | None,
    older_than: float | None,
    deadline_before: float | None,
) -> list[InterruptRecord]:
    """An inbox page from rows of INTERRUPT_COLUMNS plus the tiebreak, each one checked.

    Every row must be pending, match every filter and come after the one before it: an index
    that a damaged file mixed up cannot slip in a decided interrupt or another thread's.
    """
    out: list[InterruptRecord] = []
    last: tuple[float, int] | None = None
    for row in rows:
        record = interrupt_from_row(row, thread=thread)
        order = (record.created_at, row[15])
        if (
            record.status != "pending"
            or (key is not None and record.key != key)
            or (tool is not None and record.tool != tool)
            or (older_than is not None and not record.created_at < older_than)
            or (
                deadline_before is not None
                and not (record.deadline is not None and record.deadline < deadline_before)
            )
            or (last is not None and not last < order)
        ):
            raise _corrupt(
                f"the inbox index returned interrupt {record.id}, which does not belong there",
                record.thread,
            )
        last = order
        out.append(record)
    return out


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
    try:
        return AuditRecord(
            thread=str(thread),
            seq=int(seq),
            at=float(at),
            kind=str(kind),
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


def thread_from_row(row: Any, thread: str) -> ThreadRecord:
    """The head of ``thread`` from a row of THREAD_COLUMNS, checked against its digest.

    Raises:
        CheckpointCorrupt: The row is damaged or is another thread's.
    """
    r_thread, head_id, head_seq, status, updated_at, stored = row
    try:
        found = thread_digest(r_thread, head_id, head_seq, status, updated_at)
    except (TypeError, ValueError, OverflowError, struct.error):
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
    except (TypeError, ValueError, OverflowError, struct.error):
        found = b""
    if stored is None or bytes(stored) != found:
        raise _corrupt(f"the lease of thread {thread!r} does not match its digest", thread)
    return owner, int(token), float(expires)


def pending_filters(
    *,
    thread: str | None,
    key: str | None,
    after: str | None,
    deadline_before: float | None,
    mark: str,
    tiebreak: str,
    tool: str | None = None,
    older_than: float | None = None,
) -> tuple[list[str], list[object]]:
    """The WHERE conditions and parameters of an inbox query (``mark``: the placeholder)."""
    where = ["status = 'pending'"]
    params: list[object] = []
    if thread is not None:
        where.insert(0, f"thread = {mark}")
        params.append(thread)
    if key is not None:
        where.append(f"key = {mark}")
        params.append(key)
    if tool is not None:
        where.append(f"tool = {mark}")
        params.append(tool)
    if older_than is not None:
        where.append(f"created_at < {mark}")
        params.append(older_than)
    if deadline_before is not None:
        where.append(f"deadline IS NOT NULL AND deadline < {mark}")
        params.append(deadline_before)
    if after is not None:
        where.append(
            f"(created_at, {tiebreak}) > "
            f"(SELECT created_at, {tiebreak} FROM interrupts WHERE id = {mark})"
        )
        params.append(after)
    return where, params
