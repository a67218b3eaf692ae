"""Argument checks and error messages shared by the store backends.

Every backend must refuse the same calls with the same errors, so the decisions that do not
need the backend's data live here once.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._errors import ThreadBusy
from ._base import CheckpointRecord, InterruptRecord, Resolution

__all__ = ["check_append_args", "head_mismatch"]


def check_append_args(
    record: CheckpointRecord,
    new_interrupts: Sequence[InterruptRecord],
    resolutions: Sequence[Resolution],
) -> None:
    """Refuse an append whose arguments contradict each other, before touching any data.

    Raises:
        ValueError: A resolution moves an interrupt to ``pending``, or a new interrupt belongs
            to another thread or checkpoint than ``record``.
    """
    for res in resolutions:
        if res.status == "pending":
            raise ValueError(
                f"resolution of interrupt {res.id!r} has status 'pending'; a resolution moves an "
                "interrupt out of pending, so use 'resolved', 'expired' or 'cancelled'"
            )
    for new in new_interrupts:
        if new.thread != record.thread or new.checkpoint_id != record.id:
            raise ValueError(
                f"interrupt {new.id!r} names thread {new.thread!r} and checkpoint "
                f"{new.checkpoint_id!r} but is appended with checkpoint {record.id!r} of thread "
                f"{record.thread!r}; new interrupts belong to the checkpoint that records them"
            )


def head_mismatch(
    record: CheckpointRecord, expected_head: str | None, head: tuple[str, int] | None
) -> ThreadBusy | None:
    """Return the error for an append whose ``expected_head`` or ``seq`` does not fit the head.

    Args:
        record: The checkpoint being appended.
        expected_head: The head id the writer started from.
        head: The thread's current ``(head_id, head_seq)``, or None if it has no checkpoint.

    Returns:
        None when the append may proceed, else the `ThreadBusy` to raise.
    """
    thread = record.thread
    if head is None:
        if expected_head is not None:
            return ThreadBusy(thread, f"expected head {expected_head!r}, but the thread is empty")
        if record.seq != 1:
            return ThreadBusy(
                thread, f"seq {record.seq} given for the first checkpoint, expected 1"
            )
        return None
    head_id, head_seq = head
    if expected_head is None:
        return ThreadBusy(thread, f"expected a new thread, but its head is {head_id!r}")
    if head_id != expected_head:
        return ThreadBusy(thread, f"expected head {expected_head!r}, found {head_id!r}")
    if record.seq != head_seq + 1:
        return ThreadBusy(thread, f"seq {record.seq} does not follow head seq {head_seq}")
    return None
