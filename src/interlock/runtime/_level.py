"""The live state of one graph level (the top graph or a running subgraph): `Level`.

A level holds the state of one graph: its channels, the tasks of the current superstep, the
results of tasks that finished in it, the scratch of tasks that wait on an interrupt, and the
pending interrupts. Its methods are the synchronous state changes of a superstep (plan, record
an outcome, finish the step, pause); `interlock.runtime._engine` runs the tasks, and saving a
level is the caller's job (the App writes checkpoints for the top level; a subgraph level is
stored inside its parent task's scratch).

Invariant: between supersteps, ``results`` and ``scratch`` are empty; inside an interrupted
superstep every task is exactly one of finished (in ``results``), blocked (owner of a pending
interrupt) or runnable.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec

from .._errors import GraphDefinitionError, InvalidUpdate
from .._lazy import lazy_module
from ..graph._builder import END, START, CompiledGraph
from ..graph._channels import MISSING, AppendChannel, Channel
from ._context import Scratch, interrupt_id
from ._events import Event, NodeOutputEvent
from ._records import Address, Command, Interrupt, Segment, Send
from ._signals import InterruptSignal, Raised

if TYPE_CHECKING:
    import secrets
else:  # imported by the first call that needs it, not by `import interlock`
    secrets = lazy_module("secrets", globals())

__all__ = [
    "ESCALATE",
    "Level",
    "LevelStatus",
    "Outcome",
    "TaskResult",
    "TaskState",
    "new_id",
]

LevelStatus = Literal["interrupted", "paused", "ready", "done"]
"""Where a level stands: waiting on answers, paused, with tasks to run, or finished."""
PauseInterruptKind = Literal["before", "after", "external"]
"""The interrupts a level raises itself (breakpoints and external pauses)."""

_ID_PREFIX = os.urandom(6).hex()  # what secrets.token_hex(6) draws, without importing it
_ID_COUNTER = itertools.count()

_MAX_ADDRESSES: Final = 4096
"""How many task addresses a level keeps (see `Level.address_of`)."""


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


def new_id() -> str:
    """Return a fresh unique id (tasks, checkpoints, lineages).

    A random per-process prefix and a counter: unique across processes and machines with
    overwhelming probability, and much cheaper than asking the OS for randomness per id.
    """
    return f"{_ID_PREFIX}{next(_ID_COUNTER):x}"


class TaskState(msgspec.Struct, kw_only=True):
    """A task of the current superstep: a node to run, and its input if it came from a `Send`."""

    id: str
    """Unique task id (part of its interrupts' ids and effect keys)."""
    node: str
    """The node it runs."""
    sub: str = ""
    """Tells apart tasks of one node in one step (a `Send`'s index)."""
    arg: Any = MISSING
    """The `Send`'s input (MISSING: the task reads the state)."""
    passed_before: bool = False
    """Its ``interrupt_before`` breakpoint was answered: it runs without stopping there."""


class TaskResult(msgspec.Struct, kw_only=True):
    """What a finished task produced: state writes and extra successors."""

    writes: list[tuple[str, Any]] = msgspec.field(default_factory=list)
    """``(key, value)`` updates, applied at the end of the step."""
    goto: list[str | Send] = msgspec.field(default_factory=list)
    """Successors from a `Command`'s ``goto``."""


class Outcome(msgspec.Struct, kw_only=True):
    """How one task of a superstep ended."""

    task: TaskState
    """The task."""
    cancelled: bool = False
    """A forced pause cancelled it: it re-runs from its saved input."""
    result: TaskResult | None = None
    """It finished with this result."""
    signal: InterruptSignal | None = None
    """It stopped on these interrupts."""
    error: BaseException | None = None
    """It raised."""
    scratch: Scratch | None = None
    """What it keeps for its next run (interrupted, or failed after durable steps)."""


class Level:
    """The live state of one graph level; see the module docstring."""

    __slots__ = (
        "_addresses",
        "_base",
        "after",
        "answered",
        "before",
        "channels",
        "dropped",
        "lineage",
        "origin",
        "pending",
        "plan",
        "ran",
        "ran_given",
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
        self._addresses: dict[tuple[str, str], Address]
        self.base = base  # also picks the table of task addresses
        self.channels: dict[str, Channel] = plan.schema.new_channels()
        self.tasks: list[TaskState] = []
        self.results: dict[str, TaskResult] = {}
        self.scratch: dict[str, Scratch] = {}
        self.pending: list[Raised] = []
        self.dropped: list[str] = []
        """Pending interrupts that vanished because their task re-ran without raising them."""
        self.answered: dict[str, Interrupt] = {}
        """Interrupts answered since the last commit, by id (what observers are told of)."""
        self.step = 0
        self.steps_taken = 0
        self.written: set[str] = set()
        """Keys written since the level started (subgraphs hand these back to the parent)."""
        self.track_writes = False
        self.origin: dict[str, int] = {}
        """Append-key lengths right after the input (a subgraph returns only what it added)."""
        self.ran: list[tuple[str, list[tuple[str, Any]]]] = []
        # The list `ran_metadata` last handed out: the engine's own plain data, which a
        # commit encodes without walking it.
        self.ran_given: list[dict[str, Any]] | None = None
        """What ran since the last commit (top level only): ``(node, its writes)`` per
        finished task, in task order, step after step; the next commit records it in the
        checkpoint's metadata (`ran_metadata`) and clears it. Not persisted."""
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
        # A top-level run's task addresses are the same in every run of the plan: share them.
        self._addresses = self.plan.top_addresses if not value else {}

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

    def plan_after(
        self, node: str, goto: Sequence[str | Send] = (), *, keep: Sequence[TaskState] = ()
    ) -> None:
        """Replace the next tasks by the successors of ``node`` (``update_state(as_node=)``).

        A successor that is one of ``keep`` again (the same node, `Send` index and input)
        stays that task, id and all: a breakpoint that holds it still holds it, and a pause it
        passed stays passed.
        """
        planned = self._plan_next([(node, list(goto))])
        if keep:
            left = list(keep)
            for i, task in enumerate(planned):
                same = next((k for k in left if _same_task(k, task)), None)
                if same is not None:
                    left.remove(same)
                    planned[i] = same
        self.tasks = planned

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
        tasks = [TaskState(id=new_id(), node=n) for n in names]
        tasks.extend(
            TaskState(id=new_id(), node=s.node, sub=str(i), arg=s.arg) for i, s in enumerate(sends)
        )
        order = self.plan.order
        tasks.sort(key=lambda t: order[t.node])  # stable: Sends keep their order
        return tasks

    def _check_node(self, name: Any, source: str) -> None:
        if not isinstance(name, str) or name not in self.plan.nodes:
            raise InvalidUpdate(
                f"{source or 'a command'!r} routed to {name!r}, which is not a node of graph "
                f"{self.plan.name!r}; nodes: {sorted(self.plan.nodes)}"
            )

    def address_of(self, task: TaskState) -> Address:
        """The address a task runs at (cached: a level's tasks are addressed every step)."""
        key = (task.node, task.sub)
        address = self._addresses.get(key)
        if address is None:
            kind = self.plan.nodes[task.node].kind
            address = self.base.child(Segment(kind=kind, name=task.node, sub_id=task.sub))
            if len(self._addresses) < _MAX_ADDRESSES:  # a wide fan-out is not kept forever
                self._addresses[key] = address
        return address

    # -- interrupts --------------------------------------------------------------------------

    def blocked(self) -> set[str]:
        """Ids of tasks that wait on a pending interrupt and got no new answer."""
        waiting = {r.owner for r in self.pending if r.owner is not None}
        return {t for t in waiting if not (t in self.scratch and self.scratch[t].has_targeted())}

    def dynamic_pending(self) -> list[Raised]:
        """Pending interrupts that need an answer (not static or external pauses)."""
        return [r for r in self.pending if r.interrupt.needs_answer]

    def status(self) -> LevelStatus:
        """``interrupted``, ``paused``, ``ready`` or ``done``."""
        if self.pending:
            return "interrupted" if self.dynamic_pending() else "paused"
        return "ready" if self.tasks else "done"

    def pause(self, kind: PauseInterruptKind, task: TaskState | None, info: Any) -> Raised:
        """The record of a breakpoint (``before``/``after``) or an external pause."""
        if task is None:
            address = self.base
        else:
            address = self.address_of(task)
        local = f"{kind}#{self.step}"
        tid = task.id if task else f"step{self.step}"
        record = Interrupt(
            id=interrupt_id(self.lineage, tid, local),
            thread=self.thread,
            key=None,
            address=address,
            kind=kind,
            info=info,
            created_at=time.time(),
        )
        return Raised(record, task=tid, local=local, owner=task.id if task else None)

    def external_pause(
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
        return self.pause("external", None, info)

    def record(self, o: Outcome, emit: Callable[[Event], None] | None = None) -> None:
        """Keep what a task of the current superstep produced (``emit`` gets its output)."""
        tid = o.task.id
        if o.cancelled:
            return  # it re-runs from its saved input; its scratch stays as it was
        voted: dict[str, Raised] = {}
        if o.error is None:
            # The task ran: whatever it still waits on, it raised again just now. Interrupts it
            # no longer raises are gone (the App cancels them on the record).
            before = [r for r in self.pending if r.owner == tid]
            if before:
                self.pending = [r for r in self.pending if r.owner != tid]
                again = {r.id for r in o.signal.raised} if o.signal is not None else set()
                self.dropped.extend(r.id for r in before if r.id not in again)
                voted = {r.id: r for r in before if r.votes}
        if o.result is not None:
            self.results[tid] = o.result
            if emit is not None:
                emit(
                    NodeOutputEvent(step=self.step, node=o.task.node, update=dict(o.result.writes))
                )
            self.scratch.pop(tid, None)
        elif o.signal is not None:
            assert o.scratch is not None
            self.scratch[tid] = o.scratch
            for r in o.signal.raised:
                interrupt, votes = r.interrupt, r.votes
                old = voted.get(r.id)
                if old is not None and old.interrupt.info == interrupt.info:
                    # Re-raised as it was (a subgraph reports its stored copy, which the
                    # votes recorded at this level never reached): the votes stay.
                    votes = old.votes
                    interrupt = old.interrupt
                self.pending.append(
                    Raised(
                        interrupt,
                        validator=r.validator,
                        has_default=r.has_default,
                        on_timeout=r.on_timeout,
                        task=r.task,
                        local=r.local,
                        owner=tid,
                        approving=r.approving,
                        votes=votes,
                    )
                )
        elif o.scratch is not None:
            self.scratch[tid] = o.scratch

    def finish_step(self) -> None:
        """Apply the finished superstep's writes and plan the next one."""
        writes: list[tuple[str, str, Any]] = []
        finished: list[tuple[str, Sequence[str | Send]]] = []
        ran = None if self._base else self.ran  # a subgraph's steps are its parent task's
        for t in self.tasks:
            res = self.results[t.id]
            writes.extend((t.node, k, v) for k, v in res.writes)
            finished.append((t.node, res.goto))
            if ran is not None:
                ran.append((t.node, res.writes))  # its keys are read out at the commit
        self.apply_writes(writes)
        self.tasks = self._plan_next(finished)
        self.results = {}
        self.scratch = {}
        self.step += 1

    def ran_metadata(self) -> list[dict[str, Any]] | None:
        """Take what ran since the last commit, as checkpoint metadata (None: nothing ran).

        ``[{"node": "agent", "keys": ["messages"]}, ...]``: one item per finished task, in
        task order (a node that ran twice through `Send` is there twice), its keys in the
        state's order (a subgraph hands back a set of keys). The tasks that finished in a
        superstep still interrupted are not there yet: their writes are applied, and
        recorded, when the step completes.
        """
        if not self.ran:
            return None
        ran, self.ran = self.ran, []
        out: list[dict[str, Any]] = []
        for node, writes in ran:
            keys = [k for k, _ in writes]
            if len(keys) > 1:
                wrote = set(keys)
                keys = [k for k in self.channels if k in wrote]
            out.append({"node": node, "keys": keys})
        self.ran_given = out
        return out

    def result_of(self, node: str, out: Any) -> TaskResult:
        """Normalise a node's return value (None, a `Command` or an update)."""
        if out is None:
            return TaskResult()
        if isinstance(out, Command):
            goto = out.goto
            gl = [goto] if isinstance(goto, str | Send) else list(goto)
            return TaskResult(writes=self.updates_of(node, out.update), goto=gl)
        return TaskResult(writes=self.updates_of(node, out))


def _same_task(old: TaskState, new: TaskState) -> bool:
    """True when a newly planned task is ``old`` planned again (node, index and input)."""
    if (old.node, old.sub) != (new.node, new.sub):
        return False
    if old.arg is new.arg:
        return True
    try:
        return bool(old.arg == new.arg)
    except Exception:  # a value whose == is not a plain answer (an array): not the same
        return False
