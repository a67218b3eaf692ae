"""The per-task context that interrupts, durable steps and child scopes read and write.

Every task runs with a `TaskContext` in a context variable, and with its current `Address` in
another one, so that concurrent children of one task (anyio copies the context per child task)
each see their own address while sharing the task's scratch.

A task's *scratch* survives an interrupt: answers received so far, interrupt states, durable
step results, finished children, nested subgraph checkpoints. It is stored in the checkpoint
while the task waits and dropped once the task finishes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import msgspec

from .._errors import GraphDefinitionError
from .._lazy import lazy_module
from ._recorder import EffectIO
from ._records import Address, Segment
from ._signals import Raised

if TYPE_CHECKING:
    import hashlib

    from ._usage import UsageMeter
else:  # imported by the first call that needs it, not by `import interlock`
    hashlib = lazy_module("hashlib", globals())

__all__ = [
    "Scratch",
    "TaskContext",
    "child_scope",
    "current_address",
    "current_task",
    "interrupt_id",
]


_SCRATCH_PARTS = (
    "answers",
    "targeted",
    "escalated",
    "states",
    "raised",
    "steps",
    "done",
    "children",
)


class Scratch:
    """What a task keeps across an interrupt (persisted in the checkpoint while it waits).

    Every part is created on first use: most tasks never interrupt, and a task is started for
    every node of every superstep, so an empty scratch must cost nothing. Which parts exist is
    kept beside them, so that reading one that does not exist raises nothing (an exception
    per unset part cost more than the rest of a checkpoint's scratch).
    """

    __slots__ = (*_SCRATCH_PARTS, "_made")

    _made: tuple[str, ...]
    """The names of the parts set so far."""

    def __init__(self) -> None:
        object.__setattr__(self, "_made", ())

    answers: dict[str, Any]
    """Local key (address + call match) → answer, for every answered interrupt of this task."""
    targeted: list[str]
    """Local keys answered since the task last ran (consumed when it runs again)."""
    escalated: list[str]
    """Local keys whose deadline passed with ``on_timeout="escalate"``: asked again, anew."""
    states: dict[str, Any]
    """Address → the ``state=`` saved by the interrupt raised there."""
    raised: dict[str, list[str]]
    """Address → local keys of interrupts ever raised there."""
    steps: dict[str, Any]
    """Durable step key → recorded result."""
    done: dict[str, Any]
    """Child address → result of a finished child (see `gather_children`)."""
    children: dict[str, Any]
    """Child address → nested graph checkpoint (subgraphs)."""

    def __getattr__(self, name: str) -> Any:
        # Only called for a part that was never set: create it empty.
        if name not in _SCRATCH_PARTS:
            if name == "_made":  # made without __init__ (copy.copy): nothing is set yet
                return ()
            raise AttributeError(name)
        value: Any = [] if name in ("targeted", "escalated") else {}
        self.__setattr__(name, value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name != "_made" and name not in self._made:
            object.__setattr__(self, "_made", (*self._made, name))

    def _get(self, name: str) -> Any:
        """The part ``name``, or None if it was never set (without creating it)."""
        if name in self._made:
            return object.__getattribute__(self, name)
        return None

    def take_targeted(self) -> frozenset[str]:
        """Return the local keys answered since the last run, and forget them."""
        targeted = self._get("targeted")
        if not targeted:
            return frozenset()
        self.targeted = []
        return frozenset(targeted)

    def has_escalated(self) -> bool:
        """True when some interrupt of the task was escalated."""
        return bool(self._get("escalated"))

    def has_targeted(self) -> bool:
        """True when answers arrived since the task last ran."""
        return bool(self._get("targeted"))

    def to_wire(self) -> dict[str, Any]:
        """Return a plain dict for the checkpoint body (only non-empty parts)."""
        out: dict[str, Any] = {}
        made = self._made
        for name in _SCRATCH_PARTS:  # in this order, whichever was made first
            if name in made:
                value = object.__getattribute__(self, name)
                if value:
                    out[name] = value
        return out

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Scratch:
        """Rebuild from `to_wire` output."""
        if not isinstance(data, dict):
            raise ValueError("a task scratch is not a mapping")
        scratch = cls()
        for name, value in data.items():
            if name not in _SCRATCH_PARTS:
                raise ValueError(f"unknown task scratch part {name!r}")
            listed = name in ("targeted", "escalated")
            if not isinstance(value, list if listed else dict):
                raise ValueError(f"task scratch part {name!r} has the wrong type")
            setattr(scratch, name, list(value) if listed else dict(value))
        return scratch


class TaskContext(msgspec.Struct):
    """The running task, as seen by `interrupt()` and the other helpers."""

    thread: str
    """The thread the run belongs to."""
    lineage: str
    """The thread's lineage token (part of every interrupt id; a fork gets a new one)."""
    task_id: str
    """The task at the innermost graph level."""
    node: str
    """The node the task runs."""
    scratch: Scratch
    """State kept across interrupts."""
    pending: list[Raised]
    """Interrupts this task raised on its previous pass that are still unanswered."""
    targeted: frozenset[str]
    """Local keys answered for this pass (for `resume_context`)."""
    effects: EffectIO | None = None
    """Records the task's dangerous calls (None outside an App's run)."""
    counters: dict[str, int] | None = None
    """Call-order counters (matches re-raised interrupts and durable steps to their records)."""
    events: Callable[[Any], None] | None = None
    """Where `emit_event` sends events (None: nobody streams this run)."""
    children: Callable[..., Awaitable[Any]] | None = None
    """Runs a graph as a child of this task (`run_graph`; the engine's ``run_child``)."""
    usage: UsageMeter | None = None
    """Sums the model calls the run reports (`report_usage`; None outside an App's run)."""

    def next_ordinal(self, key: str) -> int:
        """Return how many times ``key`` was seen before in this pass, and count this one."""
        counters = self.counters
        if counters is None:
            counters = self.counters = {}
        n = counters.get(key, 0)
        counters[key] = n + 1
        return n

    def blocked_under(self, address: Address) -> list[Raised]:
        """Pending interrupts at or below ``address`` that are still unanswered."""
        return [r for r in self.pending if r.interrupt.address.is_within(address)]

    def answered_under(self, where: str) -> bool:
        """True when this pass answers an interrupt raised at or below the rendered address."""
        return any(_within(local_address(k), where) for k in self.targeted)


_task: ContextVar[TaskContext | None] = ContextVar("interlock_task", default=None)
_ROOT = Address()
_address: ContextVar[Address] = ContextVar("interlock_address", default=_ROOT)


def current_task(what: str = "this function") -> TaskContext:
    """Return the running task's context, or explain that there is none."""
    ctx = _task.get()
    if ctx is None:
        raise GraphDefinitionError(
            f"{what} can only be called while a node of a running graph executes "
            "(inside a node, a tool or a subgraph), not at module level or from another thread"
        )
    return ctx


def current_task_or_none() -> TaskContext | None:
    """Return the running task's context, or None outside a running graph."""
    return _task.get()


def current_address() -> Address:
    """Return the address of the code running now."""
    return _address.get()


@contextlib.contextmanager
def child_scope(segment: Segment) -> Iterator[Address]:
    """Run a block one level deeper in the address tree (a tool call, an agent, a child).

    Interrupts raised inside get an address ending with ``segment``; their interrupt state,
    answers and durable steps are kept apart from siblings at other addresses.
    """
    token = _address.set(_address.get().child(segment))
    try:
        yield _address.get()
    finally:
        _address.reset(token)


class enter_task:
    """Install a task context and its address for the duration of one task (engine use)."""

    __slots__ = ("address", "ctx", "t1", "t2")

    def __init__(self, ctx: TaskContext, address: Address) -> None:
        self.ctx = ctx
        self.address = address

    def __enter__(self) -> None:
        self.t1 = _task.set(self.ctx)
        self.t2 = _address.set(self.address)

    def __exit__(self, *exc: object) -> None:
        _address.reset(self.t2)
        _task.reset(self.t1)


def local_key(address: str, match: str) -> str:
    """Name an interrupt call within its task: its address and its key or call order."""
    return f"{address}\x1f{match}"


def local_address(local: str) -> str:
    """Return the rendered address part of a local key."""
    return local.partition("\x1f")[0]


def _within(address: str, ancestor: str) -> bool:
    return not ancestor or address == ancestor or address.startswith(ancestor + "/")


def interrupt_id(lineage: str, task_id: str, local: str) -> str:
    """Derive a stable interrupt id from the thread lineage, the task and the local key.

    The same call on a re-run of the same task gets the same id, so an unanswered interrupt
    keeps its id; a new task (a new pass of a loop) or a fork (a new lineage) gets new ids.
    """
    h = hashlib.blake2b(f"{lineage}\x1f{task_id}\x1f{local}".encode(), digest_size=10)
    return h.hexdigest()
