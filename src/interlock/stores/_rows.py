"""Records to table rows and back, shared by the SQL backends (same columns, same order)."""

from __future__ import annotations

from typing import Any, Final

from ._base import AuditRecord, CheckpointRecord, EffectRecord, InterruptRecord, ThreadRecord

__all__ = [
    "AUDIT_COLUMNS",
    "CHECKPOINT_COLUMNS",
    "EFFECT_COLUMNS",
    "INTERRUPT_COLUMNS",
    "audit_from_row",
    "audit_row",
    "checkpoint_from_row",
    "checkpoint_row",
    "effect_from_row",
    "interrupt_from_row",
    "interrupt_row",
    "pending_filters",
    "thread_from_row",
]

CHECKPOINT_COLUMNS: Final = (
    "thread, seq, id, parent_id, step, base_seq, created_at, source, status, body"
)
INTERRUPT_COLUMNS: Final = (
    "id, thread, checkpoint_id, key, address, kind, status, created_at, deadline, body, "
    "resolved_at, resolution, tool"
)
EFFECT_COLUMNS: Final = "thread, key, name, status, attempt, started_at, finished_at, result"
AUDIT_COLUMNS: Final = "thread, seq, at, kind, actor, data, prev, hash"


# Records to rows and back; the column order is CHECKPOINT_COLUMNS / INTERRUPT_COLUMNS.


def checkpoint_row(r: CheckpointRecord) -> tuple[object, ...]:
    return (
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
    )


def checkpoint_from_row(row: Any) -> CheckpointRecord:
    thread, seq, id, parent_id, step, base_seq, created_at, source, status, body = row
    return CheckpointRecord(
        thread=thread,
        id=id,
        parent_id=parent_id,
        seq=seq,
        step=step,
        base_seq=base_seq,
        created_at=created_at,
        source=source,
        status=status,
        body=bytes(body),
    )


def interrupt_from_row(row: Any) -> InterruptRecord:
    (
        id,
        thread,
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
    ) = row
    return InterruptRecord(
        id=id,
        thread=thread,
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


def _blob(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode()
    return b"" if value is None else bytes(value)


def thread_from_row(row: Any) -> ThreadRecord:
    thread, head_id, head_seq, status, updated_at = row
    return ThreadRecord(
        thread=thread, head_id=head_id, head_seq=head_seq, status=status, updated_at=updated_at
    )


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
