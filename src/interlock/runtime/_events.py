"""Events a run emits while it streams (`App.stream`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ._records import Interrupt, RunResult

__all__ = [
    "MODES",
    "CheckpointEvent",
    "ChunkEvent",
    "Event",
    "InterruptEvent",
    "NodeOutputEvent",
    "RunFinishedEvent",
    "RunStartedEvent",
    "StepEvent",
    "StepFinishedEvent",
    "StreamMode",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class RunStartedEvent:
    """A run or resume started on a thread."""

    kind: Literal["run"] = "run"
    thread: str
    """The thread."""
    resumed: bool
    """True for `App.resume`, False for `App.run`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StepEvent:
    """A superstep is about to run these nodes."""

    kind: Literal["step"] = "step"
    step: int
    """The superstep number."""
    nodes: tuple[str, ...]
    """The nodes of its runnable tasks, in order."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StepFinishedEvent:
    """A superstep finished: every task's writes were applied."""

    kind: Literal["step_done"] = "step_done"
    step: int
    """The superstep that finished."""
    next: tuple[str, ...]
    """The nodes planned for the next superstep."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ChunkEvent:
    """A streaming node yielded a chunk."""

    kind: Literal["chunk"] = "chunk"
    step: int
    """The superstep it runs in."""
    node: str
    """The node."""
    chunk: Any
    """What it yielded."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeOutputEvent:
    """A task finished and produced this update."""

    kind: Literal["node"] = "node"
    step: int
    """The superstep it ran in."""
    node: str
    """The node."""
    update: dict[str, Any]
    """Its state writes."""


@dataclass(frozen=True, kw_only=True, slots=True)
class InterruptEvent:
    """An interrupt is pending (emitted only after its checkpoint is committed)."""

    kind: Literal["interrupt"] = "interrupt"
    interrupt: Interrupt
    """The interrupt."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckpointEvent:
    """A checkpoint was committed."""

    kind: Literal["checkpoint"] = "checkpoint"
    checkpoint_id: str
    """Its id."""
    step: int
    """Supersteps completed."""
    status: str
    """The thread's status at it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunFinishedEvent:
    """The run stopped; ``result`` is what `App.run` would have returned."""

    kind: Literal["finished"] = "finished"
    result: RunResult[Any]
    """The outcome."""


Event = (
    RunStartedEvent
    | StepEvent
    | StepFinishedEvent
    | ChunkEvent
    | NodeOutputEvent
    | InterruptEvent
    | CheckpointEvent
    | RunFinishedEvent
)
"""Any event of a run."""

StreamMode = Literal["run", "steps", "updates", "chunks", "checkpoints", "interrupts"]
"""Which events `App.stream` yields; the final `RunFinishedEvent` always comes."""

MODES: dict[str, frozenset[str]] = {
    "run": frozenset({"run"}),
    "steps": frozenset({"step", "step_done"}),
    "updates": frozenset({"node"}),
    "chunks": frozenset({"chunk"}),
    "checkpoints": frozenset({"checkpoint"}),
    "interrupts": frozenset({"interrupt"}),
}
"""Stream mode → the event kinds it selects."""
