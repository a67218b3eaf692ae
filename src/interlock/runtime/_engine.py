"""The superstep engine: runs a `Level`'s tasks until it finishes or must stop.

An `Engine` carries what one call's run offers its tasks — the effect recorder, the pause
control, the event sink — and runs a level superstep by superstep: it decides what is
runnable, holds breakpoints, runs the tasks concurrently, and hands each outcome to the level,
whose synchronous methods change the state. A subgraph node runs here too, as a child level
with an engine of its own: the engine reaches a subgraph only through its node spec
(`interlock.graph.Subgraph`: a plan and a recursion limit), never through the `App`.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from .._errors import (
    InterlockError,
    InvalidUpdate,
    NodeError,
    RecursionLimit,
    RunError,
    StoreError,
    ThreadBusy,
)
from .._lazy import lazy_module
from ..graph._builder import CompiledGraph, NodeSpec, Subgraph
from ..graph._channels import MISSING, AppendChannel
from ..graph._concat import concat
from ._context import Scratch, TaskContext, enter_task
from ._control import RunControl
from ._effects import node_effect
from ._events import ChunkEvent, Event, StepEvent, StepFinishedEvent
from ._level import Level, LevelStatus, Outcome, TaskState
from ._observe import Steps
from ._recorder import EffectIO
from ._records import Address
from ._signals import InterruptSignal
from ._usage import UsageMeter
from ._wire import level_from_wire, level_to_wire, subgraph_output

if TYPE_CHECKING:
    import anyio
else:  # imported by the first call that needs it, not by `import interlock`
    anyio = lazy_module("anyio", globals())

__all__ = ["Engine", "StepHook", "known_plan", "remember"]

StepHook = Callable[[Level], Awaitable[None]]
"""Awaited after each completed superstep that leaves work to do (the App commits there)."""


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


class Engine(msgspec.Struct, frozen=True, kw_only=True):
    """Runs levels for one call: what that call offers the tasks it runs."""

    effects: EffectIO | None = None
    """Records dangerous calls under the call's lease (None: outside an App's run)."""
    control: RunControl | None = None
    """Lets a run handle pause the run from outside."""
    emit: Callable[[Event], None] | None = None
    """Receives step, chunk and output events (the top level only)."""
    custom: Callable[[Event], None] | None = None
    """Receives the events nodes emit with `emit_event` (every level: subgraphs pass it on)."""
    steps: Steps | None = None
    """Spans and DEBUG records of supersteps and tasks (None: nobody looks)."""
    usage: UsageMeter | None = None
    """Sums the model calls the call's tasks report (every level: subgraphs pass it on)."""

    async def run(self, level: Level, *, on_step: StepHook | None, limit: int) -> LevelStatus:
        """Advance ``level`` until done or stopped; return its status.

        Raises:
            NodeError: A node raised (the finished tasks of its step are kept in the level).
            InvalidUpdate, RecursionLimit: A node returned a bad update; the limit was hit.
            StoreError, ThreadBusy: Recording an effect failed; the level is as it was.
        """
        ran: list[TaskState] = []  # the tasks of the last superstep this call completed
        emit, control = self.emit, self.control
        while True:
            if not level.tasks:
                return "done" if not level.pending else level.status()
            if level.pending or level.results:
                blocked = level.blocked()
                runnable = [
                    t for t in level.tasks if t.id not in level.results and t.id not in blocked
                ]
            else:
                runnable = level.tasks
            hold = (
                [t for t in runnable if t.node in level.before and not t.passed_before]
                if level.before
                else None
            )
            if hold:
                for t in hold:
                    level.pending.append(
                        level.pause("before", t, {"node": t.node, "when": "before"})
                    )
                return level.status()
            if not runnable:
                return level.status()
            if control is not None and await control.check():
                level.pending.append(level.external_pause(ran=ran, upcoming=runnable))
                return level.status()
            if level.steps_taken >= limit:
                raise RecursionLimit(limit)
            if emit is not None:
                emit(StepEvent(step=level.step, nodes=tuple(t.node for t in runnable)))
            if self.steps is None:
                outcomes, cancelled = await self._execute(level, runnable)
            else:
                with self.steps.step(level, runnable):
                    outcomes, cancelled = await self._execute(level, runnable)
            # A store or lease error inside a task (recording an effect) is not the node's
            # failure: the run stops with it and the thread stays at its last checkpoint.
            failed = next((o for o in outcomes if o.error is not None), None)
            if failed is not None:
                failed = next((o for o in outcomes if _store_failure(o.error)), failed)
            for o in outcomes:
                level.record(o, emit)
            if cancelled:
                rerun = [o.task for o in outcomes if o.cancelled]
                level.pending.append(level.external_pause(upcoming=rerun, forced=True))
                return level.status()
            if failed is not None:
                assert failed.error is not None
                store_failure = _store_failure(failed.error)
                if store_failure is not None:
                    raise store_failure
                if isinstance(failed.error, RunError):  # NodeError, InvalidUpdate, ModelError...
                    raise failed.error
                raise NodeError(failed.task.node, level.thread, failed.error) from failed.error
            if level.pending or len(level.results) < len(level.tasks):
                return level.status()
            finished = level.tasks
            ran = finished
            level.finish_step()
            level.steps_taken += 1
            if emit is not None:
                nxt = tuple(t.node for t in level.tasks)
                emit(StepFinishedEvent(step=level.step - 1, next=nxt))
            paused_after = level.after and [t.node for t in finished if t.node in level.after]
            if paused_after:
                info = {"nodes": sorted(set(paused_after)), "when": "after"}
                level.pending.append(level.pause("after", None, info))
                return level.status()
            if not level.tasks:
                return "done"
            if on_step is not None:
                await on_step(level)

    async def _execute(self, level: Level, runnable: list[TaskState]) -> tuple[list[Outcome], bool]:
        """Run one superstep's tasks; also say whether a forced pause cancelled some."""
        control = self.control
        if control is None and len(runnable) == 1:
            return [await self._run_task(level, runnable[0])], False
        outcomes = [Outcome(task=t, cancelled=True) for t in runnable]

        async def one(i: int) -> None:
            outcomes[i] = await self._run_task(level, runnable[i])

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

    async def _run_task(self, level: Level, task: TaskState) -> Outcome:
        spec = level.plan.nodes[task.node]
        scratch = level.scratch.get(task.id)
        if scratch is None:
            # Registered up front so that what the task records (durable steps, finished
            # children) survives if a forced pause cancels it midway.
            scratch = level.scratch[task.id] = Scratch()
        targeted = scratch.take_targeted()
        ctx = TaskContext(
            thread=level.thread,
            lineage=level.lineage,
            task_id=task.id,
            node=task.node,
            scratch=scratch,
            pending=[r for r in level.pending if r.owner == task.id] if level.pending else [],
            targeted=targeted,
            effects=self.effects,
            events=self.custom,
            children=self.run_child,
            usage=self.usage,
        )
        address = level.address_of(task)
        arg = level.view() if task.arg is MISSING else task.arg
        span = None if self.steps is None else self.steps.node(level, task, address)
        try:
            with enter_task(ctx, address):
                if span is None:
                    out = await self._call(level, task, spec, ctx, address, arg)
                else:
                    with span:
                        out = await self._call(level, task, spec, ctx, address, arg)
            return Outcome(task=task, result=level.result_of(task.node, out))
        except InterruptSignal as sig:
            # The signal has done its job; its traceback would keep the frames alive, and
            # since Python 3.12 a finished coroutine frame links its caller's, whose locals
            # hold this outcome: a reference cycle per interrupt, left to the cyclic GC.
            return Outcome(task=task, signal=sig.with_traceback(None), scratch=scratch)
        except Exception as exc:
            kept = scratch if scratch.to_wire() else None
            return Outcome(task=task, error=exc, scratch=kept)

    async def _call(
        self,
        level: Level,
        task: TaskState,
        spec: NodeSpec,
        ctx: TaskContext,
        address: Address,
        arg: Any,
    ) -> Any:
        """Run the node of one task; return what it returned."""
        if spec.subgraph is not None:
            return await self._run_subgraph(level, task, spec.subgraph, ctx, address, arg)
        fn = spec.fn
        assert fn is not None  # a node without a subgraph has a callable
        if spec.is_stream:
            return await self._stream(level, task.node, fn, arg)
        if spec.dangerous:
            return await node_effect(task.node, fn, arg)
        out = fn(arg)
        if spec.is_async or inspect.isawaitable(out):
            out = await out
        return out

    async def _stream(
        self, level: Level, node: str, fn: Callable[..., AsyncGenerator[Any, None]], arg: Any
    ) -> Any:
        chunks: list[Any] = []
        emit = self.emit
        agen = fn(arg)
        try:
            async for chunk in agen:
                chunks.append(chunk)
                if emit is not None:
                    emit(ChunkEvent(step=level.step, node=node, chunk=chunk))
        finally:
            await agen.aclose()
        return concat(chunks, where=f"node {node!r}")

    async def _run_subgraph(
        self,
        parent: Level,
        task: TaskState,
        sub: Subgraph,
        ctx: TaskContext,
        address: Address,
        arg: Any,
    ) -> dict[str, Any] | None:
        """Run a subgraph node as a child level (see `run_child`); hand back its shared writes.

        The child starts from the keys it shares with the parent's state: a parent may hold
        keys of its own that the child knows nothing of.
        """
        if not isinstance(arg, Mapping):
            with contextlib.suppress(InvalidUpdate):
                arg = parent.plan.schema.values_of(arg)
        if isinstance(arg, Mapping):
            names = sub.plan.schema.names
            arg = {k: v for k, v in arg.items() if k in names}
        level = await self.run_child(
            sub, arg, ctx, address, breakpoints=parent.child_breakpoints(task.node)
        )
        return subgraph_output(level, parent.plan.schema.names)

    async def run_child(
        self,
        sub: Subgraph,
        arg: Any,
        ctx: TaskContext,
        address: Address,
        *,
        breakpoints: tuple[list[str], list[str]] | None = None,
    ) -> Level:
        """Run a graph as a child level at ``address``; return the level once it is done.

        While the child waits on an interrupt, its level is kept in wire form in the task's
        scratch under its address (so a re-run of the task continues it where it stopped)
        and the child's interrupts stop the task. The child shares this call's effect
        recorder, pause control and custom events; its step events are not emitted (the
        parent's stand for it).

        Raises:
            InterruptSignal: The child stopped on interrupts.
        """
        plan = sub.plan
        remember(plan)
        where = str(address)
        saved = ctx.scratch.children.get(where)
        if saved is not None:
            level = level_from_wire(plan, saved, thread=ctx.thread, lineage=ctx.lineage)
        else:
            level = Level(plan, thread=ctx.thread, lineage=ctx.lineage, base=address)
            level.start(plan.schema.values_of(arg))
            level.origin = {
                k: len(c.value) for k, c in level.channels.items() if isinstance(c, AppendChannel)
            }
        level.base = address
        level.track_writes = True
        level.set_run_breakpoints(*(breakpoints or ([], [])))
        child = Engine(
            effects=self.effects,
            control=self.control,
            custom=self.custom,
            steps=self.steps,
            usage=self.usage,
        )
        status = await child.run(level, on_step=None, limit=sub.recursion_limit)
        if status == "done":
            ctx.scratch.children.pop(where, None)
            return level
        ctx.scratch.children[where] = level_to_wire(level, full=True)
        raise InterruptSignal(level.pending)


_PLANS: dict[str, CompiledGraph] = {}
"""Plans of graphs run as children in this process, by fingerprint (to decode stored levels)."""


def remember(plan: CompiledGraph) -> None:
    """Make ``plan`` findable by its fingerprint (`known_plan`)."""
    _PLANS.setdefault(plan.fingerprint, plan)


def known_plan(fingerprint: Any) -> CompiledGraph | None:
    """A plan with this fingerprint run or compiled in this process, if any.

    Plans with one fingerprint have one structure (schema, nodes, edges), so any of them
    decodes and encodes a stored level of the others.
    """
    return _PLANS.get(fingerprint) if isinstance(fingerprint, str) else None
