"""The messages channels posted about interrupts, as a store keeps them: the record, and the
checks every backend makes of what it is asked to write.

A channel (a Slack app, e-mail links...) posts one message per interrupt it shows, and
updates it later (the question was decided, or it expired) from whichever server process
sees that happen. So the store keeps, per channel and interrupt, who took the job of posting
(`Store.claim_channel_message`: the first caller of all processes), the posted message's
handle, and what the message shows now. The rows go with their thread.
"""

from __future__ import annotations

from typing import Final

import msgspec

from .._args import MAX_ID, check_id, check_name

__all__ = [
    "MAX_REF",
    "ChannelMessage",
    "check_channel_claim",
    "check_channel_key",
    "check_channel_update",
]

MAX_REF: Final = 4096
"""The longest handle of a posted message (`ChannelMessage.ref`), in characters."""


class ChannelMessage(msgspec.Struct, frozen=True, kw_only=True):
    """The message a channel posted about an interrupt, as the store keeps it."""

    channel: str
    """The channel's name, such as ``slack #approvals``."""
    interrupt_id: str
    """The interrupt the message is about."""
    thread: str
    """The interrupt's thread: the message's row goes when the thread is deleted or expires."""
    ref: str | None
    """The channel's handle of its message (Slack: ``{"channel": "C1", "ts": "1.2"}``); None
    until the message is posted."""
    state: str
    """What the message shows now: ``""`` (the open question) or a final state, such as
    ``decided``, that the channel chose."""
    claimed_at: float
    """Unix time the posting was claimed (the store's clock)."""
    updated_at: float
    """Unix time of its last change (the store's clock)."""


def check_channel_key(channel: object, interrupt_id: object) -> None:
    """Refuse a channel's name or an interrupt id no backend may keep.

    Raises:
        TypeError: Not a str.
        InvalidId: Empty, too long, or holding a character that has no place in a one-line
            name (the channel's) or in an id (the interrupt's).
    """
    check_name(channel, "channel")
    check_id(interrupt_id, "interrupt_id")


def check_channel_claim(channel: object, interrupt_id: object, thread: object) -> None:
    """Refuse a claim no backend may record: as `check_channel_key`, and the thread's id.

    Raises:
        TypeError, InvalidId: As `check_channel_key`, or for ``thread`` as for an id.
    """
    check_channel_key(channel, interrupt_id)
    check_id(thread, "thread")


def check_channel_update(ref: object, state: object) -> None:
    """Refuse a message's handle or state no backend may keep (None: unchanged).

    Raises:
        TypeError: Neither a str nor None.
        ValueError: ``ref`` is empty, longer than `MAX_REF` or holds a NUL character or a
            lone surrogate; ``state`` is longer than `interlock._args.MAX_ID` or is not one
            line of printable text.
    """
    if ref is not None:
        if not isinstance(ref, str):
            raise TypeError(
                f"ref must be a str (the channel's handle of its message) or None, "
                f"not {type(ref).__name__}"
            )
        if not ref or len(ref) > MAX_REF or "\x00" in ref:
            raise ValueError(
                f"ref must be the channel's handle of its message: 1 to {MAX_REF} characters "
                f"and no NUL character, not {ref!r:.80}"
            )
        try:
            ref.encode()
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"ref holds a lone surrogate at position {exc.start}, which no store can "
                "encode; pass valid Unicode text"
            ) from None
    if state is not None:
        if not isinstance(state, str):
            raise TypeError(
                f'state must be a str ("" for the open question) or None, '
                f"not {type(state).__name__}"
            )
        if state:
            check_name(state, "state")
        if len(state) > MAX_ID:
            raise ValueError(f"state must be at most {MAX_ID} characters, not {len(state)}")
