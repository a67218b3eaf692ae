"""The storage protocol every backend implements, and the records it moves.

A store is deliberately dumb: it keeps opaque, already-encoded checkpoint bodies in per-thread
append order, a head pointer per thread, and an index of interrupts. It never decodes a body.
All semantics (delta encoding, what a checkpoint means) live in the runtime; all the store must
get right is atomicity and compare-and-set.

Invariants every backend keeps (checked by `interlock.testing.StoreConformance`):

* `append_checkpoint` is all-or-nothing: the checkpoint row, the new head, the new interrupt rows
  and the resolutions are written together or not at all.
* The head moves only by compare-and-set against ``expected_head``.
* An interrupt leaves ``pending`` at most once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

import msgspec

__all__ = [
    "CheckpointRecord",
    "CheckpointSource",
    "CheckpointStatus",
    "InterruptRecord",
    "InterruptStatus",
    "PauseKind",
    "Resolution",
    "Store",
    "ThreadRecord",
]

CheckpointSource = Literal["input", "loop", "resume", "update", "fork"]
"""Why a checkpoint was written."""

CheckpointStatus = Literal["ready", "interrupted", "paused", "done", "failed"]
"""What the thread looks like at this checkpoint.

``ready``: tasks are planned and nothing blocks them (a crashed run can be continued);
``interrupted``: at least one interrupt is pending; ``paused``: stopped by a static or external
pause with no answer needed; ``done``: no more tasks; ``failed``: a node raised.
"""

InterruptStatus = Literal["pending", "resolved", "expired", "cancelled"]

PauseKind = Literal["planned", "forced"]
"""A pause request: stop at the next step boundary, or also cancel running tasks."""


class CheckpointRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One committed checkpoint, as the store sees it."""

    thread: str
    """The thread it belongs to."""
    id: str
    """Unique id across the store (sortable within a thread)."""
    parent_id: str | None
    """The checkpoint this one follows; None for a thread's first."""
    seq: int
    """1-based position in the thread's append order; unique within the thread."""
    step: int
    """Superstep number of the run (-1 for the input checkpoint)."""
    base_seq: int
    """`seq` of the full snapshot this checkpoint's channel deltas build on (`seq` if it is one)."""
    created_at: float
    """Unix time of the commit."""
    source: CheckpointSource
    """Why it was written."""
    status: CheckpointStatus
    """The thread's status at this checkpoint."""
    body: bytes
    """The encoded checkpoint (deltas, tasks, interrupts...); opaque to the store."""


class InterruptRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One interrupt in the store's index (the inbox)."""

    id: str
    """Globally unique interrupt id."""
    thread: str
    """Thread that raised it."""
    checkpoint_id: str
    """Checkpoint that recorded it."""
    key: str | None
    """Optional user key."""
    address: str
    """Rendered address, e.g. ``node:review/tool:execute:call_1``."""
    kind: str
    """``dynamic``, ``before``, ``after``, ``external`` or ``reconcile``."""
    status: InterruptStatus
    """Lifecycle state."""
    created_at: float
    """Unix time it was raised."""
    deadline: float | None
    """Unix time after which it expires, if any."""
    body: bytes
    """The encoded `Interrupt` (info, schema...); opaque to the store."""
    resolved_at: float | None = None
    """When it left ``pending``."""
    resolution: bytes | None = None
    """Encoded outcome (the resume value or decision); opaque to the store."""


class Resolution(msgspec.Struct, frozen=True, kw_only=True):
    """A request to move one interrupt out of ``pending``, applied by compare-and-set."""

    id: str
    """The interrupt."""
    status: InterruptStatus
    """The new status (never ``pending``)."""
    resolved_at: float
    """Unix time of the decision."""
    resolution: bytes | None
    """Encoded outcome to record."""


class ThreadRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A thread's head pointer."""

    thread: str
    """Thread id."""
    head_id: str
    """Id of the latest checkpoint."""
    head_seq: int
    """`seq` of the latest checkpoint (also the number of checkpoints appended)."""
    status: CheckpointStatus
    """Status of the latest checkpoint."""
    updated_at: float
    """Unix time of the latest append (that checkpoint's ``created_at``)."""


@runtime_checkable
class Store(Protocol):
    """Durable home of checkpoints and interrupts. All methods are safe to call concurrently."""

    async def append_checkpoint(
        self,
        record: CheckpointRecord,
        *,
        expected_head: str | None,
        new_interrupts: Sequence[InterruptRecord] = (),
        resolutions: Sequence[Resolution] = (),
    ) -> None:
        """Commit a checkpoint, its new interrupts and resolutions in one transaction.

        Args:
            record: The checkpoint; ``record.seq`` must be the thread's head seq + 1.
            expected_head: The head id the writer started from (None for a new thread).
            new_interrupts: Interrupt rows to insert (status ``pending``), each with
                ``thread`` and ``checkpoint_id`` of ``record``.
            resolutions: Interrupts of ``record.thread`` to move out of ``pending``.

        The head is checked first, then the resolutions in order, then the new ids.

        Raises:
            ThreadBusy: The head is not ``expected_head`` (or the thread exists when None), or
                ``record.seq`` is not the head's seq + 1.
            InterruptAlreadyResolved: A resolution targets an interrupt that is not pending.
            UnknownInterrupt: A resolution targets an interrupt the thread does not have.
            StoreError: The checkpoint id or a new interrupt id is already in the store.
            StoreClosed: The store was closed.
            ValueError: A resolution's status is ``pending``, or a new interrupt belongs to
                another thread or checkpoint (checked before anything else).
        Nothing is written when any of these is raised.
        """
        ...

    async def get_checkpoint(self, thread: str, id: str | None = None) -> CheckpointRecord | None:
        """Return one checkpoint (the head when ``id`` is None), or None if absent."""
        ...

    async def checkpoint_range(self, thread: str, *, lo: int, hi: int) -> list[CheckpointRecord]:
        """Return the thread's checkpoints with ``lo <= seq <= hi``, ascending by seq."""
        ...

    async def list_checkpoints(
        self, thread: str, *, before_seq: int | None = None, limit: int = 50
    ) -> list[CheckpointRecord]:
        """Return up to ``limit`` checkpoints with ``seq < before_seq``, newest first."""
        ...

    async def get_thread(self, thread: str) -> ThreadRecord | None:
        """Return the thread's head record, or None if the thread does not exist."""
        ...

    async def get_interrupt(self, id: str) -> InterruptRecord | None:
        """Return one interrupt by id, or None."""
        ...

    async def pending(
        self,
        *,
        thread: str | None = None,
        key: str | None = None,
        limit: int = 100,
        after: str | None = None,
        deadline_before: float | None = None,
    ) -> list[InterruptRecord]:
        """Return pending interrupts, oldest first, through an index (cost grows with the result).

        Args:
            thread: Only this thread's.
            key: Only those with this key.
            limit: At most this many.
            after: The id of the last interrupt of the previous page: continue after it.
            deadline_before: Only those with a deadline before this Unix time.
        """
        ...

    async def request_pause(self, thread: str, *, forced: bool = False) -> bool:
        """Ask whoever runs ``thread`` to pause it; False if the thread does not exist.

        A forced request replaces a planned one, never the other way round. The request stays
        until an executor takes it.
        """
        ...

    async def take_pause_request(self, thread: str) -> PauseKind | None:
        """Return the thread's pause request and remove it (None if there is none)."""
        ...

    async def delete_thread(self, thread: str) -> None:
        """Delete a thread, its checkpoints, its interrupts and its pause request."""
        ...

    async def expire(self, *, older_than: float, limit: int = 1000) -> list[str]:
        """Delete up to ``limit`` finished threads (head status ``done``) last written before
        the Unix time ``older_than``, as `delete_thread` would; return their ids."""
        ...

    async def close(self) -> None:
        """Release resources. Idempotent. Later calls raise `StoreClosed`."""
        ...
