"""The superstep engine: one `Level` per graph level (the top graph or a running subgraph).

A level holds the live state of one graph: its channels, the tasks of the current superstep,
the results of tasks that finished in it, the scratch of tasks that wait on an interrupt, and
the pending interrupts. `Level.run` advances it until it finishes or must stop; saving it is
the caller's job (the `App` writes checkpoints for the top level; a subgraph level is stored
inside its parent task's scratch).

Invariant: between supersteps, ``results`` and ``scratch`` are empty; inside an interrupted
superstep every task is exactly one of finished (in ``results``), blocked (owner of a pending
interrupt) or runnable.
"""

from __future__ import annotations

import inspect
import itertools
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import anyio

from .._errors import (
    GraphDefinitionError,
    InterlockError,
    InvalidUpdate,
    NodeError,
    RecursionLimit,
    StoreError,
    ThreadBusy,
)
from ..graph._builder import END, START, CompiledGraph
from ..graph._channels import MISSING, AppendChannel, Channel
from ._concat import concat
from ._context import Scratch, TaskContext, enter_task, interrupt_id
from ._control import RunControl
from ._effects import node_effect
from ._events import ChunkEvent, NodeOutputEvent, StepEvent, StepFinishedEvent
from ._records import Address, Command, Interrupt, Segment, Send
from ._signals import InterruptSignal, Raised

__all__ = ["ESCALATE", "Level", "TaskResult", "TaskState", "new_id"]

StepHook = Callable[["Level"], Awaitable[None]]


_ID_PREFIX = secrets.token_hex(6)
_ID_COUNTER = itertools.count()


def _new_id_prefix() -> None:
    """Draw a new id prefix: a forked child must not make its parent's ids."""
    global _ID_PREFIX
    _ID_PREFIX = secrets.token_hex(6)


os.register_at_fork(after_in_child=_new_id_prefix)


class _Escalate:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ESCALATE"


ESCALATE: Final = _Escalate()
"""An "answer" that asks the question again as a new interrupt (deadline ``escalate``)."""


def _store_failure(error: BaseException | None) -> InterlockError | None:
    """The store or lease error a task failed with, also from inside an exception group.

    Such an error comes from the run's own records (an effect's ``started``/``done``), not
    from the node's logic: whether the record was written is unknown, so the thread must not be
    marked failed; it stays at its last checkpoint and a resume sorts the effect out.
    """
    if isinstance(error, StoreError | ThreadBusy):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = _store_failure(inner)
            if found is not None:
                return found
    return None


def new_id() -> str:
    """Return a fresh unique id (tasks, checkpoints, lineages).

    A random per-process prefix and a counter: unique across processes and machines with
    overwhelming probability, and much cheaper than asking the OS for randomness per id.
    """
    return f"{_ID_PREFIX}{next(_ID_COUNTER):x}"


@dataclass(slots=True)
class TaskState:
    """A task of the current superstep: a node to run, and its input if it came from a `Send`."""

    id: str
    node: str
    sub: str = ""
    arg: Any = MISSING
    passed_before: bool = False


@dataclass(slots=True)
class TaskResult:
    """What a finished task produced: state writes and extra successors."""

    writes: list[tuple[str, Any]] = field(default_factory=list)
    goto: list[str | Send] = field(default_factory=list)


@dataclass(slots=True)
class _Outcome:
    task: TaskState
    cancelled: bool = False
    result: TaskResult | None = None
    signal: InterruptSignal | None = None
    error: BaseException | None = None
    scratch: Scratch | None = None


class Level:
    """The live state of one graph level; see the module docstring."""

    __slots__ = (
        "_addresses",
        "_base",
        "after",
        "before",
        "channels",
        "control",
        "dropped",
        "effects",
        "emit",
        "lineage",
        "origin",
        "pending",
        "plan",
        "results",
        "run_after",
        "run_before",
        "scratch",
        "step",
        "steps_taken",
        "tasks",
        "thread",
        "track_writes",
        "written",
    )

    def __init__(self, plan: CompiledGraph, *, thread: str, lineage: str, base: Address) -> None:
        self.plan = plan
        self.thread = thread
        self.lineage = lineage
        self._base = base
        self._addresses: dict[tuple[str, str], Address] = {}
        self.channels: dict[str, Channel] = plan.schema.new_channels()
        self.tasks: list[TaskState] = []
        self.results: dict[str, TaskResult] = {}
        self.scratch: dict[str, Scratch] = {}
        self.pending: list[Raised] = []
        self.dropped: list[str] = []
        """Pending interrupts that vanished because their task re-ran without raising them."""
        self.step = 0
        self.steps_taken = 0
        self.written: set[str] = set()
        """Keys written since the level started (subgraphs hand these back to the parent)."""
        self.track_writes = False
        self.origin: dict[str, int] = {}
        """Append-key lengths right after the input (a subgraph returns only what it added)."""
        self.emit: Callable[[Any], None] | None = None
        self.control: RunControl | None = None
        """Set while a run handle can pause this level from outside."""
        self.effects: Any = None
        """The run's `EffectIO` (records dangerous calls); set by the App."""
        self.run_before: tuple[str, ...] = ()
        self.run_after: tuple[str, ...] = ()
        self.before = plan.interrupt_before
        self.after = plan.interrupt_after

    @property
    def base(self) -> Address:
        """The address of the task that runs this level (empty at the top)."""
        return self._base

    @base.setter
    def base(self, value: Address) -> None:
        self._base = value
        self._addresses = {}

    # -- options -------------------------------------------------------------------------

    def set_run_breakpoints(self, before: Sequence[str], after: Sequence[str]) -> None:
        """Add per-run breakpoints; ``"sub/inner"`` names reach into subgraph ``sub``."""
        self.run_before, self.run_after = tuple(before), tuple(after)
        self.before = self.plan.interrupt_before | self._local(before, "interrupt_before")
        self.after = self.plan.interrupt_after | self._local(after, "interrupt_after")

    def _local(self, names: Sequence[str], what: str) -> frozenset[str]:
        if "*" in names:
            return frozenset(self.plan.nodes)
        local = frozenset(n for n in names if "/" not in n)
        unknown = local - set(self.plan.nodes)
        if unknown:
            raise GraphDefinitionError(f"{what} names unknown nodes {sorted(unknown)}")
        return local

    def child_breakpoints(self, node: str) -> tuple[list[str], list[str]]:
        """Per-run breakpoints that reach into subgraph ``node``."""
        prefix = node + "/"
        return (
            [n[len(prefix) :] for n in self.run_before if n.startswith(prefix)],
            [n[len(prefix) :] for n in self.run_after if n.startswith(prefix)],
        )

    # -- state ----------------------------------------------------------------------------

    def view(self) -> Any:
        """The state as nodes receive it."""
        return self.plan.schema.view(self.channels)

    def values(self) -> dict[str, Any]:
        """The state as a plain dict (only keys that have a value), safe to keep.

        Append lists are copied (shallowly): the live ones keep growing on later runs.
        """
        return {
            k: list(c.value) if isinstance(c, AppendChannel) else c.value
            for k, c in self.channels.items()
            if c.value is not MISSING
        }

    def detached_view(self) -> Any:
        """The state as the schema's type, built from `values` (safe to keep)."""
        return self.plan.schema.view_of(self.values())

    def apply_writes(self, writes: Iterable[tuple[str, str, Any]]) -> None:
        """Apply ``(writer, key, value)`` writes through the reducers, grouped per key."""
        grouped: dict[str, list[tuple[str, Any]]] = {}
        for writer, key, value in writes:
            if key not in self.channels:
                raise InvalidUpdate(
                    f"{writer!r} wrote unknown state key {key!r}; "
                    f"the state has {sorted(self.channels)}"
                )
            grouped.setdefault(key, []).append((writer, value))
        for key, ws in grouped.items():
            self.channels[key].update(ws)
        if self.track_writes:
            self.written.update(grouped)

    def updates_of(self, writer: str, update: Any) -> list[tuple[str, Any]]:
        """Normalise a node's return value's update part into ``[(key, value)]``."""
        values = update if type(update) is dict else self.plan.schema.values_of(update)
        if not self.plan.schema.names.issuperset(values):
            unknown = [k for k in values if k not in self.channels]
            raise InvalidUpdate(
                f"node {writer!r} returned unknown state keys {unknown}; "
                f"the state has {sorted(self.channels)}"
            )
        return list(values.items())

    # -- planning --------------------------------------------------------------------------

    def start(self, input_values: Mapping[str, Any]) -> None:
        """Apply the input and plan the first superstep (drops any leftover tasks)."""
        self.tasks, self.results, self.scratch, self.pending = [], {}, {}, []
        self.apply_writes(("input", k, v) for k, v in input_values.items())
        self.tasks = self._plan_next([(START, [])])

    def plan_after(self, node: str, goto: Sequence[str | Send] = ()) -> None:
        """Replace the next tasks by the successors of ``node`` (``update_state(as_node=)``)."""
        self.tasks = self._plan_next([(node, list(goto))])

    def add_goto(self, goto: Sequence[str | Send]) -> None:
        """Schedule extra tasks in the current superstep (``Command(goto=)`` on resume)."""
        extra = self._plan_next([("", list(goto))])
        self.tasks.extend(extra)

    def _plan_next(self, finished: Sequence[tuple[str, Sequence[str | Send]]]) -> list[TaskState]:
        names: dict[str, None] = {}
        sends: list[Send] = []
        view: Any = MISSING
        seen_nodes: set[str] = set()
        for node, goto in finished:
            targets: list[Any] = list(goto)
            if node not in seen_nodes:
                seen_nodes.add(node)
                targets.extend(self.plan.edges.get(node, ()))
                for branch in self.plan.branches.get(node, ()):
                    if view is MISSING:
                        view = self.view()
                    picked = branch.route(view)
                    for p in picked if isinstance(picked, list | tuple) else [picked]:
                        if branch.path_map is not None and not isinstance(p, Send):
                            if p not in branch.path_map:
                                raise InvalidUpdate(
                                    f"route from {node!r} returned {p!r}, which is not in its "
                                    f"path map {list(branch.path_map)}"
                                )
                            p = branch.path_map[p]
                        targets.append(p)
            for t in targets:
                if isinstance(t, Send):
                    self._check_node(t.node, node)
                    sends.append(t)
                elif t != END and t is not None:
                    self._check_node(t, node)
                    names[t] = None
        tasks = [TaskState(new_id(), n) for n in names]
        tasks.extend(TaskState(new_id(), s.node, str(i), s.arg) for i, s in enumerate(sends))
        order = self.plan.order
        tasks.sort(key=lambda t: order[t.node])  # stable: Sends keep their order
        return tasks

    def _check_node(self, name: Any, source: str) -> None:
        if not isinstance(name, str) or name not in self.plan.nodes:
            raise InvalidUpdate(
                f"{source or 'a command'!r} routed to {name!r}, which is not a node of graph "
                f"{self.plan.name!r}; nodes: {sorted(self.plan.nodes)}"
            )

    # -- interrupts --------------------------------------------------------------------------

    def blocked(self) -> set[str]:
        """Ids of tasks that wait on a pending interrupt and got no new answer."""
        waiting = {r.owner for r in self.pending if r.owner is not None}
        return {t for t in waiting if not (t in self.scratch and self.scratch[t].has_targeted())}

    def dynamic_pending(self) -> list[Raised]:
        """Pending interrupts that need an answer (not static or external pauses)."""
        return [r for r in self.pending if r.interrupt.kind in ("dynamic", "reconcile")]

    def status(self) -> str:
        """``interrupted``, ``paused``, ``ready`` or ``done``."""
        if self.pending:
            return "interrupted" if self.dynamic_pending() else "paused"
        return "ready" if self.tasks else "done"

    def answer(self, answers: Mapping[str, Any]) -> None:
        """Deliver answers (interrupt id → value) to the tasks that wait on them.

        Answers for interrupts inside a subgraph are delivered into its stored level.
        """
        keep: list[Raised] = []
        for r in self.pending:
            if r.id not in answers:
                keep.append(r)
                continue
            if r.owner is None:  # a pause between supersteps: nothing to deliver
                continue
            task = next(t for t in self.tasks if t.id == r.owner)
            if r.task == r.owner:
                if r.interrupt.kind == "before":
                    task.passed_before = True
                else:
                    sc = self.scratch.setdefault(r.owner, Scratch())
                    if answers[r.id] is ESCALATE:
                        sc.escalated.append(r.local)
                    else:
                        sc.answers[r.local] = answers[r.id]
                    sc.targeted.append(r.local)
            else:
                self._answer_child(r, answers)
        self.pending = keep

    def _answer_child(self, r: Raised, answers: Mapping[str, Any]) -> None:
        assert r.owner is not None
        sc = self.scratch.setdefault(r.owner, Scratch())
        where = str(r.interrupt.address)
        for addr, wire in sc.children.items():
            if where == addr or where.startswith(addr + "/"):
                from ._wire import level_from_wire, level_to_wire

                task = next(t for t in self.tasks if t.id == r.owner)
                child_plan = self.plan.nodes[task.node].subgraph
                assert child_plan is not None
                child = level_from_wire(
                    child_plan.plan, wire, thread=self.thread, lineage=self.lineage
                )
                child.answer({r.id: answers[r.id]})
                sc.children[addr] = level_to_wire(child, full=True)
                sc.targeted.append(f"{where}\x1f")
                return
        raise GraphDefinitionError(f"no stored subgraph holds interrupt {r.id} at {where}")

    def _pause(self, kind: str, task: TaskState | None, info: Any) -> Raised:
        node = task.node if task else ""
        seg_kind = "node"
        if task is not None and self.plan.nodes[task.node].subgraph is not None:
            seg_kind = "subgraph"
        address = self.base.child(Segment(seg_kind, node, task.sub)) if task else self.base  # type: ignore[arg-type]
        local = f"{kind}#{self.step}"
        tid = task.id if task else f"step{self.step}"
        record = Interrupt(
            id=interrupt_id(self.lineage, tid, local),
            thread=self.thread,
            key=None,
            address=address,
            kind=kind,  # type: ignore[arg-type]
            info=info,
            created_at=time.time(),
        )
        return Raised(record, task=tid, local=local, owner=task.id if task else None)

    # -- running ---------------------------------------------------------------------------

    async def run(self, *, on_step: StepHook | None, limit: int) -> str:
        """Advance until done or stopped; return `status()`.

        ``on_step`` is awaited after each completed superstep that leaves work to do (the App
        commits a checkpoint there).
        """
        ran: list[TaskState] = []  # the tasks of the last superstep this call completed
        while True:
            if not self.tasks:
                return "done" if not self.pending else self.status()
            if self.pending or self.results:
                blocked = self.blocked()
                runnable = [
                    t for t in self.tasks if t.id not in self.results and t.id not in blocked
                ]
            else:
                runnable = self.tasks
            hold = (
                [t for t in runnable if t.node in self.before and not t.passed_before]
                if self.before
                else None
            )
            if hold:
                for t in hold:
                    self.pending.append(
                        self._pause("before", t, {"node": t.node, "when": "before"})
                    )
                return self.status()
            if not runnable:
                return self.status()
            if self.control is not None and await self.control.check():
                self.pending.append(self._external_pause(ran=ran, upcoming=runnable))
                return self.status()
            if self.steps_taken >= limit:
                raise RecursionLimit(limit)
            if self.emit is not None:
                self.emit(StepEvent(step=self.step, nodes=tuple(t.node for t in runnable)))
            outcomes, cancelled = await self._execute(runnable)
            # A store or lease error inside a task (recording an effect) is not the node's
            # failure: the run stops with it and the thread stays at its last checkpoint.
            failed = next((o for o in outcomes if o.error is not None), None)
            if failed is not None:
                failed = next((o for o in outcomes if _store_failure(o.error)), failed)
            for o in outcomes:
                self._record(o)
            if cancelled:
                rerun = [o.task for o in outcomes if o.cancelled]
                self.pending.append(self._external_pause(upcoming=rerun, forced=True))
                return self.status()
            if failed is not None:
                assert failed.error is not None
                store_failure = _store_failure(failed.error)
                if store_failure is not None:
                    raise store_failure
                if isinstance(failed.error, NodeError | InvalidUpdate | RecursionLimit):
                    raise failed.error
                raise NodeError(failed.task.node, self.thread, failed.error) from failed.error
            if self.pending or len(self.results) < len(self.tasks):
                return self.status()
            finished = self.tasks
            ran = finished
            self._finish_step()
            self.steps_taken += 1
            if self.emit is not None:
                nxt = tuple(t.node for t in self.tasks)
                self.emit(StepFinishedEvent(step=self.step - 1, next=nxt))
            paused_after = self.after and [t.node for t in finished if t.node in self.after]
            if paused_after:
                info = {"nodes": sorted(set(paused_after)), "when": "after"}
                self.pending.append(self._pause("after", None, info))
                return self.status()
            if not self.tasks:
                return "done"
            if on_step is not None:
                await on_step(self)

    def _external_pause(
        self, *, upcoming: list[TaskState], ran: Sequence[TaskState] = (), forced: bool = False
    ) -> Raised:
        """The external pause's record; its info is the report of decision 15.

        ``finished``: the tasks that finished in the superstep that was running when the pause
        came (a planned pause lets the whole step finish, so that is ``ran``, the step this
        call completed last; a forced one keeps the siblings that finished before it).
        ``rerun``: tasks a forced pause cancelled; they run again from their saved inputs.
        ``next``: the tasks that run on resume. ``waiting``: tasks that wait on interrupts.
        """
        waiting = self.blocked()
        finished = [*ran, *(t for t in self.tasks if t.id in self.results)]
        info = {
            "when": "forced" if forced else "planned",
            "finished": [t.node for t in finished],
            "rerun": [t.node for t in upcoming] if forced else [],
            "next": [t.node for t in upcoming],
            "waiting": [t.node for t in self.tasks if t.id in waiting],
        }
        return self._pause("external", None, info)

    def _record(self, o: _Outcome) -> None:
        tid = o.task.id
        if o.cancelled:
            return  # it re-runs from its saved input; its scratch stays as it was
        if o.error is None:
            # The task ran: whatever it still waits on, it raised again just now. Interrupts it
            # no longer raises are gone (the App cancels them on the record).
            before = [r for r in self.pending if r.owner == tid]
            if before:
                self.pending = [r for r in self.pending if r.owner != tid]
                again = {r.id for r in o.signal.raised} if o.signal is not None else set()
                self.dropped.extend(r.id for r in before if r.id not in again)
        if o.result is not None:
            self.results[tid] = o.result
            if self.emit is not None:
                self.emit(
                    NodeOutputEvent(step=self.step, node=o.task.node, update=dict(o.result.writes))
                )
            self.scratch.pop(tid, None)
        elif o.signal is not None:
            assert o.scratch is not None
            self.scratch[tid] = o.scratch
            for r in o.signal.raised:
                self.pending.append(
                    Raised(
                        r.interrupt,
                        validator=r.validator,
                        has_default=r.has_default,
                        on_timeout=r.on_timeout,
                        task=r.task,
                        local=r.local,
                        owner=tid,
                    )
                )
        elif o.scratch is not None:
            self.scratch[tid] = o.scratch

    def _finish_step(self) -> None:
        writes: list[tuple[str, str, Any]] = []
        finished: list[tuple[str, Sequence[str | Send]]] = []
        for t in self.tasks:
            res = self.results[t.id]
            writes.extend((t.node, k, v) for k, v in res.writes)
            finished.append((t.node, res.goto))
        self.apply_writes(writes)
        self.tasks = self._plan_next(finished)
        self.results = {}
        self.scratch = {}
        self.step += 1

    async def _execute(self, runnable: list[TaskState]) -> tuple[list[_Outcome], bool]:
        """Run one superstep's tasks; also say whether a forced pause cancelled some."""
        control = self.control
        if control is None and len(runnable) == 1:
            return [await self._run_task(runnable[0])], False
        outcomes: list[_Outcome] = [_Outcome(t, cancelled=True) for t in runnable]

        async def one(i: int) -> None:
            outcomes[i] = await self._run_task(runnable[i])

        with anyio.CancelScope() as scope:
            if control is not None:
                control.watch(scope)
            try:
                async with anyio.create_task_group() as tg:
                    for i in range(len(runnable)):
                        tg.start_soon(one, i)
            finally:
                if control is not None:
                    control.unwatch(scope)
        return outcomes, scope.cancelled_caught

    async def _run_task(self, task: TaskState) -> _Outcome:
        spec = self.plan.nodes[task.node]
        scratch = self.scratch.get(task.id)
        if scratch is None:
            # Registered up front so that what the task records (durable steps, finished
            # children) survives if a forced pause cancels it midway.
            scratch = self.scratch[task.id] = Scratch()
        targeted = scratch.take_targeted()
        ctx = TaskContext(
            thread=self.thread,
            lineage=self.lineage,
            task_id=task.id,
            node=task.node,
            scratch=scratch,
            pending=[r for r in self.pending if r.owner == task.id] if self.pending else [],
            targeted=targeted,
            engine=self,
        )
        address = self._address_of(task, spec.kind)
        arg = self.view() if task.arg is MISSING else task.arg
        try:
            with enter_task(ctx, address):
                if spec.subgraph is not None:
                    out = await spec.subgraph.run_nested(arg, ctx, address, self)
                elif spec.is_stream:
                    out = await self._stream(task.node, spec.fn, arg)
                elif spec.dangerous:
                    out = await node_effect(task.node, spec.fn, arg)
                else:
                    assert spec.fn is not None
                    out = spec.fn(arg)
                    if spec.is_async or inspect.isawaitable(out):
                        out = await out
            return _Outcome(task, result=self._result_of(task.node, out))
        except InterruptSignal as sig:
            # The signal has done its job; its traceback would keep the frames alive, and
            # since Python 3.12 a finished coroutine frame links its caller's, whose locals
            # hold this outcome: a reference cycle per interrupt, left to the cyclic GC.
            return _Outcome(task, signal=sig.with_traceback(None), scratch=scratch)
        except Exception as exc:
            return _Outcome(task, error=exc, scratch=scratch if scratch.to_wire() else None)

    async def _stream(self, node: str, fn: Any, arg: Any) -> Any:
        chunks: list[Any] = []
        agen = fn(arg)
        try:
            async for chunk in agen:
                chunks.append(chunk)
                if self.emit is not None:
                    self.emit(ChunkEvent(step=self.step, node=node, chunk=chunk))
        finally:
            await agen.aclose()
        return concat(chunks, where=f"node {node!r}")

    def _address_of(self, task: TaskState, kind: str) -> Address:
        key = (task.node, task.sub)
        address = self._addresses.get(key)
        if address is None:
            address = self.base.child(Segment(kind, task.node, task.sub))  # type: ignore[arg-type]
            self._addresses[key] = address
        return address

    def _result_of(self, node: str, out: Any) -> TaskResult:
        if out is None:
            return TaskResult()
        if isinstance(out, Command):
            goto = out.goto
            gl = [goto] if isinstance(goto, str | Send) else list(goto)
            return TaskResult(self.updates_of(node, out.update), gl)
        return TaskResult(self.updates_of(node, out))
