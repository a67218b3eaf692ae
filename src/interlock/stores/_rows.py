"""Records to table rows and back, shared by the SQL backends (same columns, same order)."""

from __future__ import annotations

from typing import Any, Final

from ._base import CheckpointRecord, InterruptRecord, ThreadRecord

__all__ = [
    "CHECKPOINT_COLUMNS",
    "INTERRUPT_COLUMNS",
    "checkpoint_from_row",
    "checkpoint_row",
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
    "resolved_at, resolution"
)


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
    )


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
