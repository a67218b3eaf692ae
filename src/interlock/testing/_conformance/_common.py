"""What the groups of `StoreConformance` share: record builders, helpers and the base class."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import anyio
import pytest

from ...stores._base import (
    AuditEntry,
    AuditKind,
    CheckpointRecord,
    CheckpointStatus,
    Fence,
    InterruptRecord,
    InterruptStatus,
    Resolution,
    Store,
)
from .._clock import FakeClock

__all__ = [
    "EVERYTHING",
    "T0",
    "ConformanceGroup",
    "grow",
    "make_checkpoint",
    "make_entry",
    "make_fence",
    "make_interrupt",
    "outlive",
    "resolve",
    "snapshot",
]

T0: Final = 1_700_000_000.25
"""The ``created_at`` of seq 0: checkpoints of the builders are one second apart from it."""
EVERYTHING: Final = 10**6
"""A limit no test reaches."""


class ConformanceGroup:
    """The base of every group: the anyio mark, and the ``clock`` fixture stores are built with.

    The ``clock`` fixture is a `FakeClock`. A ``store`` fixture that passes it on
    (``MyStore(clock=clock)``) lets the lease tests move time instead of waiting for it.
    """

    pytestmark = pytest.mark.anyio

    @pytest.fixture
    def clock(self) -> FakeClock:
        """A fresh clock for the store under test."""
        return FakeClock()


async def outlive(clock: FakeClock, seconds: float) -> None:
    """Let ``seconds`` pass on the store's clock."""
    if clock.reads:
        clock.advance(seconds)
    else:
        # The store keeps its own time (its fixture did not give it the ``clock`` fixture):
        # only waiting for real lets its leases run out.
        await anyio.sleep(seconds)


def make_checkpoint(
    thread: str,
    seq: int,
    *,
    id: str | None = None,
    parent_id: str | None = None,
    status: CheckpointStatus = "ready",
    body: bytes | None = None,
) -> CheckpointRecord:
    """Checkpoint ``seq`` of ``thread``, with an id, parent and body derived from them."""
    return CheckpointRecord(
        thread=thread,
        id=id or f"{thread}.{seq:04d}",
        parent_id=parent_id or (f"{thread}.{seq - 1:04d}" if seq > 1 else None),
        seq=seq,
        step=seq - 2,
        base_seq=seq - (seq - 1) % 4,
        created_at=T0 + seq,
        source="input" if seq == 1 else "loop",
        status=status,
        body=f"body of {thread} #{seq}".encode() if body is None else body,
    )


def make_interrupt(
    id: str,
    at: CheckpointRecord,
    *,
    key: str | None = None,
    created_at: float | None = None,
    deadline: float | None = None,
) -> InterruptRecord:
    """A pending interrupt raised by checkpoint ``at``."""
    return InterruptRecord(
        id=id,
        thread=at.thread,
        checkpoint_id=at.id,
        key=key,
        address=f"node:review/tool:{id}",
        kind="dynamic",
        status="pending",
        created_at=at.created_at if created_at is None else created_at,
        deadline=deadline,
        body=f"interrupt {id}".encode(),
    )


def make_fence(owner: str, token: int | None, *, ttl: float = 60.0, release: bool = False) -> Fence:
    """A write's `Fence`."""
    return Fence(owner=owner, token=token, ttl=ttl, release=release)


def make_entry(kind: AuditKind, n: int) -> AuditEntry:
    """Audit entry number ``n``: its actor and data name ``n``."""
    return AuditEntry(kind=kind, actor=f"actor{n}", data=f'{{"n": {n}}}'.encode())


def resolve(
    id: str, status: InterruptStatus = "resolved", value: bytes | None = b"ok"
) -> Resolution:
    """A resolution of interrupt ``id``."""
    return Resolution(id=id, status=status, resolved_at=T0 + 10_000, resolution=value)


async def grow(
    store: Store, thread: str, n: int, *, interrupts: Sequence[str] = ()
) -> list[CheckpointRecord]:
    """Append ``n`` checkpoints to the thread; the first of them raises ``interrupts``."""
    head = await store.get_thread(thread)
    seq, expected = (0, None) if head is None else (head.head_seq, head.head_id)
    written: list[CheckpointRecord] = []
    for _ in range(n):
        seq += 1
        record = make_checkpoint(thread, seq, parent_id=expected)
        new = [make_interrupt(i, record) for i in interrupts] if not written else []
        await store.append_checkpoint(record, expected_head=expected, new_interrupts=new)
        written.append(record)
        expected = record.id
    return written


async def snapshot(store: Store, threads: Sequence[str], interrupts: Sequence[str]) -> object:
    """Everything the store says about these threads and interrupts."""
    return (
        [await store.get_thread(t) for t in threads],
        [await store.checkpoint_range(t, lo=1, hi=EVERYTHING) for t in threads],
        [await store.get_interrupt(i) for i in interrupts],
        await store.pending(limit=EVERYTHING),
    )
