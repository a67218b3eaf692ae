"""One call's view of a thread while it runs: what it found, what it commits, what it emits."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from .._errors import NodeError, ResumeError, ThreadBusy
from ..stores import Resolution
from ._engine import Level
from ._events import CheckpointEvent, Event, InterruptEvent, RunFinishedEvent
from ._persist import Head, ThreadIO
from ._records import RunResult

if TYPE_CHECKING:
    from ..graph._builder import Durability

__all__ = ["Opened", "RunCtx", "Stale"]


class Stale(Exception):
    """A cached view of a thread was out of date; the call starts over from the store."""


@dataclass(slots=True)
class Opened:
    """A thread as a call found it."""

    head: Head | None
    level: Level | None
    known: set[str]
    verified: bool = True
    """False while the view comes from this process's cache and no commit has confirmed it."""

    def check(self, error: Exception) -> None:
        """Raise ``error`` if the view is verified; otherwise start over (it may be stale)."""
        if not self.verified:
            raise Stale from error
        raise error


class RunCtx:
    """One call's view of a thread: durability, the head it builds on, what it emits."""

    def __init__(
        self,
        io: ThreadIO,
        recursion_limit: int,
        thread: str,
        durability: Durability,
        metadata: Mapping[str, Any] | None,
        emit: Callable[[Event], None] | None,
        opened: Opened,
    ) -> None:
        self.io = io
        self.recursion_limit = recursion_limit
        self.thread = thread
        self.durability = durability
        self.metadata = dict(metadata or {})
        self.emit = emit
        self.head = opened.head
        self.parent: Head | None = None
        self.known = opened.known
        self.opened = opened

    async def commit(
        self,
        level: Level,
        source: Any,
        resolutions: Sequence[Resolution],
        *,
        actor: str | None = None,
    ) -> str:
        status = level.status()
        parent = self.parent or self.head
        try:
            head = await self.io.commit(
                level,
                thread=self.thread,
                parent=parent,
                thread_head=self.head,
                source=source,
                status=status,
                resolutions=resolutions,
                known=self.known,
                metadata={**self.metadata, **({"actor": actor} if actor else {})},
            )
        except (ThreadBusy, ResumeError) as exc:
            self.opened.check(exc)
            raise  # unreachable: check() raises
        self.head = head
        self.opened.verified = True
        self.parent = None
        if self.emit is not None:
            self.emit(CheckpointEvent(checkpoint_id=head.record.id, step=level.step, status=status))
        return head.record.id

    async def advance(self, level: Level) -> RunResult[Any]:
        on_step = self._on_step if self.durability == "sync" else None
        level.emit = self.emit
        try:
            await level.run(on_step=on_step, limit=self.recursion_limit)
        except NodeError as exc:
            await self._commit_failure(level, exc)
            raise
        await self.commit(level, "loop", ())
        result = self.result(level)
        if self.emit is not None:
            for i in result.interrupts:
                self.emit(InterruptEvent(interrupt=i))
            self.emit(RunFinishedEvent(result=result))
        return result

    async def _commit_failure(self, level: Level, exc: NodeError) -> None:
        # The finished tasks of the failed step are kept, so a later resume re-runs only the
        # failed ones. Other errors (bad updates, serialization) leave the last checkpoint.
        with anyio.CancelScope(shield=True):
            await self.io.commit(
                level,
                thread=self.thread,
                parent=self.head,
                thread_head=self.head,
                source="loop",
                status="failed",
                resolutions=(),
                known=self.known,
                metadata={**self.metadata, "error": f"{type(exc).__name__}: {exc}"},
            )

    async def _on_step(self, level: Level) -> None:
        await self.commit(level, "loop", ())

    def result(self, level: Level) -> RunResult[Any]:
        status = level.status()
        return RunResult(
            thread=self.thread,
            status="done" if status in ("done", "ready") else status,  # type: ignore[arg-type]
            state=level.detached_view(),
            values=level.values(),
            interrupts=[r.interrupt for r in level.pending],
            checkpoint_id=self.head.record.id if self.head else None,
        )
