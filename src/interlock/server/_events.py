"""What the server tells the world: one record per change people care about.

The server reads the store's change feed and turns each change into a `ServerEvent`: the
event stream (``GET /v1/events``) sends them, and notifications (webhooks, email) deliver
them. ``id`` is the feed's cursor, so a client that reconnects with ``Last-Event-ID`` misses
nothing.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

__all__ = ["EVENT_TYPES", "FAILED_SUMMARY", "EventType", "ServerEvent"]

EventType = Literal[
    "interrupt.created",
    "interrupt.decided",
    "interrupt.expired",
    "interrupt.cancelled",
    "run.finished",
    "run.failed",
]
"""What happened: a question was asked, answered, expired or withdrawn; a run ended."""

EVENT_TYPES: tuple[EventType, ...] = (
    "interrupt.created",
    "interrupt.decided",
    "interrupt.expired",
    "interrupt.cancelled",
    "run.finished",
    "run.failed",
)
"""Every `EventType`, in a stable order."""

FAILED_SUMMARY: Final = "The run failed."
"""The summary of a ``run.failed`` event without its reason."""


class ServerEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One change, as the event stream and the notifications carry it."""

    id: str
    """The change feed's cursor at this event (the SSE ``id``); opaque."""
    type: EventType
    """What happened."""
    at: float
    """Unix time of the change."""
    thread: str
    """The thread it happened on."""
    app: str = ""
    """The name of the served app the thread belongs to."""
    interrupt_id: str | None = None
    """The interrupt, for ``interrupt.*`` events."""
    summary: str = ""
    """One line for a person: the question asked, or how the run ended."""
    tool: str | None = None
    """The tool whose call waits (or waited), if any."""
    actor: str | None = None
    """Who decided, for ``interrupt.decided``."""
    url: str | None = None
    """Where a person can look at it (the web inbox's page), when the server knows its URL."""
