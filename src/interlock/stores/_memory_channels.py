"""`MemoryStore`'s channel messages: one dict, by channel and interrupt.

As in `_memory_identities`: each method decides and changes the table without awaiting, so a
call is atomic for the tasks of one event loop. The arguments are checked already.
"""

from __future__ import annotations

import msgspec

from .._errors import UnknownChannelMessage
from ._channels import ChannelMessage

__all__ = ["ChannelTable"]


class ChannelTable:
    """The channel messages of one `MemoryStore`."""

    def __init__(self) -> None:
        self._messages: dict[tuple[str, str], ChannelMessage] = {}

    def claim(self, channel: str, interrupt_id: str, thread: str, now: float) -> bool:
        """`Store.claim_channel_message`."""
        if (channel, interrupt_id) in self._messages:
            return False
        self._messages[channel, interrupt_id] = ChannelMessage(
            channel=channel,
            interrupt_id=interrupt_id,
            thread=thread,
            ref=None,
            state="",
            claimed_at=now,
            updated_at=now,
        )
        return True

    def set(
        self, channel: str, interrupt_id: str, ref: str | None, state: str | None, now: float
    ) -> ChannelMessage:
        """`Store.set_channel_message`."""
        found = self._messages.get((channel, interrupt_id))
        if found is None:
            raise UnknownChannelMessage(channel, interrupt_id)
        record = msgspec.structs.replace(
            found,
            ref=found.ref if ref is None else ref,
            state=found.state if state is None else state,
            updated_at=now,
        )
        self._messages[channel, interrupt_id] = record
        return record

    def get(self, channel: str, interrupt_id: str) -> ChannelMessage | None:
        """`Store.get_channel_message`."""
        return self._messages.get((channel, interrupt_id))

    def forget_thread(self, thread: str) -> None:
        """Delete the thread's messages (the thread is deleted)."""
        for key in [k for k, m in self._messages.items() if m.thread == thread]:
            del self._messages[key]

    def clear(self) -> None:
        """Forget everything (the store closes)."""
        self._messages.clear()
