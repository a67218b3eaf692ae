"""Events a run emits while it streams (`App.stream`)."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Collection
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from .._lazy import lazy_module
from ._context import current_task_or_none
from ._records import Address, Interrupt, RunResult

if TYPE_CHECKING:
    # Annotations only: the streams are made by `anyio.create_memory_object_stream` when a
    # run is streamed, so a run that is not streamed never imports them.
    import anyio
    import anyio.abc
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
else:  # imported by the first call that needs it, not by `import interlock`
    anyio = lazy_module("anyio", globals())

__all__ = [
    "MODES",
    "CheckpointEvent",
    "ChunkEvent",
    "CustomEvent",
    "Event",
    "EventStream",
    "InterruptEvent",
    "NodeOutputEvent",
    "RunFinishedEvent",
    "RunStartedEvent",
    "StepEvent",
    "StepFinishedEvent",
    "StreamMode",
    "listening",
]


def listening() -> bool:
    """Whether anyone reads the running task's events (`emit_event`): True in a run streamed
    with `App.stream`, False in one started with `App.run` and outside a run.

    An event that takes work to build (totals, copies) can be skipped when nobody listens;
    `emit_event` drops it then anyway.

    Example:
        >>> listening()  # outside a run
        False
    """
    ctx = current_task_or_none()
    return ctx is not None and ctx.events is not None


class RunStartedEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A run or resume started on a thread."""

    kind: Literal["run"] = "run"
    thread: str
    """The thread."""
    resumed: bool
    """True for `App.resume`, False for `App.run`."""


class StepEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A superstep is about to run these nodes."""

    kind: Literal["step"] = "step"
    step: int
    """The superstep number."""
    nodes: tuple[str, ...]
    """The nodes of its runnable tasks, in order."""


class StepFinishedEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A superstep finished: every task's writes were applied."""

    kind: Literal["step_done"] = "step_done"
    step: int
    """The superstep that finished."""
    next: tuple[str, ...]
    """The nodes planned for the next superstep."""


class ChunkEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A streaming node yielded a chunk."""

    kind: Literal["chunk"] = "chunk"
    step: int
    """The superstep it runs in."""
    node: str
    """The node."""
    chunk: Any
    """What it yielded."""


class CustomEvent(msgspec.Struct, frozen=True, kw_only=True):
    """Something a node reported with `emit_event`, from any depth (subgraphs included)."""

    kind: Literal["custom"] = "custom"
    node: str
    """The node of the innermost graph level that emitted it."""
    address: Address
    """Where in the graph tree it was emitted."""
    data: Any
    """What was emitted."""


class NodeOutputEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A task finished and produced this update."""

    kind: Literal["node"] = "node"
    step: int
    """The superstep it ran in."""
    node: str
    """The node."""
    update: dict[str, Any]
    """Its state writes."""


class InterruptEvent(msgspec.Struct, frozen=True, kw_only=True):
    """An interrupt is pending (emitted only after its checkpoint is committed)."""

    kind: Literal["interrupt"] = "interrupt"
    interrupt: Interrupt
    """The interrupt."""


class CheckpointEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A checkpoint was committed."""

    kind: Literal["checkpoint"] = "checkpoint"
    checkpoint_id: str
    """Its id."""
    step: int
    """Supersteps completed."""
    status: str
    """The thread's status at it."""


class RunFinishedEvent(msgspec.Struct, frozen=True, kw_only=True):
    """The run stopped; ``result`` is what `App.run` would have returned."""

    kind: Literal["finished"] = "finished"
    result: RunResult[Any]
    """The outcome."""


Event = (
    RunStartedEvent
    | StepEvent
    | StepFinishedEvent
    | ChunkEvent
    | CustomEvent
    | NodeOutputEvent
    | InterruptEvent
    | CheckpointEvent
    | RunFinishedEvent
)
"""Any event of a run."""

StreamMode = Literal["run", "steps", "updates", "chunks", "custom", "checkpoints", "interrupts"]
"""Which events `App.stream` yields; the final `RunFinishedEvent` always comes."""

MODES: dict[str, frozenset[str]] = {
    "run": frozenset({"run"}),
    "steps": frozenset({"step", "step_done"}),
    "updates": frozenset({"node"}),
    "chunks": frozenset({"chunk"}),
    "custom": frozenset({"custom"}),
    "checkpoints": frozenset({"checkpoint"}),
    "interrupts": frozenset({"interrupt"}),
}
"""Stream mode → the event kinds it selects."""


class EventStream:
    """The events of one run as it happens; an ``async with`` block owns the run.

    Returned by `App.stream` (a sketch; the streaming how-to guide runs one)::

        async with app.stream({"order": 42}, thread="t") as events:
            async for event in events:
                ...

    The run goes on in the block's task group while the body reads (it never waits for a slow
    reader). Iterating ends after the last event, raising the run's error if it failed — the
    same error `App.run` raises. Leaving the block before the end cancels the run: the thread
    stays at its last committed checkpoint, its lease is let go, and ``app.resume(thread)``
    continues it. An error the run had that the body did not read is raised on leaving.
    """

    def __init__(
        self, start: Callable[[Callable[[Event], None]], Awaitable[object]], kinds: Collection[str]
    ) -> None:
        self._start = start
        self._kinds = kinds
        self._send: MemoryObjectSendStream[Event] | None = None
        self._receive: MemoryObjectReceiveStream[Event] | None = None
        self._error: Exception | None = None
        self._scope = anyio.CancelScope()
        self._tg: anyio.abc.TaskGroup | None = None
        self._entered = False

    def __repr__(self) -> str:
        state = "running" if self._tg is not None else "closed" if self._entered else "not started"
        return f"<EventStream {state}>"

    async def __aenter__(self) -> EventStream:
        if self._entered:
            raise TypeError("an event stream runs once; call app.stream(...) again for another run")
        self._entered = True
        # Unbounded: the run must never block on (or fail because of) a slow reader.
        self._send, self._receive = anyio.create_memory_object_stream[Event](math.inf)
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        tg.start_soon(self._produce)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._tg is not None
        tg, self._tg = self._tg, None
        self._scope.cancel()  # leaving before the end stops the run; after it, a no-op
        try:
            # The body's own exception is not handed to the task group: it would come back
            # wrapped in an exception group. It propagates as it is once the run has stopped.
            await tg.__aexit__(None, None, None)
        finally:
            assert self._receive is not None
            self._receive.close()
        error, self._error = self._error, None
        if exc is None and error is not None:
            raise error

    def __aiter__(self) -> EventStream:
        if not self._entered:
            raise TypeError(
                "app.stream(...) owns a running task, so it needs a block that ends it: use "
                "`async with app.stream(...) as events:` and then `async for event in events:`"
            )
        return self

    async def __anext__(self) -> Event:
        assert self._receive is not None
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            error, self._error = self._error, None
            if error is not None:
                raise error from None
            raise StopAsyncIteration from None

    def _emit(self, event: Event) -> None:
        if event.kind in self._kinds:
            assert self._send is not None
            self._send.send_nowait(event)

    async def _produce(self) -> None:
        assert self._send is not None
        with self._send, self._scope:
            try:
                await self._start(self._emit)
            except Exception as exc:  # the reader gets it, as run() would raise it
                self._error = exc
