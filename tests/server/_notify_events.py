"""Server events as the notification tests publish them."""

from __future__ import annotations

from typing import Any

from interlock.server._events import EventType, ServerEvent

__all__ = ["event"]


def event(id: str = "1", type: EventType = "interrupt.created", **changes: Any) -> ServerEvent:
    """An event on thread ``order-42`` of the payments app, about a refund waiting for approval."""
    fields: dict[str, Any] = {
        "at": 1_718_000_000.0,
        "thread": "order-42",
        "app": "payments",
        "interrupt_id": "i-7f3a",
        "summary": "Refund ¥5000 to ada?",
        "tool": "refund",
        "url": "https://inbox.example.com/i/7f3a",
    }
    return ServerEvent(id=id, type=type, **{**fields, **changes})
