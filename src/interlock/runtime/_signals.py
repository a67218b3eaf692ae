"""Interrupt signals: how an interrupt travels from the code that raised it up to the engine.

Signals derive from `BaseException` so that ``except Exception`` in user code cannot swallow
them; they are control flow, not errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ._records import Decision, Interrupt, OnTimeout

__all__ = ["InterruptSignal", "Raised"]


class Raised(msgspec.Struct):
    """An interrupt plus what the engine needs to keep about it (not shown to people)."""

    interrupt: Interrupt
    """The public record."""
    validator: str | None = None
    """Registered name of the validator the answer must pass, if any."""
    has_default: bool = False
    """True when the code supplies a default, so an empty answer is acceptable."""
    on_timeout: OnTimeout | None = None
    """What to do when the deadline passes (kept for the sweeper; None: ``reject``)."""
    task: str = ""
    """Id of the innermost task that raised it ("" for a pause between steps)."""
    local: str = ""
    """Its key within that task (address + call match); with `task` it derives the id."""
    owner: str | None = None
    """Id of the task at the recording graph level that must re-run to consume the answer."""
    approving: Mapping[str, Any] | None = None
    """For a quorum (``interrupt.approvals`` > 1): the JSON Schema of the answers that count as
    one approval; any other answer decides at once."""
    votes: tuple[Decision, ...] = ()
    """The approvals recorded so far (votes), whose actors ``interrupt.approved_by`` lists."""

    @property
    def id(self) -> str:
        return self.interrupt.id


class InterruptSignal(BaseException):
    """Raised by `interrupt()` and friends to stop the current task.

    Attributes:
        raised: The interrupts it carries (several for a composite).
        info: The composite's own payload, if it was raised by `composite_interrupt`.
    """

    def __init__(self, raised: Sequence[Raised], info: Any = None) -> None:
        super().__init__(f"{len(raised)} interrupt(s): {[r.id for r in raised]}")
        self.raised = list(raised)
        self.info = info
