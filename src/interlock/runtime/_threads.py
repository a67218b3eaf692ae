"""Reading and editing a thread's record: state, history, the inbox, edits and forks.

These are `App`'s methods that do not run the graph. They read checkpoints through the App's
`ThreadIO`, or commit one edit (`update_state`, `fork`) with the same compare-and-set and
lease as a run's commits.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import msgspec

from .._collector import collector_paused
from .._errors import (
    CheckpointNotFound,
    GraphDefinitionError,
    InterlockError,
    NotAuthorized,
    ThreadInterrupted,
)
from ..stores import AuditEntry, CheckpointRecord, PendingFilter, Resolution
from ._answers import child_plan
from ._authority import ADMIN, Principal
from ._calls import Calls, OnPending
from ._level import Level, new_id
from ._persist import cancellations, dropped_entry, fork_entry, ran_its_decisions
from ._reader import Question, Reader
from ._records import Interrupt, StateSnapshot
from ._resume import decided_unrun
from ._runctx import Opened, RunCtx
from ._signals import Raised
from ._wire import level_from_wire, level_to_wire

__all__ = ["fork", "get_state", "history", "inbox", "question", "update_state"]

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


async def question(calls: Calls[Any], reader: Reader, interrupt_id: str) -> Question | None:
    """`App.question`: the interrupt's row; for a pending one, its thread's latest level too.

    The level gives a quorum's approvals so far and, when the question was asked at the
    thread's head (the common case), the asking checkpoint's metadata without another read
    (a checkpoint never changes once written). It is held for the thread's next call
    (`Calls.hold`), which a decision usually is; that call's commit checks it is still the
    thread's latest.
    """
    row = await calls.store.get_interrupt(interrupt_id)
    if row is None:
        return None
    found = reader.of(row)
    if row.status == "pending":
        # A level this process holds (it ran the thread) serves unread, unless the question
        # is a quorum's, whose approvals so far others may have added: read those fresh.
        optimistic = found.interrupt.approvals < 2
        try:
            opened = await calls.open(row.thread, optimistic=optimistic)
        except InterlockError:
            opened = None  # a thread this App cannot load (another graph, damage): the row says
        if opened is not None and opened.head is not None and opened.level is not None:
            calls.hold(row.thread, opened)
            raised = next((r for r in opened.level.pending if r.id == row.id), None)
            if raised is not None and raised.interrupt.approved_by:
                shown = msgspec.structs.replace(
                    found.interrupt, approved_by=raised.interrupt.approved_by
                )
                found = msgspec.structs.replace(found, interrupt=shown)
            if opened.head.record.id == row.checkpoint_id:
                return msgspec.structs.replace(found, meta=dict(opened.head.meta))
    meta = await reader.checkpoint_meta(row.thread, row.checkpoint_id)
    return msgspec.structs.replace(found, meta=meta)


async def get_state(
    calls: Calls[StateT], thread: str, checkpoint_id: str | None
) -> StateSnapshot[StateT]:
    """The thread's state at its latest (or the given) checkpoint."""
    head = await calls.io.get(thread, checkpoint_id)
    warm = calls.warm_at(head)
    if warm is not None:
        # The level this App committed last is still the thread's latest: no rebuild from
        # the store's snapshot and deltas. It is the next call's to change, so it goes out
        # as a copy.
        held, level = warm
        return _snapshot(level, head.record, held.meta, clone=calls.io.codec.detach)
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
    """Edit a thread's state through the reducers; return the new checkpoint id.

    Without ``as_node`` the planned tasks and every pending interrupt stay. With it, the
    values are written as that node's and its successors are planned next; a static pause
    (a breakpoint, a planned external pause) is not a question and does not stand in the
    way: it stays where the thread still stops (`_replan`). Questions, decided answers whose
    tasks have not run, and pauses the new plan would restart or cut short are pending work,
    refused with `ThreadInterrupted` unless ``on_pending="cancel"``. ``"sub/inner"`` edits
    the state of subgraph ``sub``, paused inside, as its node ``inner`` (`_edit_inside`).
    """
    head = await calls.io.head(thread)
    if head is None:
        raise CheckpointNotFound(thread)
    level, known = await calls.io.load(thread, head)
    resolutions: list[Resolution] = []
    audit: list[AuditEntry] = []
    if as_node is None:
        level.apply_writes(("update", k, v) for k, v in level.updates_of("update", values))
    elif "/" in as_node:
        questions = [r.id for r in level.dynamic_pending()]
        decided = decided_unrun(level, pauses=False)
        if questions or decided:
            if on_pending == "cancel":
                raise GraphDefinitionError(
                    f"as_node={as_node!r} edits inside a subgraph, where on_pending='cancel' "
                    "cannot drop questions; answer them with app.resume(thread, ...) first, "
                    "or edit as a node of the top graph"
                )
            raise ThreadInterrupted(thread, [*questions, *decided], decided=list(decided))
        resolutions = cancellations(_edit_inside(level, as_node, values, where=as_node))
    else:
        if as_node not in calls.plan.nodes:
            raise GraphDefinitionError(f"as_node={as_node!r} is not a node of the graph")
        # The next tasks are replaced: decided ones would go unrun, as with new input.
        decided = {} if ran_its_decisions(head) else decided_unrun(level, pauses=False)
        blocking = [r.id for r in level.pending if not _held(level, r)]
        if blocking or decided:
            if on_pending != "cancel":
                raise ThreadInterrupted(thread, [*blocking, *decided], decided=list(decided))
            if decided:
                audit.append(dropped_entry(decided, head.record.id, actor))
        resolutions = cancellations(_replan(level, as_node, values))
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


def _held(level: Level, r: Raised) -> bool:
    """True for a pause an edit keeps: a breakpoint, or a pause between supersteps.

    A question is not one, nor a pause inside a subgraph's task (a new plan would start the
    subgraph over), nor any pause of a superstep some of whose tasks finished (a new plan
    would drop what they did).
    """
    if r.interrupt.needs_answer or level.results:
        return False
    return r.owner is None or r.task == r.owner


def _replan(level: Level, node: str, values: Any) -> list[str]:
    """Write ``values`` as ``node`` did and plan its successors; return the interrupts dropped.

    Invariant: a task that is planned again and has not started (no result, no scratch, no
    interrupt but its own breakpoint) keeps its id, so its breakpoint stays pending with the
    same id and a resume passes it once; every other task of the step is replaced, and the
    pending interrupts of tasks that are gone are dropped (the caller cancels them).
    """
    level.apply_writes((node, k, v) for k, v in level.updates_of(node, values))
    held = [r for r in level.pending if _held(level, r)]
    busy = {r.owner for r in level.pending if not _held(level, r)}
    fresh = [
        t
        for t in level.tasks
        if t.id not in level.results and t.id not in level.scratch and t.id not in busy
    ]
    level.results, level.scratch = {}, {}
    level.plan_after(node, keep=fresh)
    planned = {t.id for t in level.tasks}
    level.pending, old = [r for r in held if r.owner is None or r.owner in planned], level.pending
    kept = {r.id for r in level.pending}
    return [r.id for r in old if r.id not in kept]


def _edit_inside(level: Level, path: str, values: Any, *, where: str) -> list[str]:
    """Edit the level of the subgraph task ``path`` reaches into (``"sub/inner"``, nested as
    ``"sub/deeper/inner"``); return the interrupts the edit dropped, at every level.

    The subgraph's level is stored in its task's scratch while the task waits inside it: the
    edit decodes it, replans it as `_replan` does, and stores it back.
    """
    node, _, rest = path.partition("/")
    if node not in level.plan.nodes:
        raise GraphDefinitionError(
            f"as_node={where!r} names {node!r}, which is not a node of graph "
            f"{level.plan.name!r}; nodes: {sorted(level.plan.nodes)}"
        )
    inside = [
        t
        for t in level.tasks
        if t.node == node
        and (sc := level.scratch.get(t.id)) is not None
        and str(level.address_of(t)) in sc.children
    ]
    if len(inside) != 1:
        raise GraphDefinitionError(
            f"as_node={where!r} edits inside {node!r}, but "
            f"{'no task of it waits' if not inside else f'{len(inside)} tasks of it wait'} "
            f"inside a subgraph; an edit reaches into a subgraph only while one task of its "
            f"node is paused inside it: edit as a node of graph {level.plan.name!r} instead"
        )
    (task,) = inside
    scratch = level.scratch[task.id]
    address = level.address_of(task)
    wire = scratch.children[str(address)]
    child = level_from_wire(
        child_plan(level, node, wire), wire, thread=level.thread, lineage=level.lineage
    )
    child.base = address
    child.track_writes = True  # the subgraph hands the edited keys back when it finishes
    if "/" in rest:
        gone = _edit_inside(child, rest, values, where=where)
    else:
        if rest not in child.plan.nodes:
            raise GraphDefinitionError(
                f"as_node={where!r} names {rest!r}, which is not a node of subgraph "
                f"{node!r}; its nodes: {sorted(child.plan.nodes)}"
            )
        blocking = [r.id for r in child.pending if not _held(child, r)]
        if blocking:
            raise GraphDefinitionError(
                f"as_node={where!r}: subgraph {node!r} waits on interrupts an edit there "
                f"would drop ({', '.join(blocking)}); continue them with app.resume(thread) "
                "first, or edit as a node of the graph they wait in"
            )
        gone = _replan(child, rest, values)
    scratch.children[str(address)] = level_to_wire(child, full=True)
    # The level keeps its own copies of the interrupts raised below it, under the same ids.
    level.pending = [r for r in level.pending if r.id not in gone]
    return gone


async def fork(
    calls: Calls[Any],
    thread: str,
    checkpoint_id: str | None,
    new_thread: str,
    *,
    values: Mapping[str, Any] | None = None,
    as_node: str | None = None,
    actor: str | None = None,
    principal: Principal | None = None,
) -> str:
    """Copy a thread's state at a checkpoint into a new thread; return its checkpoint id.

    Everything that can refuse the fork is checked before anything is written: the
    principal's role, the edit against the state's schema, the node, the checkpoint, the new
    id. ``values`` replace their keys' values (a channel's `set`, not its reducer); with
    ``as_node`` the successors of that node are planned next (`_replan`, writing nothing),
    and the interrupts of tasks that are no longer planned are not copied.

    Two audit entries record it: first the branch's, with its first checkpoint; then the
    source's (`Store.append_audit`). A crash between the two leaves the branch knowing where
    it came from, and the source's log without the entry; a source deleted in between keeps
    its closed log as it is.
    """
    if principal is not None and not principal.has_role(ADMIN):
        raise NotAuthorized(
            f"{principal.name!r} may not fork thread {thread!r}: forking needs the "
            f"{ADMIN!r} role. Ask an admin to fork it, or to give {principal.name!r} that role",
            interrupt_id=None,
            rule="admin",
            principal=principal.key,
        )
    if actor is None and principal is not None:
        actor = principal.name
    edits = calls.plan.schema.convert_edit(values) if values is not None else {}
    if as_node is not None and as_node not in calls.plan.nodes:
        raise GraphDefinitionError(
            f"as_node={as_node!r} is not a node of graph {calls.plan.name!r}; "
            f"its nodes: {sorted(calls.plan.nodes)}"
        )
    source = await calls.io.get(thread, checkpoint_id)
    level, _ = await calls.io.load(thread, source)
    if await calls.io.head(new_thread) is not None:
        raise GraphDefinitionError(f"thread {new_thread!r} already exists; pick a new id")
    level.thread = new_thread
    calls.io.relineage(level, new_id())
    for key, value in edits.items():
        level.channels[key].set(value)
    if as_node is not None:
        _replan(level, as_node, {})
    origin = {"thread": thread, "checkpoint": source.record.id, "step": source.record.step}
    metadata: dict[str, Any] = {"forked_from": origin}
    if as_node is not None:
        metadata["as_node"] = as_node
    metadata["edited"] = list(edits)
    ctx = _edit_ctx(calls, new_thread, Opened(None, level, set()))
    branch = await ctx.commit(level, "fork", (), actor=actor, final=True, metadata=metadata)
    entry = fork_entry({**metadata, "actor": actor}, new_thread, branch)
    # A source deleted meanwhile has a closed log: the branch's entry says it all.
    with contextlib.suppress(CheckpointNotFound):
        await calls.store.append_audit(thread, [entry])
    return branch


def _edit_ctx(calls: Calls[Any], thread: str, opened: Opened) -> RunCtx:
    """The context of an edit's single commit (durable, releasing the lease it takes)."""
    return RunCtx(
        io=calls.io,
        thread=thread,
        opened=opened,
        lease=calls.lease,
        recursion_limit=calls.recursion_limit,
    )
