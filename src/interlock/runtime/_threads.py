"""Reading and editing a thread's record: state, history, the inbox, edits and forks.

These are `App`'s methods that do not run the graph. They read checkpoints through the App's
`ThreadIO`, or commit one edit (`update_state`, `fork`) with the same compare-and-set and
lease as a run's commits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from .._collector import collector_paused
from .._errors import CheckpointNotFound, GraphDefinitionError, ThreadInterrupted
from ..stores import AuditEntry, CheckpointRecord, PendingFilter, Resolution
from ._calls import Calls, OnPending
from ._level import Level, new_id
from ._persist import cancellations, dropped_entry
from ._records import Interrupt, StateSnapshot
from ._resume import decided_unrun
from ._runctx import Opened, RunCtx

__all__ = ["fork", "get_state", "history", "inbox", "update_state"]

StateT = TypeVar("StateT")


async def inbox(
    calls: Calls[Any], where: PendingFilter, *, limit: int, after: str | None
) -> list[Interrupt]:
    """Pending interrupts through the store's index, decoded for the rows returned only.

    A quorum interrupt's progress (`Interrupt.approved_by`) is read from its thread's latest
    checkpoint, one read per thread on the page that has one.
    """
    rows = await calls.store.pending(where, limit=limit, after=after)
    found = calls.io.interrupts_of(rows)
    quorum = dict.fromkeys(i.thread for i in found if i.approvals > 1)
    if not quorum:
        return found
    progress: dict[str, tuple[str, ...]] = {}
    for thread in quorum:
        progress.update(await calls.io.quorum_progress(thread))
    return [
        msgspec.structs.replace(i, approved_by=progress[i.id]) if i.id in progress else i
        for i in found
    ]


async def get_state(
    calls: Calls[StateT], thread: str, checkpoint_id: str | None
) -> StateSnapshot[StateT]:
    """The thread's state at its latest (or the given) checkpoint."""
    head = await calls.io.get(thread, checkpoint_id)
    level, kept = await calls.io.read(thread, head)
    # What the App keeps is handed out as copies; what it does not is the caller's own.
    return _snapshot(level, head.record, head.meta, clone=calls.io.codec.detach if kept else None)


async def history(
    calls: Calls[StateT], thread: str, *, limit: int, before: str | None
) -> list[StateSnapshot[StateT]]:
    """Up to ``limit`` snapshots older than checkpoint ``before``, newest first."""
    before_seq = None
    if before is not None:
        before_seq = (await calls.io.get(thread, before)).record.seq
    records = await calls.store.list_checkpoints(thread, before_seq=before_seq, limit=limit)
    if not records and before is None and await calls.store.get_thread(thread) is None:
        raise CheckpointNotFound(thread)
    loaded = await calls.io.load_many(thread, records)
    return [_snapshot(level, rec, meta) for (level, meta), rec in zip(loaded, records, strict=True)]


def _snapshot(
    level: Level,
    record: CheckpointRecord,
    meta: dict[str, Any],
    clone: Callable[[Any], Any] | None = None,
) -> StateSnapshot[StateT]:
    """The snapshot of ``level``; with ``clone``, its values share nothing with ``level``."""
    blocked = level.blocked()
    values = level.values()
    if clone is not None:
        with collector_paused():  # a long chat's copy is thousands of containers, no cycles
            values, meta = clone(values), clone(meta)
    return StateSnapshot(
        thread=record.thread,
        checkpoint_id=record.id,
        parent_id=record.parent_id,
        step=record.step,
        status=record.status,
        source=record.source,
        created_at=record.created_at,
        # The state and `values` hold the same values (as in `history`), one copy of them.
        state=level.plan.schema.view_of(values),
        values=values,
        next=tuple(t.node for t in level.tasks if t.id not in level.results or t.id in blocked),
        interrupts=[
            r.interrupt
            if clone is None
            else msgspec.structs.replace(
                r.interrupt, info=clone(r.interrupt.info), schema=clone(r.interrupt.schema)
            )
            for r in level.pending
        ],
        metadata=meta,
    )


async def update_state(
    calls: Calls[Any],
    thread: str,
    values: Any,
    *,
    as_node: str | None,
    on_pending: OnPending,
    actor: str | None,
) -> str:
    """Edit a thread's state through the reducers; return the new checkpoint id."""
    head = await calls.io.head(thread)
    if head is None:
        raise CheckpointNotFound(thread)
    level, known = await calls.io.load(thread, head)
    resolutions: list[Resolution] = []
    audit: list[AuditEntry] = []
    if as_node is not None:
        if as_node not in calls.plan.nodes:
            raise GraphDefinitionError(f"as_node={as_node!r} is not a node of the graph")
        # The next tasks are replaced: decided ones would go unrun, as with new input.
        decided = {} if head.record.status == "failed" else decided_unrun(level)
        if level.pending or decided:
            if on_pending != "cancel":
                ids = [*(r.id for r in level.pending), *decided]
                raise ThreadInterrupted(thread, ids, decided=list(decided))
            resolutions = cancellations(r.id for r in level.pending)
            level.pending = []
            if decided:
                audit.append(dropped_entry(decided, head.record.id, actor))
    writer = as_node or "update"
    level.apply_writes((writer, k, v) for k, v in level.updates_of(writer, values))
    if as_node is not None:
        level.results, level.scratch = {}, {}
        level.plan_after(as_node)
    ctx = _edit_ctx(calls, thread, Opened(head, level, known))
    return await ctx.commit(
        level,
        "update",
        resolutions,
        actor=actor,
        final=True,
        metadata={"as_node": as_node},
        audit=audit,
    )


async def fork(calls: Calls[Any], thread: str, checkpoint_id: str | None, new_thread: str) -> str:
    """Copy a thread's state at a checkpoint into a new thread; return its checkpoint id."""
    source = await calls.io.get(thread, checkpoint_id)
    level, _ = await calls.io.load(thread, source)
    if await calls.io.head(new_thread) is not None:
        raise GraphDefinitionError(f"thread {new_thread!r} already exists; pick a new id")
    level.thread = new_thread
    calls.io.relineage(level, new_id())
    ctx = _edit_ctx(calls, new_thread, Opened(None, level, set()))
    return await ctx.commit(level, "fork", (), final=True)


def _edit_ctx(calls: Calls[Any], thread: str, opened: Opened) -> RunCtx:
    """The context of an edit's single commit (durable, releasing the lease it takes)."""
    return RunCtx(
        io=calls.io,
        thread=thread,
        opened=opened,
        lease=calls.lease,
        recursion_limit=calls.recursion_limit,
    )
