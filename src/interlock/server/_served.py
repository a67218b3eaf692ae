"""One served App: its name, and the reads the API makes of its store beyond `App`'s own."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Final

from .._errors import CheckpointCorrupt
from ..runtime import App, Decision, Interrupt, Question
from ..stores import InterruptRecord
from ._events import FAILED_SUMMARY, EventType, ServerEvent
from ._views import InterruptView, interrupt_view, summary_of

__all__ = ["Served"]

_KINDS: Final[dict[str, EventType]] = {
    "interrupt_created": "interrupt.created",
    "interrupt_resolved": "interrupt.decided",
    "interrupt_expired": "interrupt.expired",
    "interrupt_cancelled": "interrupt.cancelled",
    "run_finished": "run.finished",
    "run_failed": "run.failed",
}


class Served:
    """An App the server answers for, under ``name``."""

    def __init__(self, name: str, app: App[Any], *, public_url: str | None) -> None:
        self.name = name
        self.app = app
        self.store = app.store
        self._public_url = public_url.rstrip("/") if public_url else None
        self._events: OrderedDict[str, ServerEvent] = OrderedDict()
        self.four_eyes = False
        """The server adds four eyes to every decision (shown with each question)."""

    async def question(self, interrupt_id: str) -> Question | None:
        """The App's question with this id (`App.question`), or None."""
        return await self.app.question(interrupt_id)

    async def row(self, interrupt_id: str) -> InterruptRecord | None:
        """The store's row of an interrupt, or None."""
        return await self.store.get_interrupt(interrupt_id)

    def interrupt(self, row: InterruptRecord) -> Interrupt:
        """The row decoded (raises `CheckpointCorrupt` for a damaged one)."""
        return self.app.reader.interrupt(row)

    def view(self, interrupt: Interrupt, tool: str | None) -> InterruptView:
        """The API's view of one interrupt."""
        return interrupt_view(
            self.name,
            interrupt,
            self.app.payload_hash(interrupt),
            tool,
            self.app.who_decides(interrupt, four_eyes=self.four_eyes),
        )

    def decision(self, row: InterruptRecord) -> Decision | None:
        """The decision recorded with a resolved interrupt, if any."""
        return self.app.reader.decision(row)

    async def metadata(self, thread: str, checkpoint_id: str) -> dict[str, Any]:
        """The metadata stored with one checkpoint (empty when it is gone)."""
        return await self.app.checkpoint_meta(thread, checkpoint_id)

    async def failure(self, thread: str, checkpoint_id: str) -> tuple[str | None, str | None]:
        """Why a failed checkpoint failed, and the command that continues its thread."""
        return await self.app.reader.failure(thread, checkpoint_id)

    def link(self, interrupt_id: str | None, thread: str) -> str | None:
        """The web inbox's page for an interrupt (or thread), when the public URL is known."""
        if self._public_url is None:
            return None
        if interrupt_id is not None:
            return f"{self._public_url}/inbox#/interrupts/{interrupt_id}"
        return f"{self._public_url}/inbox#/threads/{thread}"

    async def events(self, after: str | None, limit: int = 500) -> list[ServerEvent]:
        """The store's changes after cursor ``after``, as events (each converted once)."""
        changes = await self.store.changes(after=after, limit=limit)
        out: list[ServerEvent] = []
        for change in changes:
            known = self._events.get(change.cursor)
            if known is None:
                known = await self._convert(change)
                self._events[change.cursor] = known
                if len(self._events) > 20_000:
                    self._events.popitem(last=False)
            out.append(known)
        return out

    async def kinds(self, after: str | None, limit: int = 500) -> list[tuple[str, EventType]]:
        """The store's changes after cursor ``after`` as (cursor, event type), reading nothing else.

        What the server's follower needs when nobody listens to whole events: the types to
        count; the event streams convert what they send (`events`)."""
        changes = await self.store.changes(after=after, limit=limit)
        return [(change.cursor, _KINDS[change.kind]) for change in changes]

    async def _convert(self, change: Any) -> ServerEvent:
        kind = _KINDS[change.kind]
        summary = "The run finished." if kind == "run.finished" else ""
        if kind == "run.failed":
            # The reason is the failed checkpoint's: a node's error, or why its continuation
            # could not run (`App.record_failure`).
            error = (await self.metadata(change.thread, change.checkpoint_id)).get("error")
            summary = f"The run failed: {error}" if error else FAILED_SUMMARY
        tool: str | None = None
        actor: str | None = change.actor
        if change.interrupt_id is not None:
            row = await self.store.get_interrupt(change.interrupt_id)
            if row is not None:
                tool = row.tool
                try:
                    summary = summary_of(self.interrupt(row).info)
                except CheckpointCorrupt:
                    summary = "(the question's record is damaged)"
                if kind == "interrupt.decided" and actor is None:
                    decided = self.decision(row)
                    actor = decided.actor if decided is not None else None
        return ServerEvent(
            id=f"{self.name}:{change.cursor}",
            type=kind,
            at=change.at,
            thread=change.thread,
            app=self.name,
            interrupt_id=change.interrupt_id,
            summary=summary,
            tool=tool,
            actor=actor,
            url=self.link(change.interrupt_id, change.thread),
        )
