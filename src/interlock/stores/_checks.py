"""Argument checks and error messages shared by the store backends.

Every backend must refuse the same calls with the same errors, so the decisions that do not
need the backend's data live here once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from .._errors import FencedOut, StoreError, ThreadBusy
from ._base import (
    AUDIT_KINDS,
    CHECKPOINT_STATUSES,
    INTERRUPT_KINDS,
    INTERRUPT_STATUSES,
    PAUSE_KINDS,
    AuditEntry,
    CheckpointRecord,
    EffectRecord,
    Fence,
    InterruptRecord,
    PendingFilter,
    Resolution,
)

__all__ = [
    "FREE",
    "Lease",
    "check_append_args",
    "check_audit_append",
    "check_pause_kind",
    "check_pending_args",
    "check_renewal",
    "check_seqs",
    "check_text",
    "check_threads_args",
    "check_write",
    "finish_refused",
    "head_mismatch",
    "lease_after",
]


def check_text(name: str, value: object, *, optional: bool = False) -> None:
    """Refuse a string argument that no backend can store, before any driver sees it.

    Every backend must refuse the same strings: a lone surrogate cannot be encoded as UTF-8,
    so SQLite, PostgreSQL and the audit chain's hash would each fail in their own way.

    Args:
        name: The argument's name, for the message.
        value: The value given.
        optional: None is allowed.

    Raises:
        TypeError: ``value`` is not a str (or None when ``optional``).
        ValueError: ``value`` holds a lone surrogate.
    """
    if type(value) is str:
        if value.isascii():
            return
        try:
            value.encode()
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"{name} {value!r} holds a lone surrogate at position {exc.start}, which UTF-8 "
                "cannot encode; pass a valid Unicode string"
            ) from None
        return
    if value is None and optional:
        return
    if not isinstance(value, str):
        kind = "a str or None" if optional else "a str"
        raise TypeError(f"{name} must be {kind}, not {type(value).__name__} {value!r:.80}")
    check_text(name, str(value), optional=optional)  # a str subclass: check its text


_EVERYTHING: Final = PendingFilter()
_LEFT_PENDING: Final = INTERRUPT_STATUSES - {"pending"}


def check_seqs(seqs: object) -> list[int]:
    """The seqs of a `Store.checkpoints_at` call, sorted and without repeats.

    Raises:
        TypeError: ``seqs`` is not a list or tuple of ints (bools are not seqs).
    """
    if not isinstance(seqs, list | tuple) or not all(type(s) is int for s in seqs):
        raise TypeError(f"seqs must be a list or tuple of ints, got {seqs!r:.80}")
    return sorted(set(seqs))


def check_pending_args(where: PendingFilter | None, after: str | None) -> PendingFilter:
    """Refuse inbox filters no backend can match (see `check_text`); return the filter.

    Returns:
        ``where``, or a filter that matches everything when it is None.

    Raises:
        TypeError: ``where`` is not a `PendingFilter`, or a text filter is not a str.
        ValueError: A text filter holds a lone surrogate.
    """
    if where is None:
        where = _EVERYTHING
    elif not isinstance(where, PendingFilter):
        raise TypeError(
            f"the inbox filter must be a PendingFilter or None, not {type(where).__name__} "
            f"{where!r:.80}; pass e.g. pending(PendingFilter(thread=...))"
        )
    check_text("where.thread", where.thread, optional=True)
    check_text("where.key", where.key, optional=True)
    check_text("where.tool", where.tool, optional=True)
    check_text("after", after, optional=True)
    return where


def check_threads_args(status: object, after: object) -> None:
    """Refuse a thread listing's filter no backend can match.

    Raises:
        ValueError: ``status`` is not a `CheckpointStatus`, or ``after`` holds a lone surrogate.
        TypeError: ``after`` is not a str.
    """
    if status is not None and status not in CHECKPOINT_STATUSES:
        raise ValueError(
            f"status must be one of {sorted(CHECKPOINT_STATUSES)} or None, not {status!r:.80}"
        )
    check_text("after", after, optional=True)


def check_pause_kind(kind: object) -> None:
    """Refuse a pause request that is not a `PauseKind`.

    Raises:
        ValueError: ``kind`` is neither ``planned`` nor ``forced``.
    """
    if not (isinstance(kind, str) and kind in PAUSE_KINDS):
        raise ValueError(
            f"a pause request's kind must be one of {sorted(PAUSE_KINDS)}, not {kind!r:.80}"
        )


def check_write(fence: Fence | None, audit: Sequence[AuditEntry] = ()) -> None:
    """Refuse a lease owner, audit kind or audit actor no backend can store.

    Raises:
        TypeError: A text is not a str (see `check_text`).
        ValueError: An audit entry's kind is not an `AuditKind` (it could not be read back),
            or a text holds a lone surrogate.
    """
    if fence is not None:
        check_text("fence.owner", fence.owner)
    for entry in audit:
        if not (isinstance(entry.kind, str) and entry.kind in AUDIT_KINDS):
            raise ValueError(
                f"audit kind {entry.kind!r:.80} is not one of {sorted(AUDIT_KINDS)}; the audit "
                "log records only these"
            )
        check_text("audit actor", entry.actor, optional=True)


def check_audit_append(thread: str, entries: Sequence[AuditEntry]) -> None:
    """Refuse an `append_audit` call no backend can store, before anything is read.

    Raises:
        TypeError: ``thread`` is not a str, ``entries`` is not a list or tuple of
            `AuditEntry`, or an entry's ``data`` is not bytes.
        ValueError: ``entries`` is empty, an entry's kind is not an `AuditKind`, or a text
            holds a lone surrogate.
    """
    check_text("thread", thread)
    if not isinstance(entries, list | tuple):
        raise TypeError(
            f"entries must be a list or tuple of AuditEntry, not {type(entries).__name__}"
        )
    if not entries:
        raise ValueError("append_audit needs at least one entry; pass the entries to append")
    for i, entry in enumerate(entries):
        if not isinstance(entry, AuditEntry):
            raise TypeError(f"entries[{i}] must be an AuditEntry, not {type(entry).__name__}")
        if type(entry.data) is not bytes:
            raise TypeError(
                f"entries[{i}].data must be bytes (UTF-8 JSON), not {type(entry.data).__name__}"
            )
    check_write(None, entries)


def check_renewal(fence: Fence) -> None:
    """Refuse to renew a lease with a fence that holds none.

    Raises:
        ValueError: ``fence.token`` is None.
    """
    check_write(fence)
    if fence.token is None:
        raise ValueError("renew_lease needs the fencing token of a held lease")


def check_append_args(
    record: CheckpointRecord,
    new_interrupts: Sequence[InterruptRecord],
    resolutions: Sequence[Resolution],
    expected_head: str | None = None,
    audit: Sequence[AuditEntry] = (),
    fence: Fence | None = None,
) -> None:
    """Refuse an append whose arguments contradict each other, before touching any data.

    Raises:
        TypeError: A text field of a record is not a str.
        ValueError: A resolution moves an interrupt to ``pending`` or to no `InterruptStatus`,
            a new interrupt belongs to another thread or checkpoint than ``record`` or has a
            kind that is not an `InterruptKind`, an audit entry's kind is not an `AuditKind`,
            or a text holds a lone surrogate.
    """
    check_text("record.thread", record.thread)
    check_text("record.id", record.id)
    check_text("record.parent_id", record.parent_id, optional=True)
    check_text("expected_head", expected_head, optional=True)
    for res in resolutions:
        check_text("resolution id", res.id)
        if res.status == "pending":
            raise ValueError(
                f"resolution of interrupt {res.id!r} has status 'pending'; a resolution moves an "
                "interrupt out of pending, so use 'resolved', 'expired' or 'cancelled'"
            )
        if not (isinstance(res.status, str) and res.status in _LEFT_PENDING):
            raise ValueError(
                f"resolution of interrupt {res.id!r} has status {res.status!r:.80}, which is "
                "not an InterruptStatus; use 'resolved', 'expired' or 'cancelled'"
            )
    for new in new_interrupts:
        check_text("interrupt id", new.id)
        check_text("interrupt key", new.key, optional=True)
        check_text("interrupt address", new.address)
        check_text("interrupt tool", new.tool, optional=True)
        if not (isinstance(new.kind, str) and new.kind in INTERRUPT_KINDS):
            raise ValueError(
                f"interrupt {new.id!r} has kind {new.kind!r:.80}, which is not one of "
                f"{sorted(INTERRUPT_KINDS)}"
            )
        if new.thread != record.thread or new.checkpoint_id != record.id:
            raise ValueError(
                f"interrupt {new.id!r} names thread {new.thread!r} and checkpoint "
                f"{new.checkpoint_id!r} but is appended with checkpoint {record.id!r} of thread "
                f"{record.thread!r}; new interrupts belong to the checkpoint that records them"
            )
    check_write(fence, audit)


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


Lease = tuple[str | None, int, float]
"""A thread's lease as stored: ``(owner or None when free, fencing token, expires_at)``."""

FREE: Final[Lease] = (None, 0, 0.0)


def lease_after(thread: str, current: Lease | None, fence: Fence | None, now: float) -> Lease:
    """Check a write against the thread's lease; return the lease as the write leaves it.

    Args:
        thread: The thread (for error messages).
        current: Its stored lease (None: the thread has no row yet).
        fence: The write's `Fence`, or None for a write without a lease.
        now: The store's clock.

    Raises:
        ThreadBusy: Another executor's lease is live and the write does not hold it.
        FencedOut: The write holds a token that is no longer the thread's.
    """
    owner, token, expires = current or FREE
    live = owner is not None and expires > now
    if fence is None or fence.token is None:
        if live:
            raise ThreadBusy(thread, f"its lease runs {expires - now:.1f}s more", holder=owner)
        if fence is None:
            return owner, token, expires
        token += 1
    elif fence.token != token:
        raise FencedOut(thread, token=fence.token, current=token)
    if fence.release:
        return None, token, 0.0
    return fence.owner, token, now + fence.ttl


def finish_refused(
    thread: str, key: str, found: EffectRecord | None, result: bytes | None
) -> StoreError | None:
    """The error for finishing an effect that is not ``started`` (None: nothing to refuse).

    Finishing it again with the result it was finished with is a retry, not an error.
    """
    if found is None:
        return StoreError(f"effect {key!r} of thread {thread!r} is unknown; begin it first")
    if found.status == "done" and result is not None and found.result == result:
        return None
    return StoreError(
        f"effect {key!r} of thread {thread!r} is {found.status}, not started; begin it first"
    )
