"""Events a run emits while it streams (`App.stream`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ._records import Interrupt, RunResult

__all__ = [
    "CheckpointEvent",
    "Event",
    "InterruptEvent",
    "NodeOutputEvent",
    "RunFinishedEvent",
    "StepEvent",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class StepEvent:
    """A superstep is about to run these nodes."""

    kind: Literal["step"] = "step"
    step: int
    """The superstep number."""
    nodes: tuple[str, ...]
    """The nodes of its runnable tasks, in order."""


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


Event = StepEvent | NodeOutputEvent | InterruptEvent | CheckpointEvent | RunFinishedEvent
"""Any event of a run."""
